package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// lockWaitCancelled starts a RunStart on s while another session holds the
// thread's row, waits until the server shows the RunStart's backend (of
// application app) waiting for that lock, cancels the RunStart's context,
// and returns the RunStart's error, the thread, the blocking
// transaction, still open, and how many connections s's pool had as the
// RunStart began.
func lockWaitCancelled(t *testing.T, s *Store, app string) (error, core.ThreadID, pgx.Tx, int32) {
	t.Helper()
	ctx := testCtx(t)
	a, _, _, id, ca := claimed(t, s)
	var err error

	blocker, err := admin(t).Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = blocker.Rollback(context.Background()) })
	_, err = blocker.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{s.Schema()}.Sanitize()+`.threads WHERE id = $1 FOR UPDATE`, string(id))
	require.NoError(t, err)

	conns := s.pool.Stat().TotalConns()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := a.ws.RunStart(wctx, ca, 1)
		done <- err
	}()
	waitFor(t, admin(t), "the RunStart's backend waiting for the thread's row lock", waitingBackend, app)
	cancel()
	err, werr := storetest.Await(done, "the RunStart to return once its context was cancelled")
	require.NoError(t, werr)
	require.Error(t, err, "a RunStart cancelled in its lock wait")
	return err, id, blocker, conns
}

const waitingBackend = `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock')`

// A lock wait whose context is cancelled ends on the server too: pgx sends
// a cancel request, the backend stops waiting, and the write, which never
// got its lock, is known to have rolled back (not ErrCommitUnknown),
// whether it waited in a locking read or in a speculating write's check,
// in the round trip that carries COMMIT. The write keeps its connection
// (cancelRequest): the transaction is rolled back on it, and the pool has
// as many connections after as before. Once the lock is free, nothing of
// it was written.
func TestCancelledLockWaitEndsOnServer(t *testing.T) {
	t.Parallel() // a schema of its own
	eachReadMode(t, func(t *testing.T, opts Options) {
		app := randomName("tc_")
		opts.Schema = testSchema(t)
		s := openStoreWith(t, poolConfig(t, app), opts)
		err, id, blocker, conns := lockWaitCancelled(t, s, app)
		require.NotErrorIs(t, err, core.ErrCommitUnknown)
		keepsConns(t, s, conns, "a cancelled write")
		waitFor(t, admin(t), "no backend of the store waiting for a lock",
			`SELECT NOT (`+waitingBackend+`)`, app)
		require.NoError(t, blocker.Rollback(context.Background()))
		require.Empty(t, storetest.Snapshot(t, s, id).Thread.Runs(), "the cancelled write")
	})
}

// The mutant: pgx's default, which closes the connection as soon as the
// context ends (pgx then sends a cancel request on its way out, so the
// backend does stop waiting). The client cannot know whether the round
// trip that carried COMMIT committed: the write returns ErrCommitUnknown,
// the runner gives the round up, and the connection is lost, though
// nothing was written.
func TestCancelledLockWaitWithoutCancelRequest(t *testing.T) {
	t.Parallel() // a schema of its own
	app := randomName("tc_")
	s, err := openPool(context.Background(), poolConfig(t, app), Options{Schema: testSchema(t)})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	err, id, blocker, _ := lockWaitCancelled(t, s, app)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	waitFor(t, admin(t), "no backend of the store waiting for a lock", `SELECT NOT (`+waitingBackend+`)`, app)
	require.NoError(t, blocker.Rollback(context.Background()))
	require.Empty(t, storetest.Snapshot(t, s, id).Thread.Runs(), "the cancelled write")
}
