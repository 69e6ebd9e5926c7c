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
// cleanup with t. A storage shared between tests fails cases that read
// what storage holds beyond their own threads (UnknownThread,
// PendingThreads) and others; a nil one fails the test it is made for.
type Factory func(t *testing.T) core.Storage

const ttl = 10 * time.Second

var epoch = time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)

// Run runs the conformance suite against the storage newStorage makes. A
// nil newStorage fails t.
func Run(t *testing.T, newStorage Factory) {
	if newStorage == nil {
		t.Fatal("storetest.Run: a nil Factory")
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s core.Storage)
	}{
		{"ThreadsAndMessages", testThreadsAndMessages},
		{"UnknownThread", testUnknownThread},
		{"InvalidInputRefused", testInvalidInputRefused},
		{"LeaseNeedsItsThread", testLeaseNeedsItsThread},
		{"ClaimRenewRelease", testClaimRenewRelease},
		{"ExpiryByClaimantsClock", testExpiryByClaimantsClock},
		{"ExpiryNeverEarly", testExpiryNeverEarly},
		{"OddTTLTraced", testOddTTLTraced},
		{"SkewedClocks", testSkewedClocks},
		{"HoldsLeaseExpiredNotTaken", testHoldsLeaseExpiredNotTaken},
		{"HoldsLeaseAfterTakeover", testHoldsLeaseAfterTakeover},
		{"HoldsLeaseEmptyHolder", testHoldsLeaseEmptyHolder},
		{"TransactionReadsOwnLeaseWrites", testTransactionReadsOwnLeaseWrites},
		{"RefusedWriteLeavesStorageUnchanged", testRefusedWriteLeavesStorageUnchanged},
		{"RollbackLeavesStorageUnchanged", testRollbackLeavesStorageUnchanged},
		{"RollbackUndoesEachWrite", testRollbackUndoesEachWrite},
		{"PanicKeepsNothing", testPanicKeepsNothing},
		{"KeptTransactionRefused", testKeptTransactionRefused},
		{"UpdateContext", testUpdateContext},
		{"HandedOutSlicesAreCopies", testHandedOutSlicesAreCopies},
		{"NewClaimNewHolder", testNewClaimNewHolder},
		{"RunLifecycle", testRunLifecycle},
		{"RunEndThenPlan", testRunEndThenPlan},
		{"RunEndThenStart", testRunEndThenStart},
		{"RunEndThenRelease", testRunEndThenRelease},
		{"ReplyAnswersOnce", testReplyAnswersOnce},
		{"AbandonFenced", testAbandonFenced},
		{"ConcurrentClaimsOneWinner", testConcurrentClaimsOneWinner},
		{"VersionCountsWrites", testVersionCountsWrites},
		{"PendingThreads", testPendingThreads},
		{"HolderReused", testHolderReused},
		{"ReuseHolderRefused", testReuseHolderRefused},
		{"RolledBackAcquireFreesHolder", testRolledBackAcquireFreesHolder},
		{"AcquireWaitsForFencedWrite", testAcquireWaitsForFencedWrite},
		{"ViewReadsCommitted", testViewReadsCommitted},
		{"ViewRefusesWrites", testViewRefusesWrites},
		{"TraceLogKeepsCommittedWrites", testTraceLog},
		{"Follow", testFollow},
		{"WatchEventsClosedWithContext", testWatchEventsClosed},
		{"SteerRecord", testSteerRecord},
		{"SteerRefusedWhenAbandoned", testSteerRefusedWhenAbandoned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each test has a storage of its own
			s := newStorage(t)
			if s == nil {
				t.Fatal("storetest.Run: the Factory returned a nil core.Storage")
			}
			tt.fn(t, s)
		})
	}
}

// proc is one simulated process: its own clock, its own workspace.
type proc struct {
	storage core.Storage
	clock   *coretest.Clock
	ws      *core.Workspace
}

// The Workspace keeps its rounds, as deployed: a case drives it in the
// protocol's order, and checks what the rounds refuse before storage (a
// write of an ended run, a second answer) on the storage port directly.
// A process restarted (a new Workspace under the same name) makes the
// claims a Workspace with a round open on the thread would refuse.
func newProc(s core.Storage, name string, skew time.Duration, opts ...core.Option) *proc {
	c := coretest.NewClock(epoch.Add(skew))
	return &proc{storage: s, clock: c, ws: core.NewWorkspace(s, c, append([]core.Option{core.WithProcess(name)}, opts...)...)}
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
