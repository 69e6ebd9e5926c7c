package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/storetest"
)

const ttl = 10 * time.Second

// The fence is the row lock (ADR-0069, DESIGN §4): while a fenced write's
// transaction holds its claim's lease, an acquire by another holder waits
// for it, whether it goes through the Workspace (which locks the thread
// row first) or straight at the lease row with SQL. The server's lock view
// shows both waiting on the fenced write's backend; they go on only once
// it commits, so the run started under the claim is ordered before the
// next claim.
//
// A speculating write (the default) takes those locks with its check, in
// the round trip that carries its statements and COMMIT; the hook sends
// its first round trip early (a read of the log) so that the test can act
// while the write holds them.
func TestAcquireWaitsForFencedWrite(t *testing.T) {
	t.Parallel() // a schema of its own
	eachReadMode(t, testAcquireWaitsForFencedWrite)
}

func testAcquireWaitsForFencedWrite(t *testing.T, opts Options) {
	ctx := testCtx(t)
	s := newStoreWith(t, opts)
	a, b, h, id, ca := claimed(t, s)
	var err error
	b.clock.Advance(2 * ttl) // b sees a's lease expired: its claim would win at once

	paused, resume := make(chan uint32), make(chan struct{})
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release) // a failing test lets the paused transaction end
	h.AfterHoldsLease = func(ctx context.Context, tx core.Transaction) {
		_, err := tx.Events(ctx, id) // a round trip: the speculating write's check takes its locks
		require.NoError(t, err)
		paused <- backendPID(tx)
		<-resume
	}
	aDone := make(chan error, 1)
	go func() {
		_, err := a.ws.RunStart(ctx, ca, 1)
		aDone <- err
	}()
	pid := recvWithin(t, paused, 30*time.Second, "a's fenced write pausing with the lease row locked") // inside its transaction

	bDone := make(chan error, 1)
	var cb core.Claim
	go func() {
		c, err := b.ws.Claim(ctx, id, "hb", ttl)
		cb = c
		bDone <- err
	}()
	sqlDone := make(chan string, 1)
	raw := admin(t)
	go func() {
		// An acquire that skips the thread row: straight at the lease row.
		var holder string
		err := pgx.BeginFunc(ctx, raw, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, `SELECT holder FROM `+pgx.Identifier{s.Schema()}.Sanitize()+`.leases WHERE key = $1 FOR UPDATE`, string(id)).Scan(&holder)
		})
		if err != nil {
			holder = "error: " + err.Error()
		}
		sqlDone <- holder
	}()

	look := admin(t)
	// The lease is held on the thread's row (migration 0007): both wait
	// for that row, one queued behind the other, which waits for the
	// fenced write.
	const waitsForWrite = `wait_event_type = 'Lock' AND ($1::int = ANY (pg_blocking_pids(pid))
		OR EXISTS (SELECT 1 FROM unnest(pg_blocking_pids(pid)) b WHERE $1::int = ANY (pg_blocking_pids(b))))`
	waitFor(t, look, "the claim and the SQL acquire waiting on the fenced write's locks",
		`SELECT count(*) = 2 FROM pg_stat_activity WHERE `+waitsForWrite, int32(pid))
	var leaseWaiter bool
	require.NoError(t, look.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
		WHERE `+waitsForWrite+` AND query LIKE '%leases%FOR UPDATE%')`,
		int32(pid)).Scan(&leaseWaiter))
	require.True(t, leaseWaiter, "the lease row is not what the SQL acquire waits on")
	select {
	case err := <-bDone:
		t.Fatalf("the claim returned (%v) while the fenced write held the lease", err)
	case h := <-sqlDone:
		t.Fatalf("the lease row was locked (%s) while the fenced write held it", h)
	default:
	}

	release()
	require.NoError(t, recvWithin(t, aDone, 30*time.Second, "the fenced write returning"), "the fenced write of the lease's holder")
	// Once the fenced write commits, the SQL acquire and b's claim race for
	// the lease row: the SQL acquire sees a's lease (the fenced write kept
	// it) or b's (b's claim committed first), never an error.
	require.Contains(t, []string{"ha", "hb"}, recvWithin(t, sqlDone, 30*time.Second, "the SQL acquire returning"), "the SQL acquire, once the fenced write committed")
	require.NoError(t, recvWithin(t, bDone, 30*time.Second, "the claim returning"), "the claim, once the fenced write committed")

	st := storetest.Snapshot(t, s, id)
	require.Equal(t, core.Holder("hb"), st.Lease.Holder)
	last := st.Events[len(st.Events)-1]
	require.Equal(t, core.RunStarted, last.Kind)
	require.Equal(t, core.Holder("ha"), last.Holder)
	require.Equal(t, last.Version+1, st.Thread.Version, "the claim is not the write right after the run's start")
	// b, the new holder, finds the run a's claim started, and abandons it.
	p, err := b.ws.Plan(ctx, cb)
	require.NoError(t, err)
	require.Equal(t, core.PlanAbandon, p.Kind)
}

// A fenced write waits for an acquire that locked the lease first, and
// is then refused: the same lock, the other way round. A speculating
// fenced write waits in its check, which then fails, and the write, run
// again with locking reads, is refused.
func TestFencedWriteWaitsForAcquire(t *testing.T) {
	t.Parallel() // a schema of its own
	eachReadMode(t, testFencedWriteWaitsForAcquire)
}

func testFencedWriteWaitsForAcquire(t *testing.T, opts Options) {
	ctx := testCtx(t)
	s := newStoreWith(t, opts)
	a, b, _, id, ca := claimed(t, s)
	var err error
	b.clock.Advance(2 * ttl)

	// b acquires the lease as Workspace.Claim does, and pauses before
	// committing.
	paused, resume := make(chan uint32), make(chan struct{})
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release) // a failing test lets the paused transaction end
	bDone := make(chan error, 1)
	go func() {
		bDone <- s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
			if _, err := tx.Thread(ctx, id); err != nil {
				return err
			}
			l, err := tx.Lease(ctx, id)
			if err != nil {
				return err
			}
			if !l.Expired(b.clock.Now()) {
				return core.ErrThreadBusy
			}
			if _, err := tx.Bump(ctx, id); err != nil {
				return err
			}
			if err := tx.PutLease(ctx, core.Lease{Thread: id, Holder: "hb", ExpiresAt: b.clock.Now().Add(ttl)}); err != nil {
				return err
			}
			if _, err := tx.Events(ctx, id); err != nil { // a round trip: the locks are taken
				return err
			}
			paused <- backendPID(tx)
			<-resume
			return nil
		})
	}()
	pid := recvWithin(t, paused, 30*time.Second, "the acquire pausing with the lease row locked")

	aDone := make(chan error, 1)
	go func() {
		_, err := a.ws.RunStart(ctx, ca, 1)
		aDone <- err
	}()
	waitFor(t, admin(t), "the fenced write waiting on the acquire",
		`SELECT count(*) = 1 FROM pg_stat_activity
		  WHERE wait_event_type = 'Lock' AND $1::int = ANY (pg_blocking_pids(pid))`, int32(pid))
	select {
	case err := <-aDone:
		t.Fatalf("the fenced write returned (%v) while the acquire held the lease", err)
	default:
	}
	release()
	require.NoError(t, recvWithin(t, bDone, 30*time.Second, "the acquire returning"))
	require.ErrorIs(t, recvWithin(t, aDone, 30*time.Second, "the fenced write returning"), core.ErrThreadBusy, "a fenced write after another holder's acquire")
	th, err := a.ws.Thread(ctx, id)
	require.NoError(t, err)
	require.Empty(t, th.Runs())
	require.Equal(t, core.Seq(0), th.Taken)
}
