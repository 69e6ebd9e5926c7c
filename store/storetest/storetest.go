// Package storetest is the conformance suite every core.Storage passes:
// the same tests run against the in-memory storage and PostgreSQL. A
// storage's test calls Run with a constructor that returns an empty
// storage for each test (or Exercise, which runs Run and every other
// check). The tests run in parallel, each on its own storage.
//
// Besides the cases every storage passes, the suite checks what a storage
// offers beyond core.Storage when it offers it: read-only transactions
// (core.Viewer), and the trace lines its transactions keep
// (core.TraceLog, read back through TraceReader).
//
// Its pieces serve a storage's own tests too: Hooked pauses a real
// transaction at a point (after HoldsLease, after Append) for a test to
// act while it is there; CheckAcquireWaits is the fence's central
// property as a check that returns what it found, so that a mutation test
// can require it to fail; ReuseHolder and CheckReuseHolderMutant play a
// holder reused across claims; BenchmarkConsumingWrite is the benchmark
// of the consuming write every storage runs, beside its own baselines.
// Every wait is bounded by WaitLimit and fails naming what it waited for.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
)

// Factory returns an empty storage for one test. It registers its own
// cleanup with t.
type Factory func(t *testing.T) core.Storage

const ttl = 10 * time.Second

var epoch = time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)

// Run runs the conformance suite against the storage newStorage makes.
func Run(t *testing.T, newStorage Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s core.Storage)
	}{
		{"ThreadsAndMessages", testThreadsAndMessages},
		{"UnknownThread", testUnknownThread},
		{"LeaseNeedsItsThread", testLeaseNeedsItsThread},
		{"ClaimRenewRelease", testClaimRenewRelease},
		{"ExpiryByClaimantsClock", testExpiryByClaimantsClock},
		{"SkewedClocks", testSkewedClocks},
		{"HoldsLeaseExpiredNotTaken", testHoldsLeaseExpiredNotTaken},
		{"HoldsLeaseAfterTakeover", testHoldsLeaseAfterTakeover},
		{"RefusedWriteLeavesStorageUnchanged", testRefusedWriteLeavesStorageUnchanged},
		{"RollbackLeavesStorageUnchanged", testRollbackLeavesStorageUnchanged},
		{"NewClaimNewHolder", testNewClaimNewHolder},
		{"RunLifecycle", testRunLifecycle},
		{"RunEndThenPlan", testRunEndThenPlan},
		{"ReplyAnswersOnce", testReplyAnswersOnce},
		{"AbandonFenced", testAbandonFenced},
		{"ConcurrentClaimsOneWinner", testConcurrentClaimsOneWinner},
		{"VersionCountsWrites", testVersionCountsWrites},
		{"PendingThreads", testPendingThreads},
		{"HolderReused", testHolderReused},
		{"ReuseHolderRefused", testReuseHolderRefused},
		{"AcquireWaitsForFencedWrite", testAcquireWaitsForFencedWrite},
		{"ViewReadsCommitted", testViewReadsCommitted},
		{"ViewRefusesWrites", testViewRefusesWrites},
		{"TraceLogKeepsCommittedWrites", testTraceLog},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each test has a storage of its own
			tt.fn(t, newStorage(t))
		})
	}
}

// proc is one simulated process: its own clock, its own workspace.
type proc struct {
	storage core.Storage
	clock   *coretest.Clock
	ws      *core.Workspace
}

func newProc(s core.Storage, name string, skew time.Duration, opts ...core.Option) *proc {
	c := coretest.NewClock(epoch.Add(skew))
	// Rounds off: the cases drive the storage's fences through sequences
	// the Workspace's rounds refuse (core tests the rounds).
	return &proc{storage: s, clock: c, ws: core.NewWorkspace(s, c, append([]core.Option{core.WithProcess(name), core.WithoutRoundsForTesting()}, opts...)...)}
}

func newThread(t *testing.T, p *proc, msgs ...string) core.ThreadID {
	t.Helper()
	id := core.ThreadID("thread-" + t.Name())
	require.NoError(t, p.ws.CreateThread(context.Background(), id))
	for _, m := range msgs {
		_, err := p.ws.Post(context.Background(), id, m)
		require.NoError(t, err)
	}
	return id
}

// State is everything storage holds about one thread.
type State struct {
	Thread *core.Thread
	Events []core.Event
	Lease  core.Lease
}

// Snapshot reads everything s holds about the thread, in one transaction,
// for a test to compare before and after a write that must change nothing.
func Snapshot(t testing.TB, s core.Storage, id core.ThreadID) State {
	t.Helper()
	var st State
	require.NoError(t, s.Update(context.Background(), func(ctx context.Context, tx core.Transaction) error {
		th, err := tx.Thread(ctx, id)
		if err != nil {
			return err
		}
		st.Thread = th.Clone()
		if st.Events, err = tx.Events(ctx, id); err != nil {
			return err
		}
		st.Lease, err = tx.Lease(ctx, id)
		return err
	}))
	return st
}
