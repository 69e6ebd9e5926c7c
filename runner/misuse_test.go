package runner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// A session used wrongly refuses the call and changes nothing: Output with
// a text storage could not keep (before, the run's end failed on it and
// the turn crashed, leaving the run active), Await on a request the run
// did not ask (before, it recorded the run's end first and then waited),
// and every call from a goroutine the agent left behind once it returned
// (before, such an Output was taken silently and dropped, and such an
// Await raced the turn's own record of the run's end).
func TestSessionMisuseRefused(t *testing.T) {
	ctx := context.Background()
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	newThread(t, ws, "t", "m1")
	var (
		kept                      *runner.Session
		nul, utf, await, afterErr error
	)
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl,
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			kept = s
			nul, utf = s.Output("bad \x00 byte"), s.Output("bad \xff utf-8")
			actx, cancel := context.WithTimeout(ctx, time.Second) // the old Await waited for an answer
			defer cancel()
			_, await = s.Await(actx, 7)
			afterErr = s.Output("the answer")
			return nil
		})})
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, turnOn(t, r, "t"))
	require.ErrorIs(t, nul, core.ErrInvalidArgument, "Output with a NUL byte")
	require.ErrorIs(t, utf, core.ErrInvalidArgument, "Output with invalid UTF-8")
	require.ErrorIs(t, await, core.ErrUnknownRequest, "Await on a request the run did not ask")
	require.NoError(t, afterErr, "the run goes on after the refused Await")

	require.ErrorIs(t, kept.Output("too late"), core.ErrOutOfOrder, "Output after the agent returned")
	_, err = kept.Ask(ctx, "too late?")
	require.ErrorIs(t, err, core.ErrOutOfOrder, "Ask after the agent returned")
	_, _, err = kept.Steer(ctx)
	require.ErrorIs(t, err, core.ErrOutOfOrder, "Steer after the agent returned")
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = kept.Await(actx, 1)
	require.ErrorIs(t, err, core.ErrOutOfOrder, "Await after the agent returned")

	th, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Len(t, th.Runs(), 1)
	require.Equal(t, core.StateEnded, th.Runs()[0].State, "the run ended as the turn recorded it")
	require.Equal(t, "the answer", th.Runs()[0].Output, "the output the agent set before it returned")
	require.Empty(t, th.Requests, "no request was opened")
}

// Output after Await recorded the run's end is refused as out of order:
// the run's output was recorded with its end, and a later text would be
// dropped silently. The run keeps the text set before Await.
func TestOutputAfterAwaitRefused(t *testing.T) {
	ctx := context.Background()
	var a *proc
	type result struct {
		answer string
		after  error
	}
	res := make(chan result, 1)
	a = newProc(t, memory.New(), "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
		req, err := s.Ask(ctx, "which one?")
		if err != nil {
			return err
		}
		if err := s.Output("before the end"); err != nil {
			return err
		}
		// The answer is posted before Await, so that the turn replies to
		// it as soon as Await has recorded the run's end.
		if _, err := a.ws.Post(context.Background(), "t", "that one"); err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		m, err := s.Await(actx, req)
		if err != nil {
			return err
		}
		res <- result{m.Text, s.Output("after the end")}
		return nil
	})})
	newThread(t, a.ws, "t", "m1")
	o, err := a.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
	got := waitFor(t, res, "the agent to hear the answer and set its output after Await")
	require.Equal(t, "that one", got.answer)
	require.ErrorIs(t, got.after, core.ErrOutOfOrder, "Output after Await recorded the run's end")
	th, err := a.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, "before the end", th.Runs()[0].Output)
}

// An agent that panics fails its run, as one that returns an error
// would: the runner recovers, records the run's end, logs the panic with
// its stack, and goes on to the thread's next message; the run's handle
// says so. Before, the panic took the process down.
func TestAgentPanicFailsItsRun(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	newThread(t, ws, "t", "boom", "fine")
	handles := make(chan *runner.RunHandle, 2)
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnRun:  func(h *runner.RunHandle) { handles <- h },
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			if s.Delivered.Prompt.Text == "boom" {
				_ = s.Output("before the panic")
				panic("the agent's bug")
			}
			return s.Output("ok")
		})})
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, turnOn(t, r, "t"))
	wctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	first, second := waitFor(t, handles, "the first run's handle"), waitFor(t, handles, "the second run's handle")
	err = first.Wait(wctx)
	require.ErrorContains(t, err, "runner: the agent panicked: the agent's bug")
	require.NoError(t, second.Wait(wctx))
	require.Contains(t, logs.String(), "agent panicked")
	require.Contains(t, logs.String(), "runtime/debug.Stack", "the log carries the stack")

	th, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Len(t, th.Runs(), 2)
	require.Equal(t, core.StateEnded, th.Runs()[0].State, "the panicked run ended")
	require.Equal(t, "before the panic", th.Runs()[0].Output)
	require.Equal(t, core.StateEnded, th.Runs()[1].State)
}

// A Runner runs one Run at a time: a second call while one goes on is
// refused at once, and the first goes on; once it returns, Run may be
// called again.
func TestRunTwiceRefused(t *testing.T) {
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	newThread(t, ws, "t", "m1")
	started, release := make(chan struct{}, 1), make(chan struct{})
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl,
		Agent: runner.AgentFunc(func(context.Context, *runner.Session) error {
			started <- struct{}{}
			<-release
			return nil
		})})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- r.Run(ctx) }()
	waitFor(t, started, "the first Run's agent to start")
	sctx, scancel := context.WithTimeout(context.Background(), waitLimit) // a Run let in would go on until then
	defer scancel()
	require.ErrorContains(t, r.Run(sctx), "Run is already running on this Runner", "a second Run beside the first")
	close(release)
	cancel()
	require.NoError(t, waitFor(t, first, "the first Run to return"))
	again, acancel := context.WithCancel(context.Background())
	acancel()
	require.NoError(t, r.Run(again), "Run once the first returned")
}

// turnOn takes a turn on the thread, in a goroutine of its own, and
// returns its outcome, failing the test when it does not end within
// waitLimit.
func turnOn(t *testing.T, r *runner.Runner, thread core.ThreadID) runner.Outcome {
	t.Helper()
	done := make(chan runner.Outcome, 1)
	go func() {
		o, _ := r.TakeTurn(context.Background(), thread)
		done <- o
	}()
	return waitFor(t, done, "the turn on "+string(thread)+" to end")
}

// Await with a context that has already ended returns its error and
// leaves the run as it was: the agent may Await again with a live one.
// (Before, Await recorded the run's end with that context, storage
// refused the write, and the turn gave its round up: the run stayed
// active until a later claim abandoned it, and every later Await
// returned the first one's error.)
func TestAwaitWithEndedContextLeavesTheRun(t *testing.T) {
	ctx := context.Background()
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	newThread(t, ws, "t", "m1")
	type result struct {
		ended, live error
		answer      string
	}
	res := make(chan result, 1)
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl,
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			req, err := s.Ask(ctx, "which one?")
			if err != nil {
				return err
			}
			ended, cancel := context.WithCancel(ctx)
			cancel()
			_, endedErr := s.Await(ended, req)
			if _, err := ws.Post(context.Background(), "t", "that one"); err != nil {
				return err
			}
			actx, acancel := context.WithTimeout(ctx, waitLimit)
			defer acancel()
			m, err := s.Await(actx, req)
			res <- result{endedErr, err, m.Text}
			return nil
		})})
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, turnOn(t, r, "t"))
	got := waitFor(t, res, "the agent's two Awaits")
	require.ErrorIs(t, got.ended, context.Canceled, "Await with an ended context")
	require.NoError(t, got.live, "Await with a live context after it")
	require.Equal(t, "that one", got.answer)
	th, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.StateEnded, th.Runs()[0].State, "the run's end was recorded, not left to an abandon")
	require.Equal(t, core.RequestAnswered, th.Requests[0].State)
}

// A RunHandle whose run has finished returns the run's outcome from Wait
// even when ctx has ended too (before, Wait picked one of the two at
// random).
func TestWaitOnFinishedRunIgnoresEndedContext(t *testing.T) {
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	newThread(t, ws, "t", "m1")
	handles := make(chan *runner.RunHandle, 1)
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl, OnRun: func(h *runner.RunHandle) { handles <- h },
		Agent: runner.AgentFunc(func(context.Context, *runner.Session) error { return errors.New("the agent's error") })})
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, turnOn(t, r, "t"))
	h := waitFor(t, handles, "the run's handle")
	require.ErrorContains(t, waitRun(t, h, "the run"), "the agent's error")
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for range 100 {
		require.ErrorContains(t, h.Wait(ended), "the agent's error", "Wait on a finished run with an ended context")
	}
}

// A Session the runner did not make (the zero Session, as an agent's own
// test may build one) refuses every call with core.ErrInvalidArgument.
// Before, its Output took the text silently and its Ask and Steer
// panicked with a nil pointer dereference.
func TestSessionNotMadeByRunnerRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for _, s := range []*runner.Session{{}, nil} {
		require.ErrorIs(t, s.Output("text"), core.ErrInvalidArgument, "Output")
		_, err := s.Ask(ctx, "question?")
		require.ErrorIs(t, err, core.ErrInvalidArgument, "Ask")
		_, _, err = s.Steer(ctx)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "Steer")
		_, err = s.Await(ctx, 1)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "Await")
	}
}

// A Runner that New did not make (the zero Runner) refuses Run, TakeTurn
// and TakeTurns with an error saying so; before, each panicked with a nil
// pointer dereference.
func TestRunnerNotMadeByNewRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for _, r := range []*runner.Runner{{}, nil} {
		require.ErrorContains(t, r.Run(ctx), "not made by New", "Run")
		o, err := r.TakeTurn(ctx, "t")
		require.ErrorContains(t, err, "not made by New", "TakeTurn")
		require.Equal(t, runner.OutcomeError, o)
		require.ErrorContains(t, r.TakeTurns(ctx), "not made by New", "TakeTurns")
	}
}

// A NewHolder that fails, that returns a holder it returned before, or one
// longer than core.MaxIDBytes fails its turn (OutcomeError, the error
// saying why) and writes nothing: no claim, no lease, no run.
func TestNewHolderMisuseWritesNothing(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		holder func() (core.Holder, error)
		want   string
	}{
		{"an error", func() (core.Holder, error) { return "", errors.New("no entropy") }, "no entropy"},
		{"a holder too long", func() (core.Holder, error) { return core.Holder(strings.Repeat("h", core.MaxIDBytes+1)), nil }, "longer than"},
		{"the same holder again", func() (core.Holder, error) { return "same", nil }, core.ErrHolderReused.Error()},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProc(t, memory.New(), "A", procOpts{cfg: func(cfg *runner.Config) {
				cfg.NewHolder = c.holder
				cfg.Logger = slog.New(slog.DiscardHandler)
			}})
			newThread(t, p.ws, "t", "m1")
			if c.name == "the same holder again" {
				o, err := p.r.TakeTurn(ctx, "t")
				require.NoError(t, err)
				require.Equal(t, runner.OutcomeDone, o)
				_, err = p.ws.Post(ctx, "t", "m2")
				require.NoError(t, err)
			}
			before, err := p.ws.Thread(ctx, "t")
			require.NoError(t, err)
			o, err := p.r.TakeTurn(ctx, "t")
			require.Equal(t, runner.OutcomeError, o)
			require.ErrorContains(t, err, c.want)
			after, err := p.ws.Thread(ctx, "t")
			require.NoError(t, err)
			require.Equal(t, before, after, "the failed turn wrote")
			l, err := p.ws.Lease(ctx, "t")
			require.NoError(t, err)
			require.Equal(t, core.Lease{}, l, "the failed turn left a lease")
		})
	}
}

// Wake naming a thread that does not exist, or an id the Workspace
// refuses, fails those claims (logged) and Run goes on: the thread it
// names next is worked.
func TestWakeNamingBadThreadsRunGoesOn(t *testing.T) {
	wake := make(chan core.ThreadID, 4)
	for _, id := range []core.ThreadID{"nope", "bad\xff", core.ThreadID(strings.Repeat("x", core.MaxIDBytes+1)), "t"} {
		wake <- id
	}
	p := newProc(t, memory.New(), "A", procOpts{cfg: func(cfg *runner.Config) {
		cfg.Wake = wake
		cfg.Logger = slog.New(slog.DiscardHandler)
	}})
	newThread(t, p.ws, "t", "m1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.r.Run(ctx) }()
	waitUntil(t, func() bool { return taken(t, p, "t") == 1 }, "Run to consume t's message after the bad wake-ups")
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return"))
	ids, err := p.ws.Threads(context.Background())
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{"t"}, ids, "a wake-up made a thread")
}

// Steer called from two goroutines at once (run with -race) gives each
// message once, and records each once.
func TestSteerFromTwoGoroutinesGivesEachOnce(t *testing.T) {
	ctx := context.Background()
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	newThread(t, ws, "t", "m1")
	given := make(chan core.Seq, 16)
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl,
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			for i := range 6 {
				if _, err := ws.Post(context.Background(), "t", fmt.Sprint("steer ", i)); err != nil {
					return err
				}
			}
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						m, ok, err := s.Steer(ctx)
						if err != nil || !ok {
							return
						}
						given <- m.Seq
					}
				}()
			}
			wg.Wait()
			return nil
		})})
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, turnOn(t, r, "t"))
	close(given)
	var seqs []core.Seq
	for m := range given {
		seqs = append(seqs, m)
	}
	slices.Sort(seqs)
	require.Equal(t, []core.Seq{2, 3, 4, 5, 6, 7}, seqs, "each message given once")
	th, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, []core.Seq{2, 3, 4, 5, 6, 7}, th.Runs()[0].Steering, "each recorded once, oldest first")
	for m, n := range th.Consumed() {
		require.Equal(t, 1, n, "message %d consumed %d times", m, n)
	}
}

// TakeTurn on one thread from two goroutines at once: the second claim
// is refused while the first turn's round is open (core.ErrOutOfOrder),
// and each message is consumed once.
func TestTakeTurnTwiceAtOnceOnOneThread(t *testing.T) {
	gate := make(chan struct{})
	store := memory.New()
	p := newProc(t, store, "A", procOpts{
		agent: runner.AgentFunc(func(context.Context, *runner.Session) error { <-gate; return nil }),
		cfg:   func(cfg *runner.Config) { cfg.Logger = slog.New(slog.DiscardHandler) },
	})
	newThread(t, p.ws, "t", "m1", "m2")
	type result struct {
		o   runner.Outcome
		err error
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			o, err := p.r.TakeTurn(context.Background(), "t")
			results <- result{o, err}
		}()
	}
	first := waitFor(t, results, "one of the two turns to end while the other's agent waits")
	require.Equal(t, runner.OutcomeError, first.o)
	require.ErrorIs(t, first.err, core.ErrOutOfOrder)
	close(gate)
	second := waitFor(t, results, "the other turn to end")
	require.NoError(t, second.err)
	require.Equal(t, runner.OutcomeDone, second.o)
	f := readFacts(t, store, "t")
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1}, f.consumed)
}

// TakeTurn with a context that has ended already claims nothing and
// returns OutcomeStopped with the context's error.
func TestTakeTurnWithEndedContextClaimsNothing(t *testing.T) {
	p := newProc(t, memory.New(), "A", procOpts{})
	newThread(t, p.ws, "t", "m1")
	before, err := p.ws.Thread(context.Background(), "t")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o, err := p.r.TakeTurn(ctx, "t")
	require.Equal(t, runner.OutcomeStopped, o)
	require.ErrorIs(t, err, context.Canceled)
	after, err := p.ws.Thread(context.Background(), "t")
	require.NoError(t, err)
	require.Equal(t, before, after, "the stopped turn wrote")
}

// An agent that changes its Session's Delivered (an exported field: the
// agent's copy) changes nothing its session's calls do: Ask, Steer and
// Await go to the run it was handed. Before, they went by Delivered: Ask
// and Steer were refused, and Await's record of the run's end was, which
// gave the round up with the run left active.
func TestChangedDeliveredChangesNothing(t *testing.T) {
	ctx := context.Background()
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	newThread(t, ws, "t", "m1")
	newThread(t, ws, "u", "x1")
	errs := make(chan error, 3)
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl,
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			s.Delivered.Run, s.Delivered.Claim = 7, core.Claim{Thread: "u", Holder: "someone"}
			req, err := s.Ask(ctx, "which one?")
			errs <- err
			_, _, err = s.Steer(ctx)
			errs <- err
			if _, err := ws.Post(context.Background(), "t", "that one"); err != nil {
				return err
			}
			actx, cancel := context.WithTimeout(ctx, waitLimit)
			defer cancel()
			_, err = s.Await(actx, req)
			errs <- err
			return nil
		})})
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, turnOn(t, r, "t"))
	for _, call := range []string{"Ask", "Steer", "Await"} {
		require.NoError(t, waitFor(t, errs, "the agent's "+call), call)
	}
	th, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.StateEnded, th.Runs()[0].State)
	require.Equal(t, core.RequestAnswered, th.Requests[0].State)
	u, err := ws.Thread(ctx, "u")
	require.NoError(t, err)
	require.Empty(t, u.Runs(), "thread u was written")
}

// A Step of a turn begun while another Step of it is in flight (here,
// the agent's) panics, naming the misuse, and writes nothing; the Step in
// flight goes on to the turn's end. Before, the two Steps raced on the
// turn's state (a data race), the Workspace refused the calls out of the
// round's order, and the turn ended with OutcomeError.
func TestStepWhileStepInFlightPanics(t *testing.T) {
	ctx := context.Background()
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	newThread(t, ws, "t", "m1")
	inAgent, release := make(chan struct{}), make(chan struct{})
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl,
		Agent: runner.AgentFunc(func(context.Context, *runner.Session) error {
			close(inAgent)
			<-release
			return nil
		})})
	require.NoError(t, err)
	turn := r.NewTurn("t")
	stepTo(t, turn, runner.StepAgent)
	done := make(chan bool, 1)
	go func() { done <- turn.Step(ctx) }()
	waitFor(t, inAgent, "the agent to run in the first Step")
	before, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.PanicsWithValue(t, "runner: Turn.Step called while another Step of the turn is in flight: a turn's steps go one at a time",
		func() { turn.Step(ctx) })
	after, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, before, after, "the refused Step wrote")
	close(release)
	require.False(t, waitFor(t, done, "the Step in flight to return"))
	for !turn.Step(ctx) {
	}
	o, err := turn.Outcome()
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
}

// The session-42 misuse pass (8 Dec 2026).

// New refuses, with core.ErrInvalidArgument and the field's name, every
// Config it cannot run: before, its errors wrapped no sentinel, and it
// took a nil AgentFunc (every run then failed with a panic and consumed
// its message: a turn on a thread reported OutcomeDone), the zero
// Workspace (which panicked at the first turn), and a ClaimTTL of
// math.MaxInt64 (whose leases core stamped expired, for any runner to
// take; core now refuses such a claim, which failed every turn).
func TestConfigMisuseRefused(t *testing.T) {
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	agent := runner.AgentFunc(func(context.Context, *runner.Session) error { return nil })
	var nilAgent runner.AgentFunc
	for field, cfg := range map[string]runner.Config{
		"Workspace is required":                         {Agent: agent},
		"Workspace was not made by core.NewWork":        {Workspace: &core.Workspace{}, Agent: agent},
		"Agent is required":                             {Workspace: ws},
		"Agent is required (a nil AgentFunc":            {Workspace: ws, Agent: nilAgent},
		"ClaimTTL 2562047h47m16.854775807s is too long": {Workspace: ws, Agent: agent, ClaimTTL: time.Duration(1<<63 - 1)},
		"ClaimTTL -1ns must be positive":                {Workspace: ws, Agent: agent, ClaimTTL: -1},
		"RenewEvery 1s must be shorter than ClaimTTL":   {Workspace: ws, Agent: agent, ClaimTTL: time.Second, RenewEvery: time.Second},
		"MaxTurnMessages -1 must not be negative":       {Workspace: ws, Agent: agent, MaxTurnMessages: -1},
	} {
		r, err := runner.New(cfg)
		require.Nil(t, r, field)
		require.ErrorIs(t, err, core.ErrInvalidArgument, field)
		require.ErrorContains(t, err, "runner config: invalid argument: "+field)
	}
	_, err := runner.New(runner.Config{Workspace: ws, Agent: agent, ClaimTTL: 100 * 365 * 24 * time.Hour})
	require.NoError(t, err, "a century is a ClaimTTL core takes")
}

// A nil context is refused with core.ErrInvalidArgument, and nothing
// done: by Run, TakeTurn and TakeTurns (before, each panicked), by the
// session's Ask, Steer and Await (before, core refused the steering's
// record or the run's end made with it, and the turn gave its round up:
// OutcomeError, the run left active), and by RunHandle.Wait, which also
// refuses the zero RunHandle (before, it waited for ever).
func TestNilContextRefusedByRunner(t *testing.T) {
	ctx := context.Background()
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	newThread(t, ws, "t", "m1")
	var nilCtx context.Context
	type calls struct{ ask, steer, await, askAfter error }
	got := make(chan calls, 1)
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl,
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			var c calls
			if _, err := ws.Post(ctx, "t", "steering"); err != nil {
				return err
			}
			if _, ok, err := s.Steer(ctx); !ok || err != nil {
				return fmt.Errorf("no steering given: %v", err)
			}
			_, c.ask = s.Ask(nilCtx, "which?")
			_, _, c.steer = s.Steer(nilCtx)
			_, c.await = s.Await(nilCtx, 1)
			_, c.askAfter = s.Ask(ctx, "which, then?")
			got <- c
			return s.Output("done")
		})})
	require.NoError(t, err)
	require.ErrorIs(t, r.Run(nilCtx), core.ErrInvalidArgument, "Run")
	o, err := r.TakeTurn(nilCtx, "t")
	require.ErrorIs(t, err, core.ErrInvalidArgument, "TakeTurn")
	require.Equal(t, runner.OutcomeError, o)
	require.ErrorIs(t, r.TakeTurns(nilCtx), core.ErrInvalidArgument, "TakeTurns")
	require.Equal(t, core.Lease{}, must(ws.Lease(ctx, "t")), "nothing claimed")

	require.Equal(t, runner.OutcomeDone, turnOn(t, r, "t"))
	c := waitFor(t, got, "the agent's calls")
	require.ErrorIs(t, c.ask, core.ErrInvalidArgument, "Session.Ask")
	require.ErrorIs(t, c.steer, core.ErrInvalidArgument, "Session.Steer")
	require.ErrorIs(t, c.await, core.ErrInvalidArgument, "Session.Await")
	require.NoError(t, c.askAfter, "the run goes on")
	th := must(ws.Thread(ctx, "t"))
	require.Len(t, th.Runs(), 1)
	require.Equal(t, core.StateEnded, th.Runs()[0].State)
	require.Equal(t, "done", th.Runs()[0].Output)
	require.Equal(t, []core.Seq{2}, th.Runs()[0].Steering, "the steering recorded once")

	wctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	for _, h := range []*runner.RunHandle{{}, nil} {
		require.ErrorIs(t, h.Wait(wctx), core.ErrInvalidArgument, "Wait on a RunHandle the runner did not make")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
