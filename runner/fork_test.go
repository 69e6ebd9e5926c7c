package runner_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// A turn forked between two steps, with its runner and workspace over a
// copy of storage, takes the steps the turn would have taken, and the two
// go their own ways: each consumes the message in its own storage and
// ends its run, and both traces are behaviours of the spec. Every field
// of the turn is copied (the count guards one added later).
func TestTurnFork(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	clock := coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC))
	rec := &tracecheck.Recorder{}
	ws := core.NewWorkspace(store, clock, core.WithProcess("p1"), core.WithTracer(rec))
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err := ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	agent := runner.AgentFunc(func(context.Context, *runner.Session) error { return nil })
	holders := 0
	newHolder := func() (core.Holder, error) {
		holders++
		return core.Holder(fmt.Sprintf("h%d", holders)), nil
	}
	// Step by step, as the simulator forks turns: SeparatePlans.
	r, err := runner.New(runner.Config{Workspace: ws, Clock: clock, Agent: agent, NewHolder: newHolder, ClaimTTL: time.Minute, SeparatePlans: true})
	require.NoError(t, err)
	turn := r.NewTurn("t")
	require.False(t, turn.Step(ctx)) // Claim
	require.False(t, turn.Step(ctx)) // Plan
	require.False(t, turn.Step(ctx)) // RunStart
	require.Equal(t, runner.StepAgent, turn.Next())

	frec := &tracecheck.Recorder{}
	fclock := coretest.NewClock(clock.Now())
	fstore := store.Clone()
	fws, claim := ws.ForkForTesting(fstore, fclock, frec)
	fr := r.ForkForTesting(fws, fclock, agent, newHolder, claim)
	fturn := turn.ForkForTesting(ctx, fr, claim)
	want, n := runner.TurnFields(turn)
	got, _ := runner.TurnFields(fturn)
	require.Equal(t, want, got)
	require.Equal(t, 32, n, "Turn has a field more or less: make Turn.ForkForTesting copy it, and TurnFields see it")

	// A turn asked to stop is copied so: its runs' context cancelled.
	require.NoError(t, ws.CreateThread(ctx, "u"))
	stopped := r.NewTurn("u")
	require.False(t, stopped.Step(ctx)) // Claim
	stopped.Stop()
	sws, sclaim := ws.ForkForTesting(store.Clone(), coretest.NewClock(clock.Now()), &tracecheck.Recorder{})
	want, _ = runner.TurnFields(stopped)
	got, _ = runner.TurnFields(stopped.ForkForTesting(ctx, r.ForkForTesting(sws, clock, agent, newHolder, sclaim), sclaim))
	require.Equal(t, want, got)
	require.Equal(t, true, want["cancelled"])

	for _, tt := range []*runner.Turn{fturn, turn} {
		for !tt.Step(ctx) {
		}
		o, err := tt.Outcome()
		require.NoError(t, err)
		require.Equal(t, runner.OutcomeDone, o)
		require.NoError(t, waitRun(t, latestRun(tt), "the turn's run"))
		require.Equal(t, core.RunID(1), latestRun(tt).RunID())
	}
	for _, s := range []*memory.Store{store, fstore} {
		th, err := core.NewWorkspace(s, clock).Thread(ctx, "t")
		require.NoError(t, err)
		require.Equal(t, core.Seq(1), th.Taken)
		require.Len(t, th.Runs(), 1)
	}
	// The fork's trace is its own from the fork on; with the lines before
	// the fork, each is a behaviour of the spec.
	before := rec.Lines()[:4] // Post, Claim, Plan, RunStart
	_, err = tracecheck.Check(rec.Lines())
	require.NoError(t, err)
	_, err = tracecheck.Check(append(append([]core.TraceEvent(nil), before...), frec.Lines()...))
	require.NoError(t, err)
}

// A turn forked after its agent was given steering and returned: the
// step that ran the agent ended once the record returned, so the fork's
// copy of storage has it, and both turns end their runs and count the
// steering as consumed.
func TestTurnForkAfterSteering(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	clock := coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC))
	ws := core.NewWorkspace(store, clock, core.WithProcess("p1"))
	require.NoError(t, ws.CreateThread(ctx, "t"))
	for _, m := range []string{"m1", "m2"} {
		_, err := ws.Post(ctx, "t", m)
		require.NoError(t, err)
	}
	agent := runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
		_, ok, err := s.Steer(ctx)
		if err == nil && !ok {
			err = fmt.Errorf("no steering given")
		}
		return err
	})
	holders := 0
	newHolder := func() (core.Holder, error) {
		holders++
		return core.Holder(fmt.Sprintf("h%d", holders)), nil
	}
	r, err := runner.New(runner.Config{Workspace: ws, Clock: clock, Agent: agent, NewHolder: newHolder, ClaimTTL: time.Minute, SeparatePlans: true})
	require.NoError(t, err)
	turn := r.NewTurn("t")
	stepTo(t, turn, runner.StepAgent)
	require.False(t, turn.Step(ctx)) // the agent, given m2
	require.Equal(t, runner.StepSteerRecord, turn.Next(), "the steering given last is recorded by a step of its own")

	fclock := coretest.NewClock(clock.Now())
	fstore := store.Clone()
	fws, claim := ws.ForkForTesting(fstore, fclock, nil)
	fturn := turn.ForkForTesting(ctx, r.ForkForTesting(fws, fclock, agent, newHolder, claim), claim)
	for _, tt := range []*runner.Turn{fturn, turn} {
		require.False(t, tt.Step(ctx)) // the record of m2
		require.Equal(t, runner.StepRunEnd, tt.Next())
		stepTo(t, tt, runner.StepOver)
		o, err := tt.Outcome()
		require.NoError(t, err)
		require.Equal(t, runner.OutcomeDone, o)
		require.NoError(t, waitRun(t, latestRun(tt), "the turn's run"))
		require.Equal(t, 2, tt.Report().Consumed, "the prompt and the steering")
	}
	for _, s := range []*memory.Store{store, fstore} {
		th, err := core.NewWorkspace(s, clock).Thread(ctx, "t")
		require.NoError(t, err)
		require.Equal(t, core.Seq(2), th.Taken)
		require.Equal(t, []core.Seq{2}, th.Runs()[0].Steering)
		require.Equal(t, core.StateEnded, th.Runs()[0].State)
	}
}

// latestRun returns the handle of the turn's latest planned run (the
// last of its report's), or nil.
func latestRun(t *runner.Turn) *runner.RunHandle {
	runs := t.Report().Runs
	if len(runs) == 0 {
		return nil
	}
	return runs[len(runs)-1]
}

// forkOf forks the proc's workspace and runner over a copy of the memory
// storage under it, tracing to rec: the fork's workspace, runner and claim
// function.
func forkOf(a *proc, s *memory.Store, rec *tracecheck.Recorder) (*core.Workspace, *runner.Runner, func(core.Claim) core.Claim) {
	clock := coretest.NewClock(a.clock.Now())
	ws, claim := a.ws.ForkForTesting(s.Clone(), clock, rec)
	agent := runner.AgentFunc(func(context.Context, *runner.Session) error { return nil })
	newHolder := func() (core.Holder, error) { return core.Holder(fmt.Sprintf("F-%d", a.holders.Add(1))), nil }
	return ws, a.r.ForkForTesting(ws, clock, agent, newHolder, claim), claim
}

// A runner forked with a round left open (its Release's commit unknown,
// its Crash unanswered) tries that round's Crash on the fork's copy of the
// round: the fork's round is then over. (The eighth mutation pass: a fork
// that kept the original's claims for its open rounds failed no test; its
// retry's Crash is refused as another workspace's claim, which the runner
// takes for a round that ended, and the fork's round stays open.)
func TestRunnerForkEndsItsOpenRounds(t *testing.T) {
	ctx := context.Background()
	f := &flaky{Store: memory.New()}
	a := newProc(t, f, "A", procOpts{tracer: &tracecheck.Recorder{}, cfg: func(c *runner.Config) { c.SeparatePlans = true }})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepRelease)
	f.set(true, false)
	require.True(t, turn.Step(ctx), "the turn goes on after a Release whose commit is unknown")
	require.Equal(t, 1, a.r.OpenRounds(), "the round left open is not recorded")

	f.set(false, false)
	fws, fr, claim := forkOf(a, f.Store, &tracecheck.Recorder{})
	require.Equal(t, 1, fr.OpenRounds())
	require.NoError(t, fr.TakeTurns(ctx)) // no thread has work: only the retry
	require.Zero(t, fr.OpenRounds(), "the fork's retry left its round open")
	require.ErrorIs(t, fws.Crash(ctx, claim(turn.Claim())), core.ErrRoundOver, "the fork's round is still open after its runner's retry")
	require.Equal(t, 1, a.r.OpenRounds(), "the fork's retry ended the original's round")
}

// A turn forked while a renewal's commit is unknown is copied in doubt:
// its next step makes no call and crashes with the renewal's error, as
// the original's does. (The eighth mutation pass: a fork that lost the
// doubt failed no test.)
func TestTurnForkInDoubt(t *testing.T) {
	ctx := context.Background()
	u := &unknownCommit{Storage: memory.New()}
	a := newProc(t, u, "A", procOpts{cfg: func(c *runner.Config) { c.SeparatePlans = true }})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepPlan)
	u.arm()
	require.ErrorIs(t, turn.Renew(ctx), core.ErrCommitUnknown)

	_, fr, claim := forkOf(a, u.Storage.(*memory.Store), &tracecheck.Recorder{})
	fturn := turn.ForkForTesting(ctx, fr, claim)
	want, _ := runner.TurnFields(turn)
	got, _ := runner.TurnFields(fturn)
	require.Equal(t, want, got)
	for _, tt := range []*runner.Turn{fturn, turn} {
		require.True(t, tt.Step(ctx), "the step after a renewal in doubt ends the turn")
		o, err := tt.Outcome()
		require.Equal(t, runner.OutcomeError, o, "%v", err)
		require.ErrorIs(t, err, core.ErrCommitUnknown)
	}
}

// A turn forked after its run ended with the agent's error: the fork's
// handle of that run says the same error. (The eighth mutation pass: a
// fork whose handles lost their error, and said nil, failed no test.)
func TestTurnForkKeepsTheRunsError(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("the agent failed")
	s := memory.New()
	a := newProc(t, s, "A", procOpts{
		agent: runner.AgentFunc(func(context.Context, *runner.Session) error { return boom }),
		cfg:   func(c *runner.Config) { c.SeparatePlans = true },
	})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepRunEnd)
	require.False(t, turn.Step(ctx)) // RunEnd
	require.ErrorIs(t, waitRun(t, latestRun(turn), "the run"), boom)

	_, fr, claim := forkOf(a, s, &tracecheck.Recorder{})
	fturn := turn.ForkForTesting(ctx, fr, claim)
	require.ErrorIs(t, waitRun(t, latestRun(fturn), "the fork's handle of the ended run"), boom)
}
