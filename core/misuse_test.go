package core_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
)

// Misuse of the Workspace's API by a careless caller (the session-42
// misuse pass, 8 Dec 2026): each call is refused with a sentinel error,
// writes nothing, and leaves the Workspace usable.

// A ttl too long for a lease's expiry to be carried (past April 2262, in
// a trace line's Unix nanoseconds) is refused by Claim and Renew, and the
// thread stays free for a claim with a sane one. Before, a ttl of
// math.MaxInt64 (a "lease for ever") wrapped round as it was rounded up
// to a microsecond: the lease was stamped expired in 1734, and another
// workspace's Claim took the thread at once.
func TestClaimRefusesTTLPastTheLastExpiry(t *testing.T) {
	w := newWorld(t, "m1")
	forever := time.Duration(math.MaxInt64)
	centuries := 250 * 365 * 24 * time.Hour // expiry past 2262: UnixNano overflows
	for _, long := range []time.Duration{forever, forever - 500, centuries} {
		w.refused(t, core.ErrInvalidArgument, func() error {
			_, err := w.a.Claim(w.ctx, "t", "ha", long)
			return err
		})
		lease, err := w.a.Lease(w.ctx, "t")
		require.NoError(t, err)
		require.Equal(t, core.Lease{}, lease, "a refused Claim took no lease")
	}
	c, err := w.a.Claim(w.ctx, "t", "ha", ttl)
	require.NoError(t, err, "the refused claims left no round open")
	for _, long := range []time.Duration{forever, centuries} {
		w.refused(t, core.ErrInvalidArgument, func() error { return w.a.Renew(w.ctx, c, long) })
	}
	_, err = w.b.Claim(w.ctx, "t", "hb", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy, "the lease is still ha's, as its Claim stamped it")
	// The longest a lease can last: a century, carried and checked.
	require.NoError(t, w.a.Renew(w.ctx, c, 100*365*24*time.Hour))
	w.valid(t)
}

// A nil context is refused with ErrInvalidArgument by every call, before
// it reserves anything: the round goes on, and the thread can be claimed.
// Before, it reached storage, whose panic left a Claim's round reserved
// (the workspace refused the thread's later claims, as a round still
// open that the caller never got a claim for) or a round's call in flight
// (its later calls were refused and Crash waited for ever).
func TestNilContextRefused(t *testing.T) {
	w := newWorld(t, "m1")
	var nilCtx context.Context
	_, err := w.a.Claim(nilCtx, "t", "ha", ttl)
	require.ErrorIs(t, err, core.ErrInvalidArgument, "Claim")
	_, _, err = w.a.ClaimThenPlan(nilCtx, "t", "ha", ttl)
	require.ErrorIs(t, err, core.ErrInvalidArgument, "ClaimThenPlan")
	_, _, _, err = w.a.ClaimThenStart(nilCtx, "t", "ha", ttl)
	require.ErrorIs(t, err, core.ErrInvalidArgument, "ClaimThenStart")
	c, err := w.a.Claim(w.ctx, "t", "ha", ttl)
	require.NoError(t, err, "no round was left reserved")
	calls := map[string]func() error{
		"Plan":        func() error { _, err := w.a.Plan(nilCtx, c); return err },
		"Renew":       func() error { return w.a.Renew(nilCtx, c, ttl) },
		"Release":     func() error { return w.a.Release(nilCtx, c) },
		"Abandon":     func() error { return w.a.Abandon(nilCtx, c, 1) },
		"RunStart":    func() error { _, err := w.a.RunStart(nilCtx, c, 1); return err },
		"Reply":       func() error { return w.a.Reply(nilCtx, c, 1, 1) },
		"Ask":         func() error { _, err := w.a.Ask(nilCtx, c, 1, "q"); return err },
		"RunEnd":      func() error { return w.a.RunEnd(nilCtx, c, 1, "") },
		"Steer":       func() error { _, _, err := w.a.Steer(nilCtx, c, 1); return err },
		"SteerRecord": func() error { return w.a.SteerRecord(nilCtx, c, 1, 1) },
		"RunEndThenStart": func() error {
			_, _, err := w.a.RunEndThenStart(nilCtx, c, 1, "", 0, false)
			return err
		},
		"Crash":        func() error { return w.a.Crash(nilCtx, c) },
		"CreateThread": func() error { return w.a.CreateThread(nilCtx, "u") },
		"Threads":      func() error { _, err := w.a.Threads(nilCtx); return err },
		"Pending":      func() error { _, err := w.a.Pending(nilCtx); return err },
		"Thread":       func() error { _, err := w.a.Thread(nilCtx, "t"); return err },
		"Lease":        func() error { _, err := w.a.Lease(nilCtx, "t"); return err },
		"Post":         func() error { _, err := w.a.Post(nilCtx, "t", "m2"); return err },
		"Answer":       func() error { _, _, err := w.a.Answer(nilCtx, "t", 1); return err },
		"Follow": func() error {
			return w.a.Follow(nilCtx, "t", 0, func(core.ThreadEvent) error { return nil })
		},
	}
	for name, call := range calls {
		w.refused(t, core.ErrInvalidArgument, call)
		require.ErrorContains(t, call(), name+" given a nil context")
	}
	p, err := w.a.Plan(w.ctx, c)
	require.NoError(t, err, "the round goes on: no call was left in flight")
	_, err = w.a.RunStart(w.ctx, c, p.Message)
	require.NoError(t, err)
	require.NoError(t, w.a.Crash(w.ctx, c), "Crash does not wait for a call left in flight")
	w.valid(t)
}

// A nil Option is ignored, as tracecheck.NewChecker ignores one (an
// option left unset): before, NewWorkspace panicked with a bare nil
// pointer dereference.
func TestNilOptionIgnored(t *testing.T) {
	var ws *core.Workspace
	require.NotPanics(t, func() {
		ws = core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"), nil)
	})
	require.Equal(t, "A", ws.Process(), "the other options are applied")
	require.NoError(t, ws.CreateThread(context.Background(), "t"))
}

// panickingTracer panics on the lines of one action, as a buggy Tracer
// would.
type panickingTracer struct{ on core.Action }

func (p panickingTracer) Trace(ev core.TraceEvent) {
	if ev.Action == p.on {
		panic("the tracer's bug")
	}
}

// A Tracer's panic goes on up the call and leaves the round as it was
// mid-call, as the Workspace's doc says: after a Claim's, this
// workspace refuses the thread's later claims; after a Plan's, Crash
// waits for the call in flight until its ctx ends. (A careless Tracer
// found by the session-42 misuse pass; the doc said nothing of it.)
func TestTracerPanicLeavesTheRoundMidCall(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	ws := core.NewWorkspace(s, coretest.NewClock(epoch), core.WithTracer(panickingTracer{on: core.ActionClaim}))
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err := ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	require.PanicsWithValue(t, "the tracer's bug", func() { _, _ = ws.Claim(ctx, "t", "ha", ttl) })
	_, err = ws.Claim(ctx, "t", "hb", ttl)
	require.ErrorIs(t, err, core.ErrOutOfOrder, "the panicked Claim's round is still open")

	ws = core.NewWorkspace(s, coretest.NewClock(epoch), core.WithTracer(panickingTracer{on: core.ActionPlan}))
	require.NoError(t, ws.CreateThread(ctx, "u"))
	_, err = ws.Post(ctx, "u", "m1")
	require.NoError(t, err)
	c, err := ws.Claim(ctx, "u", "hc", ttl)
	require.NoError(t, err)
	require.PanicsWithValue(t, "the tracer's bug", func() { _, _ = ws.Plan(ctx, c) })
	_, err = ws.Plan(ctx, c)
	require.ErrorIs(t, err, core.ErrOutOfOrder, "a call of the round is in flight")
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, ws.Crash(cctx, c), context.DeadlineExceeded, "Crash waits for the call in flight until its ctx ends")
}
