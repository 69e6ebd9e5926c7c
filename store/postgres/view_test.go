package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// Reads run in View: while a fenced write holds the thread's and the
// lease's rows, another process's Plan, Thread and Lease return at once,
// reading the state before the write, and the write then commits.
func TestViewDoesNotWaitForWrites(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	h := &hooked{Storage: s}
	a, b := newProc(h, "a"), newProc(s, "b")
	id := core.ThreadID("t")
	require.NoError(t, a.ws.CreateThread(ctx, id))
	_, err := a.ws.Post(ctx, id, "m1")
	require.NoError(t, err)
	ca, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)

	paused, resume := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release)
	h.afterHoldsLease = func(context.Context, core.Transaction) {
		close(paused)
		<-resume
	}
	aDone := make(chan error, 1)
	go func() {
		_, err := a.ws.RunStart(ctx, ca, 1)
		aDone <- err
	}()
	<-paused // a's write holds the thread row and the lease row

	// Were these to lock, they would wait for a's write, which waits for
	// the test: the deadline turns that into a failure, not a hang.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := b.ws.Plan(rctx, core.Claim{Thread: id, Holder: "hb"})
	require.NoError(t, err, "Plan waited for the fenced write's locks")
	require.Equal(t, core.PlanRun, p.Kind, "Plan reads the state before the uncommitted write")
	th, err := b.ws.Thread(rctx, id)
	require.NoError(t, err)
	require.Empty(t, th.Runs)
	l, err := b.ws.Lease(rctx, id)
	require.NoError(t, err)
	require.Equal(t, core.Holder("ha"), l.Holder)
	pending, err := b.ws.Pending(rctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, pending)

	release()
	require.NoError(t, <-aDone)
	th, err = b.ws.Thread(ctx, id)
	require.NoError(t, err)
	require.Len(t, th.Runs, 1, "a View after the commit sees it")
}

// A View is read-only: a write in it fails and leaves nothing.
func TestViewRefusesWrites(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	w := newProc(s, "a")
	require.NoError(t, w.ws.CreateThread(ctx, "t"))
	err := s.View(ctx, func(ctx context.Context, tx core.Transaction) error {
		v, err := tx.Bump(ctx, "t")
		if err != nil {
			return err
		}
		return tx.Append(ctx, "t", core.Event{Version: v, Kind: core.MessagePosted, Message: 1, Text: "m"})
	})
	require.Error(t, err)
	th, err := w.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Empty(t, th.Messages)
	require.Equal(t, uint64(0), th.Version)
}
