package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// The steering tests do not run the trace checker over their traces: it
// learns the Steer, SteerRecord and SteerRefused lines in a change of its
// own. They compare the lines themselves.

// steerWorld is A running run 1 on m1 in thread "t", B a later process
// whose clock is a ttl ahead, and the mutants A's workspace has.
type steerWorld struct {
	ctx context.Context
	s   *memory.Store
	rec *tracecheck.Recorder
	a   *core.Workspace
	b   *core.Workspace
	ca  core.Claim
	run core.RunID
}

func newSteerWorld(t *testing.T, m core.Mutants) *steerWorld {
	t.Helper()
	w := &steerWorld{ctx: context.Background(), s: memory.New(), rec: &tracecheck.Recorder{}}
	w.a = core.NewWorkspace(w.s, coretest.NewClock(epoch), core.WithProcess("A"), core.WithTracer(w.rec), core.WithMutantsForTesting(m))
	w.b = core.NewWorkspace(w.s, coretest.NewClock(epoch.Add(ttl)), core.WithProcess("B"), core.WithTracer(w.rec))
	require.NoError(t, w.a.CreateThread(w.ctx, "t"))
	w.post(t, "m1")
	var err error
	w.ca, err = w.a.Claim(w.ctx, "t", "ha", ttl)
	require.NoError(t, err)
	p, err := w.a.Plan(w.ctx, w.ca)
	require.NoError(t, err)
	require.Equal(t, core.PlanRun, p.Kind)
	w.run, err = w.a.RunStart(w.ctx, w.ca, p.Message)
	require.NoError(t, err)
	return w
}

func (w *steerWorld) post(t *testing.T, text string) core.Seq {
	t.Helper()
	m, err := w.a.Post(w.ctx, "t", text)
	require.NoError(t, err)
	return m
}

func (w *steerWorld) thread(t *testing.T) *core.Thread {
	t.Helper()
	th, err := w.a.Thread(w.ctx, "t")
	require.NoError(t, err)
	return th
}

func (w *steerWorld) last() core.TraceEvent {
	lines := w.rec.Lines()
	return lines[len(lines)-1]
}

// abandonByB: A's claim lapses (B's clock is a ttl ahead), B claims the
// thread and abandons A's run.
func (w *steerWorld) abandonByB(t *testing.T) core.Claim {
	t.Helper()
	cb, err := w.b.Claim(w.ctx, "t", "hb", ttl)
	require.NoError(t, err)
	p, err := w.b.Plan(w.ctx, cb)
	require.NoError(t, err)
	require.Equal(t, []core.RunID{w.run}, p.Runs)
	require.NoError(t, w.b.Abandon(w.ctx, cb, w.run))
	return cb
}

// unchanged checks that call returns an error matching want, and neither
// writes nor traces.
func (w *steerWorld) unchanged(t *testing.T, want error, what string, call func() error) {
	t.Helper()
	before := w.thread(t)
	lines := w.rec.Len()
	require.ErrorIs(t, call(), want, what)
	require.Equal(t, before, w.thread(t), "%s wrote", what)
	require.Equal(t, lines, w.rec.Len(), "%s traced", what)
}

// Steering is given (Steer, a read traced as such) oldest first and then
// recorded (SteerRecord, a write that consumes the message, moves the
// taken cursor and lists it in the run's Steering).
func TestSteerThenRecord(t *testing.T) {
	w := newSteerWorld(t, core.Mutants{})
	w.post(t, "m2")
	w.post(t, "m3")
	before := w.thread(t)
	m, ok, err := w.a.Steer(w.ctx, w.ca, w.run)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, core.Message{Seq: 2, Text: "m2", PostedAt: epoch}, m)
	require.Equal(t, before, w.thread(t), "Steer wrote")
	require.Equal(t, core.TraceEvent{Tick: before.Version, Read: true, Action: core.ActionSteer, Thread: "t", Proc: "A", Holder: "ha", Msg: 2, Run: w.run, Taken: 1}, w.last())

	require.NoError(t, w.a.SteerRecord(w.ctx, w.ca, w.run, m.Seq))
	th := w.thread(t)
	require.Equal(t, core.Seq(2), th.Taken)
	require.Equal(t, []core.Seq{2}, th.Runs()[0].Steering)
	require.Equal(t, before.Version+1, th.Version)
	require.Equal(t, core.TraceEvent{Tick: th.Version, Action: core.ActionSteerRecord, Thread: "t", Proc: "A", Holder: "ha", Msg: 2, Run: w.run, Taken: 2}, w.last())

	m, ok, err = w.a.Steer(w.ctx, w.ca, w.run)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, core.Seq(3), m.Seq)
	require.NoError(t, w.a.SteerRecord(w.ctx, w.ca, w.run, m.Seq))
	th = w.thread(t)
	require.Equal(t, []core.Seq{2, 3}, th.Runs()[0].Steering)
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1, 3: 1}, th.Consumed())

	// The run goes on as ever: its end, then a plan that finds nothing.
	require.NoError(t, w.a.RunEnd(w.ctx, w.ca, w.run, "done"))
	p, err := w.a.Plan(w.ctx, w.ca)
	require.NoError(t, err)
	require.Equal(t, core.PlanNothing, p.Kind)
	require.NoError(t, w.a.Release(w.ctx, w.ca))
}

// Nothing is given, and nothing traced, when no message follows the
// taken cursor, or when a request is open (its answer is the oldest
// unconsumed message: a plan's Reply takes it).
func TestSteerNothingToGive(t *testing.T) {
	w := newSteerWorld(t, core.Mutants{})
	lines := w.rec.Len()
	_, ok, err := w.a.Steer(w.ctx, w.ca, w.run)
	require.NoError(t, err)
	require.False(t, ok, "given with nothing posted after the prompt")
	_, err = w.a.Ask(w.ctx, w.ca, w.run, "which one?")
	require.NoError(t, err)
	w.post(t, "the blue one")
	lines += 2 // Ask's line, Post's
	_, ok, err = w.a.Steer(w.ctx, w.ca, w.run)
	require.NoError(t, err)
	require.False(t, ok, "the answer of an open request given as steering")
	require.Equal(t, lines, w.rec.Len(), "a Steer that gave nothing traced")
	// Nothing was given: the round is still running, and may ask again.
	_, err = w.a.Ask(w.ctx, w.ca, w.run, "sure?")
	require.NoError(t, err)
}

// A run a later claim abandoned is given no steering: Steer returns
// ErrRunAbandoned and traces nothing; the round is still running, and
// its end is refused (EndRefused) as ever.
func TestSteerAbandonedRun(t *testing.T) {
	w := newSteerWorld(t, core.Mutants{})
	w.post(t, "m2")
	w.abandonByB(t)
	w.unchanged(t, core.ErrRunAbandoned, "Steer of an abandoned run", func() error {
		_, _, err := w.a.Steer(w.ctx, w.ca, w.run)
		return err
	})
	require.ErrorIs(t, w.a.RunEnd(w.ctx, w.ca, w.run, ""), core.ErrRunAbandoned)
	require.Equal(t, core.ActionEndRefused, w.last().Action)
}

// Steering given to a run that a later claim abandons before its record:
// the record is refused (SteerRefused, traced as a read), nothing is
// written, and the round is over. The message stays unconsumed; the next
// holder gives it again (ADR-0069's one exception).
func TestSteerRecordRefusedEndsRound(t *testing.T) {
	w := newSteerWorld(t, core.Mutants{})
	w.post(t, "m2")
	m, ok, err := w.a.Steer(w.ctx, w.ca, w.run)
	require.NoError(t, err)
	require.True(t, ok)
	// Between Steer and its record the round renews its claim, and takes
	// nothing else.
	require.NoError(t, w.a.Renew(w.ctx, w.ca, ttl))
	cb := w.abandonByB(t)

	before := w.thread(t)
	require.ErrorIs(t, w.a.SteerRecord(w.ctx, w.ca, w.run, m.Seq), core.ErrRunAbandoned)
	require.Equal(t, before, w.thread(t), "a refused steering record wrote")
	require.Equal(t, core.TraceEvent{Tick: before.Version, Read: true, Action: core.ActionSteerRefused, Thread: "t", Proc: "A", Holder: "ha", Msg: 2, Run: w.run, Taken: 1}, w.last())
	w.unchanged(t, core.ErrRoundOver, "RunEnd after SteerRefused", func() error { return w.a.RunEnd(w.ctx, w.ca, w.run, "") })
	w.unchanged(t, core.ErrRoundOver, "Release after SteerRefused", func() error { return w.a.Release(w.ctx, w.ca) })
	w.unchanged(t, core.ErrRoundOver, "Crash after SteerRefused", func() error { return w.a.Crash(w.ctx, w.ca) })

	p, err := w.b.Plan(w.ctx, cb)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanRun, Message: 2, Taken: 1, Posted: m}, p, "the message is given again")
	_, err = w.b.RunStart(w.ctx, cb, p.Message)
	require.NoError(t, err)
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1}, w.thread(t).Consumed(), "given twice, consumed once")
}

// Calls out of the round's order are refused with ErrOutOfOrder, and
// neither write nor trace: Steer outside a run, for another run, or
// while steering waits for its record; SteerRecord with no steering
// given, or for another message or run; and while steering waits for its
// record, every call but SteerRecord, Renew and Crash.
func TestSteerOutOfOrderRefused(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	rec := &tracecheck.Recorder{}
	a := core.NewWorkspace(s, coretest.NewClock(epoch), core.WithProcess("A"), core.WithTracer(rec))
	require.NoError(t, a.CreateThread(ctx, "t"))
	for _, m := range []string{"m1", "m2", "m3"} {
		_, err := a.Post(ctx, "t", m)
		require.NoError(t, err)
	}
	w := &steerWorld{ctx: ctx, s: s, rec: rec, a: a}
	steer := func(c core.Claim, run core.RunID) func() error {
		return func() error { _, _, err := a.Steer(ctx, c, run); return err }
	}
	record := func(c core.Claim, run core.RunID, m core.Seq) func() error {
		return func() error { return a.SteerRecord(ctx, c, run, m) }
	}
	c, err := a.Claim(ctx, "t", "ha", ttl)
	require.NoError(t, err)
	w.unchanged(t, core.ErrOutOfOrder, "Steer before a run", steer(c, 1))
	w.unchanged(t, core.ErrOutOfOrder, "SteerRecord before a run", record(c, 1, 2))
	p, err := a.Plan(ctx, c)
	require.NoError(t, err)
	w.unchanged(t, core.ErrOutOfOrder, "Steer of a planned run", steer(c, 1))
	run, err := a.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	w.unchanged(t, core.ErrOutOfOrder, "Steer of another run", steer(c, run+1))
	w.unchanged(t, core.ErrOutOfOrder, "SteerRecord with no steering given", record(c, run, 2))

	m, ok, err := a.Steer(ctx, c, run)
	require.NoError(t, err)
	require.True(t, ok)
	w.unchanged(t, core.ErrOutOfOrder, "a second Steer before the record", steer(c, run))
	w.unchanged(t, core.ErrOutOfOrder, "SteerRecord of another message", record(c, run, m.Seq+1))
	w.unchanged(t, core.ErrOutOfOrder, "SteerRecord of another run", record(c, run+1, m.Seq))
	w.unchanged(t, core.ErrOutOfOrder, "Ask before the record", func() error { _, err := a.Ask(ctx, c, run, "q"); return err })
	w.unchanged(t, core.ErrOutOfOrder, "RunEnd before the record", func() error { return a.RunEnd(ctx, c, run, "") })
	w.unchanged(t, core.ErrOutOfOrder, "RunEndThenStart before the record", func() error { _, _, err := a.RunEndThenStart(ctx, c, run, "", 0, false); return err })
	w.unchanged(t, core.ErrOutOfOrder, "Plan before the record", func() error { _, err := a.Plan(ctx, c); return err })
	w.unchanged(t, core.ErrOutOfOrder, "Release before the record", func() error { return a.Release(ctx, c) })
	require.NoError(t, a.Renew(ctx, c, ttl), "Renew while steered")
	require.NoError(t, a.SteerRecord(ctx, c, run, m.Seq))
	w.unchanged(t, core.ErrOutOfOrder, "the record again", record(c, run, m.Seq))

	// Crash may follow Steer: the message stays unconsumed.
	m, ok, err = a.Steer(ctx, c, run)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, a.Crash(ctx, c))
	require.Equal(t, core.ActionCrash, w.last().Action)
	require.Equal(t, m.Seq-1, w.thread(t).Taken, "a crash after Steer consumed its message")
}

// Each steering mutant changes what core does, as its comment says.
func TestSteerMutants(t *testing.T) {
	t.Run("SteerRecordAfterAbandon", func(t *testing.T) {
		w := newSteerWorld(t, core.Mutants{SteerRecordAfterAbandon: true})
		w.post(t, "m2")
		m, ok, err := w.a.Steer(w.ctx, w.ca, w.run)
		require.NoError(t, err)
		require.True(t, ok)
		w.abandonByB(t)
		before := w.thread(t)
		require.NoError(t, w.a.SteerRecord(w.ctx, w.ca, w.run, m.Seq), "the mutant records steering of an abandoned run")
		th := w.thread(t)
		require.Equal(t, core.Seq(2), th.Taken, "the cursor moved")
		require.Empty(t, th.Runs()[0].Steering, "with no event")
		require.Equal(t, len(before.Runs()), len(th.Runs()))
		require.Equal(t, core.ActionSteerRecord, w.last().Action)
		require.Equal(t, core.Seq(2), w.last().Taken)
	})
	t.Run("SteerRecordKeepsCursor", func(t *testing.T) {
		w := newSteerWorld(t, core.Mutants{SteerRecordKeepsCursor: true})
		w.post(t, "m2")
		m, ok, err := w.a.Steer(w.ctx, w.ca, w.run)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, w.a.SteerRecord(w.ctx, w.ca, w.run, m.Seq))
		th := w.thread(t)
		require.Equal(t, core.Seq(1), th.Taken, "the mutant leaves the cursor")
		require.Equal(t, []core.Seq{2}, th.Runs()[0].Steering)
		require.Equal(t, core.ActionSteerRecord, w.last().Action)
		m2, ok, err := w.a.Steer(w.ctx, w.ca, w.run)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, m.Seq, m2.Seq, "the message is given again")
		require.NoError(t, w.a.SteerRecord(w.ctx, w.ca, w.run, m2.Seq))
		require.Equal(t, 2, w.thread(t).Consumed()[2], "and consumed again")
	})
	t.Run("SteerConsumed", func(t *testing.T) {
		w := newSteerWorld(t, core.Mutants{SteerConsumed: true})
		w.post(t, "m2")
		m, ok, err := w.a.Steer(w.ctx, w.ca, w.run)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, core.Seq(1), m.Seq, "the mutant gives the run's own prompt, consumed already")
		require.Equal(t, core.Seq(1), w.last().Msg)
	})
	t.Run("SteerInactiveRun", func(t *testing.T) {
		w := newSteerWorld(t, core.Mutants{SteerInactiveRun: true})
		w.post(t, "m2")
		w.abandonByB(t)
		m, ok, err := w.a.Steer(w.ctx, w.ca, w.run)
		require.NoError(t, err, "the mutant steers an abandoned run")
		require.True(t, ok)
		require.Equal(t, core.Seq(2), m.Seq)
		require.Equal(t, core.ActionSteer, w.last().Action)
		require.ErrorIs(t, w.a.SteerRecord(w.ctx, w.ca, w.run, m.Seq), core.ErrRunAbandoned, "its record is refused")
	})
	t.Run("none", func(t *testing.T) {
		// Without them: a consumed message is not given, an abandoned
		// run gets nothing, and its record is refused.
		w := newSteerWorld(t, core.Mutants{})
		_, ok, err := w.a.Steer(w.ctx, w.ca, w.run)
		require.NoError(t, err)
		require.False(t, ok)
		w.post(t, "m2")
		w.abandonByB(t)
		_, _, err = w.a.Steer(w.ctx, w.ca, w.run)
		require.ErrorIs(t, err, core.ErrRunAbandoned)
	})
}
