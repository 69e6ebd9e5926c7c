package runner_test

import (
	"context"
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
	require.Equal(t, 31, n, "Turn has a field more or less: make Turn.ForkForTesting copy it, and TurnFields see it")

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
		require.NoError(t, latestRun(tt).Wait(ctx))
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
		require.NoError(t, latestRun(tt).Wait(ctx))
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
