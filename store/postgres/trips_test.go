package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// tripThreads creates n threads, posts a message to each and claims each
// with ClaimThenPlan (a run of message 1 planned), on one Workspace over
// s: the Store then holds every lease, and writes from its cache.
func tripThreads(t *testing.T, s *Store, n int) (*proc, []core.Claim) {
	t.Helper()
	ctx := context.Background()
	a := newProc(s, "a")
	var claims []core.Claim
	for i := range n {
		id := core.ThreadID(fmt.Sprintf("t%d", i))
		require.NoError(t, a.ws.CreateThread(ctx, id))
		_, err := a.ws.Post(ctx, id, "m1")
		require.NoError(t, err)
		c, p, err := a.ws.ClaimThenPlan(ctx, id, core.Holder(fmt.Sprintf("h%d", i)), ttl)
		require.NoError(t, err)
		require.Equal(t, core.PlanRun, p.Kind)
		claims = append(claims, c)
	}
	return a, claims
}

// holdRow locks thread id's row from another connection until the
// returned function is called.
func holdRow(t *testing.T, s *Store, id core.ThreadID) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := admin(t).Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT FROM `+pgx.Identifier{s.Schema()}.Sanitize()+`.threads WHERE id = $1 FOR UPDATE`, string(id))
	require.NoError(t, err)
	return func() { require.NoError(t, tx.Rollback(ctx)) }
}

// awaitQueued waits until n writes wait in s's trips behind the one in
// flight.
func awaitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.trips.mu.Lock()
		busy, queued := s.trips.busy, len(s.trips.queue)
		s.trips.mu.Unlock()
		if busy && queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, %d writes wait behind the one in flight (in flight: %v); want %d", queued, busy, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The one-trip writes that become ready while one is in flight go
// together in the next round trip, each its own implicit transaction
// behind a Sync of its own (trips.go). A RunStart on t0 waits for t0's
// row, locked from another connection; the RunStarts on t1, t2 and t3
// wait behind it, and go in one round trip once it is done: two round
// trips for the four writes. The fence holds write by write: t2's lease
// was taken behind the Store's back, so its check fails, and, run again
// with locking reads, its start is refused (ErrThreadBusy) with nothing
// of a run written (only its RunRefused notice), while the writes beside
// it in the pipeline commit. A write
// whose context ends while it waits in the queue leaves it unsent: a
// failure, not an unknown outcome, and nothing written.
func TestTripsTogether(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := context.Background()
	s := newStore(t)
	a, claims := tripThreads(t, s, 5)
	q := pgx.Identifier{s.Schema()}.Sanitize()
	_, err := admin(t).Exec(ctx, `UPDATE `+q+`.threads SET lease_holder = 'intruder', version = version + 1 WHERE id = 't2'`)
	require.NoError(t, err)
	events2, _, version2, _ := rowCounts(t, admin(t), s.Schema(), "t2")

	release := holdRow(t, s, "t0")
	trips, conflicts := s.stats.roundTrips.Load(), s.stats.conflicts.Load()
	errs := make([]error, 4)
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = a.ws.RunStart(ctx, claims[i], 1)
		}()
	}
	start(0)
	awaitQueued(t, s, 0)
	for i := 1; i < 4; i++ {
		start(i)
	}
	awaitQueued(t, s, 3)
	release()
	wg.Wait()
	for i, err := range errs {
		if i == 2 {
			require.ErrorIs(t, err, core.ErrThreadBusy, "t2's start, its lease another holder's")
			continue
		}
		require.NoError(t, err, "t%d's start", i)
		_, _, _, taken := rowCounts(t, admin(t), s.Schema(), core.ThreadID(fmt.Sprintf("t%d", i)))
		require.Equal(t, int64(1), taken, "t%d's start consumed its prompt", i)
	}
	// t2's refused start wrote nothing of a run: only its RunRefused
	// notice, at the version as it stood.
	events, _, version, _ := rowCounts(t, admin(t), s.Schema(), "t2")
	require.Equal(t, []int64{int64(events2) + 1, version2}, []int64{int64(events), version}, "t2 written under another holder's lease")
	var kind string
	require.NoError(t, admin(t).QueryRow(ctx, `SELECT kind FROM `+q+`.events WHERE thread_id = 't2' ORDER BY seq DESC LIMIT 1`).Scan(&kind))
	require.Equal(t, string(core.RunRefused), kind, "t2's last event")
	require.Equal(t, int64(1), s.stats.conflicts.Load()-conflicts, "t2's check, failed")
	// t0's, then t1's to t3's together, then t2's again with locking
	// reads (its read, and the commit of its RunRefused notice).
	require.Equal(t, int64(2+2), s.stats.roundTrips.Load()-trips, "round trips")

	// A write whose context ends in the queue.
	release = holdRow(t, s, "t0")
	done := make(chan error, 1)
	go func() { done <- a.ws.Renew(ctx, claims[0], ttl) }()
	awaitQueued(t, s, 0)
	wctx, cancel := context.WithCancel(ctx)
	queued := make(chan error, 1)
	_, _, version4, _ := rowCounts(t, admin(t), s.Schema(), "t4")
	go func() { queued <- a.ws.Renew(wctx, claims[4], ttl) }()
	awaitQueued(t, s, 1)
	cancel()
	err = <-queued
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, core.ErrCommitUnknown, "a write that was never sent")
	awaitQueued(t, s, 0)
	release()
	require.NoError(t, <-done)
	_, _, version, _ = rowCounts(t, admin(t), s.Schema(), "t4")
	require.Equal(t, version4, version, "t4 renewed by a write that left the queue")
}

// The concurrent executions (sim.RunConcurrent, run -concurrent) on a
// Store, with enough threads and runners that their writes meet in the
// Store's trips: the invariants hold, every message is consumed, the Go
// trace checker accepts the trace, and some writes went together (fewer
// round trips carried the one-trip writes than there were writes). An
// execution whose writes never met is followed by another seed, up to 5.
func TestTripsInConcurrentExecutions(t *testing.T) {
	t.Parallel() // schemas of their own
	for seed := range uint64(5) {
		s := newStore(t)
		res, err := sim.RunConcurrent(context.Background(), sim.ConcurrentConfig{Seed: seed, Procs: 4, Threads: 8, Storage: s})
		require.NoError(t, err, "seed %d", seed)
		_, err = tracecheck.Check(res.Lines)
		require.NoError(t, err, "seed %d", seed)
		writes, sends := s.stats.tripWrites.Load(), s.stats.tripSends.Load()
		t.Logf("seed %d: %d one-trip writes in %d round trips", seed, writes, sends)
		if writes > sends {
			return
		}
	}
	t.Fatal("in 5 concurrent executions, no two one-trip writes went in one round trip")
}

// A write whose check failed (another Store posted to the thread the
// Store holds) runs again with locking reads; the write after it, the
// locking one having committed, speculates again: one round trip, no
// check failed. (Before, the thread stayed out of speculation until the
// lease's next write, and every write of the turn took two round trips.)
func TestSpeculationResumesAfterConflict(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := context.Background()
	s := newStore(t)
	a, c := claimedThread(t, s)
	other := openStore(t, poolConfig(t, randomName("tc_")), s.Schema())
	_, err := newProc(other, "poster").ws.Post(ctx, "t", "m2")
	require.NoError(t, err)
	trips, conflicts := s.stats.roundTrips.Load(), s.stats.conflicts.Load()
	run, err := a.ws.RunStart(ctx, c, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.stats.conflicts.Load()-conflicts, "the start's check, failed on the other Store's post")
	require.Equal(t, int64(1+2), s.stats.roundTrips.Load()-trips, "the failed check, then the start with locking reads")
	trips = s.stats.roundTrips.Load()
	require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
	require.Equal(t, int64(1), s.stats.roundTrips.Load()-trips, "the run's end, speculating again")
	require.Equal(t, int64(1), s.stats.conflicts.Load()-conflicts)
}
