package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// traceReader is implemented by a storage whose transactions keep the
// trace lines of the writes they commit (core.TraceLog), to read them
// back: by thread, then tick.
type traceReader interface {
	TraceLines(ctx context.Context) ([]core.TraceEvent, error)
}

// A read-only transaction neither waits for a write in progress nor sees
// it: while a fenced write is paused inside its transaction, Plan (of b,
// whose claim a's took over), Thread, Lease and Pending return the state
// before it; once it commits, they see it.
func testViewReadsCommitted(t *testing.T, s core.Storage) {
	if _, ok := s.(core.Viewer); !ok {
		t.Skip("the storage is not a core.Viewer: its reads are transactions like its writes")
	}
	ctx := context.Background()
	h := &Hooked{Storage: s}
	a, b := newProc(h, "a", ttl), newProc(s, "b", 0)
	id := newThread(t, a, "m1")
	cb, err := b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err)
	ca, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	plan(t, a, ca, core.PlanRun)

	aDone, release, err := startPaused(ctx, h, a, ca)
	t.Cleanup(release)
	require.NoError(t, err)

	// Were these to wait for a's write, which waits for the test, the
	// deadline turns that into a failure, not a hang.
	rctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	p, err := b.ws.Plan(rctx, cb)
	require.NoError(t, err, "Plan waited for the fenced write")
	require.Equal(t, core.PlanRun, p.Kind, "Plan reads the state before the uncommitted write")
	th, err := b.ws.Thread(rctx, id)
	require.NoError(t, err)
	require.Empty(t, th.Runs())
	l, err := b.ws.Lease(rctx, id)
	require.NoError(t, err)
	require.Equal(t, core.Holder("ha"), l.Holder)
	pending, err := b.ws.Pending(rctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, pendingIDs(pending))

	release()
	err, werr := Await(aDone, "a's RunStart to return once let go")
	require.NoError(t, werr)
	require.NoError(t, err)
	th, err = b.ws.Thread(ctx, id)
	require.NoError(t, err)
	require.Len(t, th.Runs(), 1, "a read after the commit sees it")
}

// A write inside a read-only transaction fails and leaves nothing.
func testViewRefusesWrites(t *testing.T, s core.Storage) {
	v, ok := s.(core.Viewer)
	if !ok {
		t.Skip("the storage is not a core.Viewer")
	}
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a)
	before := Snapshot(t, s, id)
	err := v.View(ctx, func(ctx context.Context, tx core.Transaction) error {
		ver, err := tx.Bump(ctx, id)
		if err != nil {
			return err
		}
		return tx.Append(ctx, id, core.Event{Version: ver, Kind: core.MessagePosted, Message: 1, Text: "m"})
	})
	require.Error(t, err)
	require.Equal(t, before, Snapshot(t, s, id))
}

// The lines a storage keeps (core.TraceLog) are exactly the writes it
// committed: every write's line as the Workspace traced it; no refusal,
// no read, and nothing of a transaction rolled back.
func testTraceLog(t *testing.T, s core.Storage) {
	r, ok := s.(traceReader)
	if !ok {
		t.Skip("the storage keeps no trace lines (no traceReader)")
	}
	ctx := context.Background()
	kept := &lines{}
	a := newProc(s, "a", 0, core.WithTracer(kept))
	c := newProc(s, "c", ttl, core.WithTracer(kept))
	b := newProc(s, "b", 2*ttl, core.WithTracer(kept))
	id := newThread(t, a, "m1", "m2")
	ca, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	plan(t, a, ca, core.PlanRun)
	run, err := a.ws.RunStart(ctx, ca, 1)
	require.NoError(t, err)
	cc, err := c.ws.Claim(ctx, id, "hc", ttl)
	require.NoError(t, err)
	plan(t, c, cc, core.PlanAbandon)
	require.NoError(t, c.ws.Abandon(ctx, cc, run))
	require.ErrorIs(t, a.ws.RunEnd(ctx, ca, run, ""), core.ErrRunAbandoned)
	plan(t, c, cc, core.PlanRun)
	cb, err := b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err)
	_, err = c.ws.RunStart(ctx, cc, 2)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	require.NoError(t, b.ws.Release(ctx, cb))
	boom := errors.New("boom")
	err = s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		l, ok := tx.(core.TraceLog)
		require.True(t, ok, "a traceReader's transactions keep lines (core.TraceLog)")
		v, err := tx.Bump(ctx, id)
		require.NoError(t, err)
		require.NoError(t, l.LogTrace(ctx, core.TraceEvent{Tick: v, Action: core.ActionPost, Thread: id, Msg: 3}))
		return boom
	})
	require.ErrorIs(t, err, boom)

	var want []core.TraceEvent
	for _, ev := range kept.l {
		if !ev.Read {
			ev.Call, ev.Return = 0, 0
			want = append(want, ev)
		}
	}
	got, err := r.TraceLines(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// pendingIDs returns the threads' ids, in the listing's order.
func pendingIDs(ps []core.PendingThread) []core.ThreadID {
	ids := make([]core.ThreadID, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids
}
