package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

const ttl = 10 * time.Second

var epoch = time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)

// world is two processes, a poster and a trace over one storage.
type world struct {
	ctx    context.Context
	s      *memory.Store
	rec    *tracecheck.Recorder
	a, b   *core.Workspace
	clockB *coretest.Clock
}

func newWorld(t *testing.T, msgs ...string) *world {
	t.Helper()
	w := &world{ctx: context.Background(), s: memory.New(), rec: &tracecheck.Recorder{}, clockB: coretest.NewClock(epoch)}
	w.a = core.NewWorkspace(w.s, coretest.NewClock(epoch), core.WithProcess("A"), core.WithTracer(w.rec))
	w.b = core.NewWorkspace(w.s, w.clockB, core.WithProcess("B"), core.WithTracer(w.rec))
	require.NoError(t, w.a.CreateThread(w.ctx, "t"))
	for _, m := range msgs {
		_, err := w.a.Post(w.ctx, "t", m)
		require.NoError(t, err)
	}
	return w
}

// refused checks that a call was refused with want, wrote nothing and
// traced nothing, and that the trace is still valid.
func (w *world) refused(t *testing.T, want error, call func() error) {
	t.Helper()
	before, err := w.a.Thread(w.ctx, "t")
	require.NoError(t, err)
	lines := w.rec.Len()
	require.ErrorIs(t, call(), want)
	after, err := w.a.Thread(w.ctx, "t")
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused call wrote")
	require.Equal(t, lines, w.rec.Len(), "a refused call traced")
	w.valid(t)
}

func (w *world) valid(t *testing.T) {
	t.Helper()
	_, err := tracecheck.Check(w.rec.Lines())
	require.NoError(t, err)
}

// A Release after a refused start (a deferred Release) is refused: the
// refusal ended the round.
func TestReleaseAfterRefusedStart(t *testing.T) {
	w := newWorld(t, "m1")
	ca, err := w.a.Claim(w.ctx, "t", "ha", ttl)
	require.NoError(t, err)
	p, err := w.a.Plan(w.ctx, ca)
	require.NoError(t, err)
	w.clockB.Advance(ttl)
	_, err = w.b.Claim(w.ctx, "t", "hb", ttl)
	require.NoError(t, err)
	_, err = w.a.RunStart(w.ctx, ca, p.Message)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	w.refused(t, core.ErrRoundOver, func() error { return w.a.Release(w.ctx, ca) })
	w.refused(t, core.ErrRoundOver, func() error { return w.a.Crash(w.ctx, ca) })
}

// The fence refuses a write whose claim's holder is not the lease's
// holder when nobody holds the lease at all: here A's claim lapsed, B
// claimed the thread and released it. A's start is refused (consumed
// nothing) as it is when another holds the lease
// (TestReleaseAfterRefusedStart), and the trace stays valid.
func TestStartFencedWhenNobodyHolds(t *testing.T) {
	w := newWorld(t, "m1")
	ca, err := w.a.Claim(w.ctx, "t", "ha", ttl)
	require.NoError(t, err)
	p, err := w.a.Plan(w.ctx, ca)
	require.NoError(t, err)
	w.clockB.Advance(ttl)
	cb, err := w.b.Claim(w.ctx, "t", "hb", ttl)
	require.NoError(t, err)
	require.NoError(t, w.b.Release(w.ctx, cb))
	l, err := w.a.Lease(w.ctx, "t")
	require.NoError(t, err)
	require.Empty(t, l.Holder, "nobody holds the thread")
	_, err = w.a.RunStart(w.ctx, ca, p.Message)
	require.ErrorIs(t, err, core.ErrThreadBusy, "a start under a claim whose lease another took and released")
	th, err := w.a.Thread(w.ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Seq(0), th.Taken, "the refused start consumed the message")
	w.valid(t)
}

// Calls out of the round's order are refused: RunStart without a Plan, a
// Reply or RunStart other than the plan, Release or Plan during a run, Ask
// for another run, a second Claim while the round is open.
func TestOutOfOrderRefused(t *testing.T) {
	w := newWorld(t, "m1", "m2")
	c, err := w.a.Claim(w.ctx, "t", "ha", ttl)
	require.NoError(t, err)
	w.refused(t, core.ErrOutOfOrder, func() error { _, err := w.a.RunStart(w.ctx, c, 1); return err })
	w.refused(t, core.ErrOutOfOrder, func() error { return w.a.Reply(w.ctx, c, 1, 1) })
	w.refused(t, core.ErrOutOfOrder, func() error { _, err := w.a.Claim(w.ctx, "t", "ha2", ttl); return err })
	p, err := w.a.Plan(w.ctx, c)
	require.NoError(t, err)
	require.Equal(t, core.PlanRun, p.Kind)
	w.refused(t, core.ErrOutOfOrder, func() error { _, err := w.a.RunStart(w.ctx, c, 2); return err })
	w.refused(t, core.ErrOutOfOrder, func() error { return w.a.Release(w.ctx, c) })
	w.refused(t, core.ErrOutOfOrder, func() error { _, err := w.a.Plan(w.ctx, c); return err })
	run, err := w.a.RunStart(w.ctx, c, p.Message)
	require.NoError(t, err)
	w.refused(t, core.ErrOutOfOrder, func() error { return w.a.Release(w.ctx, c) })
	w.refused(t, core.ErrOutOfOrder, func() error { _, err := w.a.Ask(w.ctx, c, run+1, "q"); return err })
	req, err := w.a.Ask(w.ctx, c, run, "q")
	require.NoError(t, err)
	req2, err := w.a.Ask(w.ctx, c, run, "q2")
	require.NoError(t, err)
	require.NoError(t, w.a.RunEnd(w.ctx, c, run, ""))
	p, err = w.a.Plan(w.ctx, c)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanReply, Message: 2, Request: req, Taken: 1, Posted: p.Posted}, p)
	w.refused(t, core.ErrOutOfOrder, func() error { return w.a.Reply(w.ctx, c, req, 1) })
	w.refused(t, core.ErrOutOfOrder, func() error { return w.a.Reply(w.ctx, c, req2, 2) }) // the other open request
	require.NoError(t, w.a.Reply(w.ctx, c, req, 2))
	w.refused(t, core.ErrOutOfOrder, func() error { return w.a.Reply(w.ctx, c, req, 2) }) // a stale plan
	require.NoError(t, w.a.Release(w.ctx, c))
	w.refused(t, core.ErrRoundOver, func() error { _, err := w.a.Ask(w.ctx, c, run, "q"); return err })
	w.refused(t, core.ErrRoundOver, func() error { return w.a.Renew(w.ctx, c, ttl) })
	w.valid(t)
}

// A claim is refused by another workspace (another process), a claim
// built by hand by every workspace, and a holder this workspace claimed
// with before.
func TestClaimBelongsToItsWorkspace(t *testing.T) {
	w := newWorld(t, "m1")
	c, err := w.a.Claim(w.ctx, "t", "ha", ttl)
	require.NoError(t, err)
	w.refused(t, core.ErrInvalidArgument, func() error { _, err := w.b.Plan(w.ctx, c); return err })
	w.refused(t, core.ErrInvalidArgument, func() error { return w.b.Release(w.ctx, c) })
	w.refused(t, core.ErrInvalidArgument, func() error {
		_, err := w.a.Plan(w.ctx, core.Claim{Thread: "t", Holder: "ha"})
		return err
	})
	forged := c
	forged.Holder = "hx"
	w.refused(t, core.ErrInvalidArgument, func() error { return w.a.Release(w.ctx, forged) })
	require.NoError(t, w.a.Release(w.ctx, c))
	w.refused(t, core.ErrHolderReused, func() error { _, err := w.a.Claim(w.ctx, "t", "ha", ttl); return err })
	_, err = w.a.Claim(w.ctx, "t", "ha2", ttl)
	require.NoError(t, err)
	w.valid(t)
}

// A holder refused as busy held nothing: it may claim later.
func TestBusyHolderNotSpent(t *testing.T) {
	w := newWorld(t)
	_, err := w.b.Claim(w.ctx, "t", "hb", ttl)
	require.NoError(t, err)
	_, err = w.a.Claim(w.ctx, "t", "ha", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	_, err = w.a.Claim(w.ctx, "t", "ha", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy, "still busy, not refused as reused")
}

// Crash waits for the round's calls in flight: no line of the round
// follows its Crash.
func TestCrashWaitsForCallsInFlight(t *testing.T) {
	w := newWorld(t, "m1")
	gate, a, c := w.gatedClaim(t, "C", "hc")
	renewed := make(chan error, 1)
	go func() { renewed <- a.Renew(w.ctx, c, ttl) }()
	wait(t, gate.entered, "the renewal to reach storage")
	crashed := make(chan error, 1)
	go func() { crashed <- a.Crash(w.ctx, c) }()
	select {
	case <-crashed:
		t.Fatal("Crash returned while the round's renewal was in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(gate.release)
	require.NoError(t, wait(t, renewed, "the renewal to return"))
	require.NoError(t, wait(t, crashed, "Crash to return once the renewal did"))
	lines := w.rec.Lines()
	require.Equal(t, core.ActionCrash, lines[len(lines)-1].Action)
	w.valid(t)
}

// gated holds one Update, once armed, until released.
type gated struct {
	*memory.Store
	armed            bool
	entered, release chan struct{}
}

func (g *gated) arm() { g.armed = true }

// gatedClaim makes process proc's workspace on w's storage behind a gate,
// claims thread "t" for holder h with it, and arms the gate: the
// workspace's next call holds in storage until the gate's release.
func (w *world) gatedClaim(t *testing.T, proc string, h core.Holder) (*gated, *core.Workspace, core.Claim) {
	t.Helper()
	gate := &gated{Store: w.s, entered: make(chan struct{}), release: make(chan struct{})}
	a := core.NewWorkspace(gate, coretest.NewClock(epoch), core.WithProcess(proc), core.WithTracer(w.rec))
	c, err := a.Claim(w.ctx, "t", h, ttl)
	require.NoError(t, err)
	gate.arm()
	return gate, a, c
}

func (g *gated) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if g.armed {
		g.armed = false
		close(g.entered)
		<-g.release
	}
	return g.Store.Update(ctx, fn)
}

// wait receives from ch or fails naming what it waited for.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// flaky fails every call while down; armed, it commits the next write and
// reports its outcome unknown.
type flaky struct {
	*memory.Store
	down, unknown bool
}

var errDown = errors.New("connect: connection refused")

func (f *flaky) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if f.down {
		return errDown
	}
	err := f.Store.Update(ctx, fn)
	if f.unknown && err == nil {
		f.unknown = false
		return fmt.Errorf("connection reset during COMMIT: %w", core.ErrCommitUnknown)
	}
	return err
}

// B1: with storage unreachable, Crash still traces the round's end, at
// the last version the round saw, and the trace stays valid through the
// outage and after it.
func TestCrashWithStorageDown(t *testing.T) {
	w := newWorld(t, "m1")
	f := &flaky{Store: w.s}
	clockC := coretest.NewClock(epoch)
	a := core.NewWorkspace(f, clockC, core.WithProcess("C"), core.WithTracer(w.rec))
	c, err := a.Claim(w.ctx, "t", "hc", ttl)
	require.NoError(t, err)
	_, err = a.Plan(w.ctx, c)
	require.NoError(t, err)
	f.down = true
	_, err = a.RunStart(w.ctx, c, 1)
	require.ErrorIs(t, err, errDown)
	require.NoError(t, a.Crash(w.ctx, c))
	lines := w.rec.Lines()
	require.Equal(t, core.ActionCrash, lines[len(lines)-1].Action)
	require.Equal(t, uint64(2), lines[len(lines)-1].Tick, "the Claim's version, the last the round saw")
	w.valid(t)
	_, err = w.b.Post(w.ctx, "t", "m2") // the thread goes on meanwhile
	require.NoError(t, err)
	f.down = false
	clockC.Advance(ttl)
	c2, err := a.Claim(w.ctx, "t", "hc2", ttl)
	require.NoError(t, err)
	require.NoError(t, a.Release(w.ctx, c2))
	w.valid(t)
}

// A write whose commit is unknown, then storage down: Crash cannot tell
// where the round ended, so it leaves the round open (only Crash may
// follow) and returns the error; the next Claim on the thread, once
// storage answers, traces the Crash after the write that did commit.
func TestCrashAfterCommitUnknownWaitsForStorage(t *testing.T) {
	w := newWorld(t, "m1")
	f := &flaky{Store: w.s}
	clockC := coretest.NewClock(epoch)
	a := core.NewWorkspace(f, clockC, core.WithProcess("C"), core.WithTracer(w.rec))
	c, err := a.Claim(w.ctx, "t", "hc", ttl)
	require.NoError(t, err)
	_, err = a.Plan(w.ctx, c)
	require.NoError(t, err)
	f.unknown = true
	_, err = a.RunStart(w.ctx, c, 1) // commits; the process is not told
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	// The committed RunStart's line, as a storage that keeps trace lines
	// has it: the process never traced it.
	th, err := w.a.Thread(w.ctx, "t")
	require.NoError(t, err)
	w.rec.Trace(core.TraceEvent{Tick: th.Version, Action: core.ActionRunStart, Thread: "t", Proc: "C", Holder: "hc", Msg: 1, Run: 1, Taken: 1, Lease: "hc"})
	w.refused(t, core.ErrOutOfOrder, func() error { _, err := a.RunStart(w.ctx, c, 1); return err })
	f.down = true
	require.ErrorIs(t, a.Crash(w.ctx, c), errDown)
	_, err = a.Claim(w.ctx, "t", "hc2", ttl)
	require.ErrorIs(t, err, errDown, "the round's Crash is still to trace")
	f.down = false
	clockC.Advance(ttl)
	c2, err := a.Claim(w.ctx, "t", "hc2", ttl)
	require.NoError(t, err)
	lines := w.rec.Lines()
	require.Equal(t, core.ActionCrash, lines[len(lines)-2].Action)
	require.Equal(t, th.Version, lines[len(lines)-2].Tick, "after the write that committed")
	p, err := a.Plan(w.ctx, c2)
	require.NoError(t, err)
	require.Equal(t, core.PlanAbandon, p.Kind)
	w.valid(t)
}

// A renewal while the round's Crash is being traced is refused: the Crash
// may be traced at the last version the round saw (when its read fails),
// and a renewal committed meanwhile would put a write of the round after
// its end.
func TestRenewDuringCrashRefused(t *testing.T) {
	w := newWorld(t, "m1")
	gate := &gated{Store: w.s, entered: make(chan struct{}), release: make(chan struct{})}
	a := core.NewWorkspace(gate, coretest.NewClock(epoch), core.WithProcess("C"), core.WithTracer(w.rec))
	c, err := a.Claim(w.ctx, "t", "hc", ttl)
	require.NoError(t, err)
	gate.arm() // the memory store has no View: the Crash's read is an Update
	crashed := make(chan error, 1)
	go func() { crashed <- a.Crash(w.ctx, c) }()
	wait(t, gate.entered, "the Crash's read to reach storage")
	before, err := w.a.Lease(w.ctx, "t")
	require.NoError(t, err)
	require.ErrorIs(t, a.Renew(w.ctx, c, ttl), core.ErrRoundOver)
	after, err := w.a.Lease(w.ctx, "t")
	require.NoError(t, err)
	require.Equal(t, before, after, "the refused renewal wrote")
	close(gate.release)
	require.NoError(t, wait(t, crashed, "Crash to return"))
	w.valid(t)
}

// A renewal called while the round's Crash waits for a call in flight is
// refused too: once Crash has begun, no call of the round may begin, or
// one that began after Crash's wait and before its read (a renewal timer
// firing just then) would run beside the read, and its write could land
// after the Crash line. A renewal already in flight when Crash began is
// waited for, and the trace is the spec's.
func TestRenewWhileCrashWaitsRefused(t *testing.T) {
	w := newWorld(t, "m1")
	gate, a, c := w.gatedClaim(t, "C2", "hw")
	renewed := make(chan error, 1)
	go func() { renewed <- a.Renew(w.ctx, c, ttl) }()
	wait(t, gate.entered, "the first Renew to reach storage")
	crashed := make(chan error, 1)
	go func() { crashed <- a.Crash(w.ctx, c) }()
	// Renewals before the Crash goroutine begins are the round's own, and
	// go on; once it has begun, each is refused.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := a.Renew(w.ctx, c, ttl)
		if errors.Is(err, core.ErrRoundOver) {
			break
		}
		require.NoError(t, err)
		if time.Now().After(deadline) {
			t.Fatal("no Renew was refused in 10 s while Crash waited for the Renew in flight")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-crashed:
		t.Fatalf("Crash returned (%v) while a Renew of the round was in flight", err)
	default:
	}
	close(gate.release)
	require.NoError(t, wait(t, renewed, "the Renew in flight to return"))
	require.NoError(t, wait(t, crashed, "Crash to return"))
	w.valid(t)
}

// A Workspace over no storage, or with no clock, is refused when it is
// made, with the argument's name, not at its first call.
func TestNewWorkspaceNeedsStorageAndClock(t *testing.T) {
	require.PanicsWithValue(t, "core: NewWorkspace: nil Storage", func() { core.NewWorkspace(nil, coretest.NewClock(epoch)) })
	require.PanicsWithValue(t, "core: NewWorkspace: nil Clock", func() { core.NewWorkspace(memory.New(), nil) })
}

// A claim's calls go one at a time: while one is in flight, a second
// (other than Renew) is refused as out of order, writing and tracing
// nothing, so that no line of the round lands in an order its phase did
// not allow (a Plan read after the Release that ended the round). A Renew
// runs beside a call in flight. Once the call is back, the next goes on,
// and the trace is the spec's.
func TestRoundCallsOneAtATime(t *testing.T) {
	for _, first := range []string{"Plan", "Release"} {
		t.Run(first+" in flight", func(t *testing.T) {
			w := newWorld(t, "m1")
			gate, a, c := w.gatedClaim(t, "A2", "hz")
			done := make(chan error, 1)
			go func() {
				if first == "Plan" {
					_, err := a.Plan(w.ctx, c)
					done <- err
					return
				}
				done <- a.Release(w.ctx, c)
			}()
			wait(t, gate.entered, "the "+first+" to reach storage")
			require.NoError(t, a.Renew(w.ctx, c, ttl), "a Renew beside the call in flight")
			second := func() error { return a.Release(w.ctx, c) }
			if first == "Release" {
				second = func() error { _, err := a.Plan(w.ctx, c); return err }
			}
			w.refused(t, core.ErrOutOfOrder, second)
			close(gate.release)
			require.NoError(t, wait(t, done, "the "+first+" in flight to return"))
			if first == "Plan" {
				_, err := a.RunStart(w.ctx, c, 1)
				require.NoError(t, err, "the round goes on from the Plan")
			} else {
				_, err := a.Plan(w.ctx, c)
				require.ErrorIs(t, err, core.ErrRoundOver, "the Release ended the round")
			}
			w.valid(t)
		})
	}
}
