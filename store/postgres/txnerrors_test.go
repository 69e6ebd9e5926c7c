package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// Update and View with a context already ended return its error and never
// call fn, as the in-memory storage does: not even a fn that would need
// no round trip.
func TestEndedContextRunsNothing(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	called := false
	fn := func(context.Context, core.Transaction) error { called = true; return nil }
	require.ErrorIs(t, s.Update(ctx, fn), context.Canceled)
	require.ErrorIs(t, s.View(ctx, fn), context.Canceled)
	require.False(t, called, "fn called with an ended context")
}

// A statement's failure loses the transaction even when fn ignores it and
// returns nil: Update returns the failure, wrapped, and keeps nothing of
// what fn wrote before it (here a thread created in the same
// transaction; the failure is a read whose context had ended).
func TestIgnoredStatementFailureFailsUpdate(t *testing.T) {
	ctx := testCtx(t)
	s := newStore(t)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		require.NoError(t, tx.CreateThread(ctx, "u"))
		_, err := tx.ThreadIDs(ended)
		require.ErrorIs(t, err, context.Canceled)
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "a statement of the transaction failed")
	ids, err := core.NewWorkspace(s, core.SystemClock{}).Threads(ctx)
	require.NoError(t, err)
	require.Empty(t, ids, "threads kept by a transaction whose statement failed")
}

// A View whose connection is lost before its COMMIT is a plain failure,
// not core.ErrCommitUnknown: it wrote nothing, so nothing is in doubt.
// (With LockingReads a View stays open after its read, and commits in a
// round trip of its own.)
func TestViewLostConnectionNotUnknown(t *testing.T) {
	ctx := testCtx(t)
	app := randomName("tc_")
	s := openStoreWith(t, poolConfig(t, app), Options{Schema: testSchema(t), LockingReads: true})
	require.NoError(t, core.NewWorkspace(s, core.SystemClock{}).CreateThread(ctx, "t"))
	look := admin(t)
	err := s.View(ctx, func(ctx context.Context, tx core.Transaction) error {
		if _, err := tx.Thread(ctx, "t"); err != nil {
			return err
		}
		_, err := look.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app)
		require.NoError(t, err)
		waitFor(t, look, "the View's backend gone", `SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = $1`, app)
		return nil
	})
	require.Error(t, err)
	require.NotErrorIs(t, err, core.ErrCommitUnknown)
	require.ErrorContains(t, err, "read-only transaction lost its connection")
}

// A transaction that reads and writes nothing takes no connection and
// makes no round trip.
func TestEmptyTransactionNoRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	s := newStore(t)
	trips, acquired := s.stats.roundTrips.Load(), s.pool.Stat().AcquireCount()
	fn := func(context.Context, core.Transaction) error { return nil }
	require.NoError(t, s.Update(ctx, fn))
	require.NoError(t, s.View(ctx, fn))
	require.Equal(t, trips, s.stats.roundTrips.Load())
	require.Equal(t, acquired, s.pool.Stat().AcquireCount(), "connections taken")
}

// A View that reads two threads (two round trips, where a one-shot read
// has one) reads them both, in one snapshot: its first one-shot attempt
// is run again in a transaction that stays open.
func TestViewOfTwoThreads(t *testing.T) {
	ctx := testCtx(t)
	s := newStore(t)
	p := newProc(s, "a")
	for _, id := range []core.ThreadID{"a", "b"} {
		require.NoError(t, p.ws.CreateThread(ctx, id))
		_, err := p.ws.Post(ctx, id, "m-"+string(id))
		require.NoError(t, err)
	}
	var texts []string
	require.NoError(t, s.View(ctx, func(ctx context.Context, tx core.Transaction) error {
		texts = texts[:0]
		for _, id := range []core.ThreadID{"a", "b"} {
			th, err := tx.Thread(ctx, id)
			if err != nil {
				return err
			}
			texts = append(texts, th.Messages[0].Text)
		}
		return nil
	}))
	require.Equal(t, []string{"m-a", "m-b"}, texts)
}

// When one of a Store's watchers stops, the others keep hearing their
// threads' writes: the shared listener ends with the last watcher only.
func TestWatcherLeavingKeepsTheOthers(t *testing.T) {
	ctx := testCtx(t)
	s := newStore(t)
	ws := core.NewWorkspace(s, core.SystemClock{})
	for _, id := range []core.ThreadID{"a", "b"} {
		require.NoError(t, ws.CreateThread(ctx, id))
	}
	actx, stopA := context.WithCancel(ctx)
	chA, err := s.WatchEvents(actx, "a")
	require.NoError(t, err)
	chB, err := s.WatchEvents(ctx, "b")
	require.NoError(t, err)
	stopA()
	for range chA { // closed once a's watcher has left
	}
	_, err = ws.Post(ctx, "b", "m")
	require.NoError(t, err)
	recvWithin(t, chB, 10*time.Second, "b's notice after a's watcher left")
}

// A write the server refuses in the round trip that carries its COMMIT
// (here a trigger raises on its event's insert, in a transaction that read
// under lock first) is known to have rolled back, and keeps its
// connection: the transaction is rolled back on it.
func TestRefusedWriteKeepsTheConnection(t *testing.T) {
	ctx := testCtx(t)
	s := newStoreWith(t, Options{LockingReads: true})
	a, c := claimedThread(t, s)
	q := pgx.Identifier{s.Schema()}.Sanitize()
	_, err := admin(t).Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION %[1]s.refuse() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'refused'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON %[1]s.events FOR EACH ROW EXECUTE FUNCTION %[1]s.refuse();`, q))
	require.NoError(t, err)
	conns := s.pool.Stat().TotalConns()
	_, err = a.ws.RunStart(ctx, c, 1)
	require.ErrorContains(t, err, "refused")
	require.NotErrorIs(t, err, core.ErrCommitUnknown)
	keepsConns(t, s, conns, "a refused write")
}

// keepsConns checks that s's pool keeps its conns connections for a
// second after what: a connection released inside a transaction is
// destroyed, by a goroutine of the pool's.
func keepsConns(t *testing.T, s *Store, conns int32, what string) {
	t.Helper()
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		require.Equal(t, conns, s.pool.Stat().TotalConns(), "the pool's connections after %s", what)
	}
}
