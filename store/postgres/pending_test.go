package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// A poll for pending threads that the server ends while it executes (here
// its context cancelled while it waits for a lock on the threads table)
// returns the error, not the threads read before it as the whole list.
// The pool has one connection and the poll ran once on it before, so its
// statement is prepared and the error comes with the rows (pgx's Query
// returns none for a statement sent). (The ninth mutation pass: a
// PendingThreads that did not check its rows' error failed no test.)
func TestPendingThreadsEndedInExecution(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	app := randomName("tc_")
	cfg := poolConfig(t, app)
	cfg.MaxConns = 1
	s := openStore(t, cfg, testSchema(t))
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err := ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	got, err := s.PendingThreads(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1, "t, with m1 not taken")

	blocker, err := admin(t).Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = blocker.Rollback(context.Background()) })
	_, err = blocker.Exec(ctx, `LOCK TABLE `+pgx.Identifier{s.Schema(), "threads"}.Sanitize()+` IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		pending []core.PendingThread
		err     error
	}
	done := make(chan answer, 1)
	go func() {
		p, err := s.PendingThreads(pctx)
		done <- answer{p, err}
	}()
	waitFor(t, admin(t), "the poll's backend waiting for the threads table's lock", waitingBackend, app)
	cancel()
	a, werr := storetest.Await(done, "the poll to return once its context was cancelled")
	require.NoError(t, werr)
	require.Error(t, a.err, "a poll cancelled in its execution returned %v", a.pending)
	require.Nil(t, a.pending)

	require.NoError(t, blocker.Rollback(context.Background()))
	got, err = s.PendingThreads(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1, "t, once the lock is free")
}

// The lease a poll for pending threads lists with a thread is the one the
// thread's own read gives, in UTC as every time the Store returns, not in
// the process's local time. (The ninth mutation pass: a poll that listed
// the lease's expiry as the driver decoded it failed no test.)
func TestPendingThreadsLeaseAsRead(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err := ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	_, err = ws.Claim(ctx, "t", "h1", time.Minute)
	require.NoError(t, err)
	l, err := ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Holder("h1"), l.Holder)
	got, err := s.PendingThreads(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, time.UTC, got[0].Lease.ExpiresAt.Location())
	require.Equal(t, l, got[0].Lease)
}
