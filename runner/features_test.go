package runner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// With no Clock in its Config the runner takes the workspace's: a
// workspace on a manual clock renews when that clock moves, not on the
// machine's. (With the machine's clock the renewal would come ttl/3 = 3.3s
// of real time later, past waitFor's wait for the turn... and the turn
// would still be waiting.)
func TestClockFromWorkspace(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	clock := coretest.NewClock(epoch)
	ws := core.NewWorkspace(s, clock, core.WithProcess("A"))
	started := make(chan struct{})
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl,
		Agent: runner.AgentFunc(func(ctx context.Context, _ *runner.Session) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})})
	require.NoError(t, err)
	require.Same(t, clock, r.Config().Clock.(*coretest.Clock), "the runner's clock is not the workspace's")
	newThread(t, ws, "t", "m1")

	b := newProc(t, s, "B", procOpts{skew: ttl + time.Second})
	done := make(chan runner.Outcome, 1)
	go func() {
		o, _ := r.TakeTurn(ctx, "t")
		done <- o
	}()
	waitFor(t, started, "the agent to start")
	_, err = b.ws.Claim(ctx, "t", "B-1", ttl)
	require.NoError(t, err)
	waitUntil(t, func() bool { return clock.Waiters() > 0 }, "the renewal timer to wait on the workspace's clock")
	clock.Advance(r.Config().RenewEvery)
	require.Equal(t, runner.OutcomeLost, waitFor(t, done, "the turn to end lost after a renewal on the workspace's clock"))
}

// Run reports every turn to OnTurn and Logger, and hands each run's handle
// to OnRun as soon as it is planned.
func TestRunReportsTurns(t *testing.T) {
	s := memory.New()
	var logs bytes.Buffer
	var mu sync.Mutex
	var reports []runner.TurnReport
	handles := make(chan *runner.RunHandle, 4)
	turned := make(chan struct{}, 4)
	a := newProc(t, s, "A", procOpts{cfg: func(c *runner.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		c.OnTurn = func(rep runner.TurnReport) {
			mu.Lock()
			reports = append(reports, rep)
			mu.Unlock()
			turned <- struct{}{}
		}
		c.OnRun = func(h *runner.RunHandle) { handles <- h }
		c.PollEvery = time.Hour
	}})
	newThread(t, a.ws, "t", "m1", "m2")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.r.Run(ctx) }()
	waitFor(t, turned, "OnTurn to report the turn")
	for range 2 {
		h := waitFor(t, handles, "OnRun to hand over a run's handle")
		wctx, wcancel := context.WithTimeout(context.Background(), waitLimit)
		require.NoError(t, h.Wait(wctx), "a run that ended")
		wcancel()
	}
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return"), "a stopped runner returns nil")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reports, 1)
	rep := reports[0]
	require.Equal(t, core.ThreadID("t"), rep.Thread)
	require.Equal(t, core.Holder("A-1"), rep.Holder)
	require.Equal(t, runner.OutcomeDone, rep.Outcome)
	require.NoError(t, rep.Err)
	require.Equal(t, 2, rep.Consumed)
	require.Len(t, rep.Runs, 2)
	require.Equal(t, core.Seq(2), rep.Runs[1].Prompt)
	require.Contains(t, logs.String(), "turn over")
	require.Contains(t, logs.String(), "outcome=done")
}

// An agent asks, waits for the answer, and goes on with it: the answer is
// a message posted later, which the runner's next turn gives the request
// through a fenced Reply, and which Await returns.
func TestAgentAwaitsAnswer(t *testing.T) {
	s := memory.New()
	rec := &tracecheck.Recorder{}
	answers := make(chan string, 1)
	asked := make(chan struct{})
	wake := make(chan core.ThreadID, 1)
	a := newProc(t, s, "A", procOpts{tracer: rec, agent: runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
		if sess.Delivered.Prompt.Text != "deploy?" {
			return nil
		}
		req, err := sess.Ask(ctx, "which environment?")
		if err != nil {
			return err
		}
		close(asked)
		actx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		m, err := sess.Await(actx, req)
		if err != nil {
			return err
		}
		answers <- m.Text // the agent goes on with the answer
		return nil
	}), cfg: func(c *runner.Config) { c.Wake = wake; c.PollEvery = time.Hour }})
	newThread(t, a.ws, "t", "deploy?")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.r.Run(ctx) }()
	waitFor(t, asked, "the agent to ask")
	_, err := a.ws.Post(context.Background(), "t", "staging")
	require.NoError(t, err)
	wake <- "" // look at every thread
	require.Equal(t, "staging", waitFor(t, answers, "the agent to hear the answer"))
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return"), "a stopped runner returns nil")

	th, err := a.ws.Thread(context.Background(), "t")
	require.NoError(t, err)
	require.Equal(t, core.Request{ID: 1, Run: 1, Question: "which environment?", State: core.RequestAnswered, Answer: 2}, th.Requests[0])
	require.Equal(t, core.StateEnded, th.Runs()[0].State)
	_, err = tracecheck.Check(sortedLines(rec))
	require.NoError(t, err)
}

// The answer reaches an agent whose runner is not the one that replies:
// A's agent asks and waits; A's turn ends; B's runner takes the thread
// and commits the Reply; A's agent reads the answer through its workspace
// at its next poll on A's clock.
func TestAgentAwaitsAnswerFromAnotherProcess(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	rec := &tracecheck.Recorder{}
	answers := make(chan string, 1)
	asked := make(chan struct{})
	a := newProc(t, s, "A", procOpts{tracer: rec, agent: runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
		req, err := sess.Ask(ctx, "which environment?")
		if err != nil {
			return err
		}
		close(asked)
		actx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		m, err := sess.Await(actx, req)
		if err != nil {
			return err
		}
		answers <- m.Text
		return nil
	}), cfg: func(c *runner.Config) { c.PollEvery = time.Second }})
	b := newProc(t, s, "B", procOpts{tracer: rec})
	newThread(t, a.ws, "t", "deploy?")

	outcome, err := a.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome, "A's turn ends while its agent waits")
	waitFor(t, asked, "A's agent to ask")

	_, err = a.ws.Post(ctx, "t", "staging")
	require.NoError(t, err)
	outcome, err = b.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome)
	waitUntil(t, func() bool { return a.clock.Waiters() > 0 }, "A's agent to wait for its next poll")
	a.clock.Advance(time.Second)
	require.Equal(t, "staging", waitFor(t, answers, "A's agent to read the answer B committed"))
	_, err = tracecheck.Check(sortedLines(rec))
	require.NoError(t, err)
}

// A run abandoned before its agent waits: Await returns ErrRunAbandoned,
// and the turn ends lost.
func TestAwaitAbandonedRun(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	rec := &tracecheck.Recorder{}
	asked, proceed := make(chan struct{}), make(chan struct{})
	awaited := make(chan error, 1)
	a := newProc(t, s, "A", procOpts{tracer: rec, agent: runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
		req, err := sess.Ask(ctx, "which?")
		if err != nil {
			return err
		}
		close(asked)
		<-proceed
		_, err = sess.Await(context.WithoutCancel(ctx), req)
		awaited <- err
		return err
	})})
	b := newProc(t, s, "B", procOpts{tracer: rec, skew: ttl})
	newThread(t, a.ws, "t", "m1")
	ta := a.r.NewTurn("t")
	stepTo(t, ta, runner.StepAgent)
	stepped := make(chan struct{})
	go func() { ta.Step(ctx); close(stepped) }()
	waitFor(t, asked, "A's agent to ask")

	tb := b.r.NewTurn("t")
	stepTo(t, tb, runner.StepAbandon)
	tb.Step(ctx)
	stepTo(t, tb, runner.StepOver)

	close(proceed)
	require.ErrorIs(t, waitFor(t, awaited, "A's Await to return"), core.ErrRunAbandoned)
	waitFor(t, stepped, "A's agent step to end")
	require.Equal(t, runner.StepOver, ta.Next())
	outcome, err := ta.Outcome()
	require.Equal(t, runner.OutcomeLost, outcome)
	require.ErrorIs(t, err, core.ErrRunAbandoned)
	_, err = tracecheck.Check(sortedLines(rec))
	require.NoError(t, err)
}

// A bounded turn releases the thread with work left: MaxTurnMessages.
func TestTurnBoundedByMessages(t *testing.T) {
	ctx := context.Background()
	a := newProc(t, memory.New(), "A", procOpts{cfg: func(c *runner.Config) { c.MaxTurnMessages = 1 }})
	newThread(t, a.ws, "t", "m1", "m2", "m3")
	// A turn that reached its bound yields without looking for more work:
	// the third yields too, and a fourth finds nothing.
	for i, want := range []runner.Outcome{runner.OutcomeYielded, runner.OutcomeYielded, runner.OutcomeYielded} {
		outcome, err := a.r.TakeTurn(ctx, "t")
		require.NoError(t, err)
		require.Equal(t, want, outcome, "turn %d", i+1)
		th, err := a.ws.Thread(ctx, "t")
		require.NoError(t, err)
		require.Equal(t, core.Seq(i+1), th.Taken, "turn %d consumed one message", i+1)
		l, err := a.ws.Lease(ctx, "t")
		require.NoError(t, err)
		require.Equal(t, core.Lease{}, l, "a bounded turn releases its claim")
	}
	outcome, err := a.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome)
	require.False(t, runner.OutcomeYielded.Failed())
}

// A bounded turn releases the thread with work left: MaxTurnDuration, by
// the runner's clock (here an agent that takes 4s of it per run). Runs at
// 0s and 4s end at 8s, when a 7s turn is past its bound and an 8s turn
// has reached it: either plans nothing more, the third message left.
func TestTurnBoundedByDuration(t *testing.T) {
	for _, tt := range []struct {
		bound time.Duration
		why   string
	}{
		{7 * time.Second, "runs at 0s and 4s; at 8s the turn is past 7s"},
		{8 * time.Second, "runs at 0s and 4s; at 8s the turn has gone on for MaxTurnDuration"},
	} {
		t.Run(tt.bound.String(), func(t *testing.T) {
			ctx := context.Background()
			var a *proc
			a = newProc(t, memory.New(), "A", procOpts{
				agent: runner.AgentFunc(func(context.Context, *runner.Session) error { a.clock.Advance(4 * time.Second); return nil }),
				cfg:   func(c *runner.Config) { c.MaxTurnDuration = tt.bound },
			})
			newThread(t, a.ws, "t", "m1", "m2", "m3")
			outcome, err := a.r.TakeTurn(ctx, "t")
			require.NoError(t, err)
			require.Equal(t, runner.OutcomeYielded, outcome)
			require.Equal(t, core.Seq(2), taken(t, a, "t"), tt.why)
		})
	}
}

// Run keeps MaxConcurrentTurns turns going at once: two agents on two
// threads meet at a barrier that one turn at a time never reaches.
func TestRunConcurrentTurns(t *testing.T) {
	for _, n := range []int{1, 2} {
		var mu sync.Mutex
		running := 0
		both := make(chan struct{})
		release := make(chan struct{})
		a := newProc(t, memory.New(), "A", procOpts{
			agent: runner.AgentFunc(func(ctx context.Context, _ *runner.Session) error {
				mu.Lock()
				running++
				if running == 2 {
					close(both)
				}
				mu.Unlock()
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			}),
			cfg: func(c *runner.Config) { c.MaxConcurrentTurns = n; c.PollEvery = time.Hour },
		})
		newThread(t, a.ws, "t1", "m1")
		newThread(t, a.ws, "t2", "m1")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.r.Run(ctx) }()
		if n == 2 {
			waitFor(t, both, "two agents running at once with MaxConcurrentTurns 2")
		} else {
			select {
			case <-both:
				t.Fatal("two turns ran at once with MaxConcurrentTurns 1")
			case <-time.After(50 * time.Millisecond):
			}
		}
		close(release)
		cancel()
		require.NoError(t, waitFor(t, done, "Run to return"), "a stopped runner returns nil")
	}
}

// failing is a storage that fails every call while down: the database is
// unreachable.
type failing struct {
	core.Storage
	mu   sync.Mutex
	down bool
}

var errUnreachable = errors.New("connect: connection refused")

func (f *failing) setDown(d bool) { f.mu.Lock(); f.down = d; f.mu.Unlock() }

func (f *failing) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return errUnreachable
	}
	return f.Storage.Update(ctx, fn)
}

// B1: a turn that gives up while storage is unreachable still traces its
// Crash (at the last version it saw), so the process's trace stays valid:
// its next Claim, once storage is back, finds it idle.
func TestCrashTracedWhileStorageDown(t *testing.T) {
	ctx := context.Background()
	f := &failing{Storage: memory.New()}
	rec := &tracecheck.Recorder{}
	var outage sync.Once
	a := newProc(t, f, "A", procOpts{tracer: rec, agent: runner.AgentFunc(func(context.Context, *runner.Session) error {
		outage.Do(func() { f.setDown(true) }) // the database goes away during the first run
		return nil
	})})
	newThread(t, a.ws, "t", "m1", "m2")
	outcome, err := a.r.TakeTurn(ctx, "t")
	require.Equal(t, runner.OutcomeError, outcome)
	require.ErrorIs(t, err, errUnreachable)
	lines := rec.Lines()
	require.Equal(t, core.ActionCrash, lines[len(lines)-1].Action, "the Crash line was not written")
	_, err = tracecheck.Check(lines)
	require.NoError(t, err)

	f.setDown(false)
	a.clock.Advance(ttl)
	outcome, err = a.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome)
	_, err = tracecheck.Check(sortedLines(rec))
	require.NoError(t, err, "the trace after the outage")
}

// A turn over five messages starts the second run with the first's end
// (core.Workspace.RunEndThenStart), the three lines one transaction's:
// three messages wait after its prompt (startBacklog). The later runs,
// with fewer behind them, start apart, and the last run's end releases
// the claim in its own transaction (nothing is left to plan). Ten
// transactions, not twelve, and the trace is the same sequence of lines.
func TestTurnStartsWithEnd(t *testing.T) {
	s := &countingStorage{Storage: memory.New()}
	rec := &stampingRecorder{}
	a := newProc(t, s, "A", procOpts{tracer: rec})
	newThread(t, a.ws, "t", "m1", "m2", "m3", "m4", "m5")
	before := s.n.Load()
	outcome, err := a.r.TakeTurn(context.Background(), "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome)
	require.Equal(t, int64(10), s.n.Load()-before)
	var own []core.TraceEvent
	var actions []core.Action
	for _, l := range rec.Lines() {
		if l.Proc == "A" && l.Action != core.ActionPost {
			own = append(own, l)
			actions = append(actions, l.Action)
		}
	}
	run := []core.Action{core.ActionRunEnd, core.ActionPlan, core.ActionRunStart}
	want := []core.Action{core.ActionClaim, core.ActionPlan, core.ActionRunStart}
	for range 4 {
		want = append(want, run...)
	}
	want = append(want, core.ActionRunEnd, core.ActionRelease)
	require.Equal(t, want, actions)
	for i, l := range own {
		if i == 0 {
			continue
		}
		together := i == 1 || i == 4 || i == 5 || own[i].Action == core.ActionPlan || own[i].Action == core.ActionRelease
		require.Equal(t, together, l.Call == own[i-1].Call, "line %d, %s: one transaction with the line before", i, l.Action)
	}
	_, err = tracecheck.Check(sortedLines(&rec.Recorder))
	require.NoError(t, err)
}

// stampingRecorder stamps each line's call and return with a counter
// (core.TraceClock), so that a test sees which lines one transaction
// traced: they carry its call and return.
type stampingRecorder struct {
	tracecheck.Recorder
	n atomic.Int64
}

func (r *stampingRecorder) TraceNow() int64 { return r.n.Add(1) }

// A turn over two messages makes five transactions: Claim with the first
// Plan, for each message RunStart and RunEnd with the next Plan, the last
// with the Release (nothing left to plan); nine with SeparatePlans, whose
// Plans and Release are transactions of their own. (Two messages are too short a backlog for a start to go with the
// end before it: TestTurnStartsWithEnd.) The trace is the same sequence of lines either way. The prompt
// handed to the agent and the post time the latency metric needs come
// with the plan: no read of the thread again after RunStart, nor for the
// agent.
func TestTurnTransactions(t *testing.T) {
	for _, c := range []struct {
		separate bool
		want     int64
	}{{false, 5}, {true, 9}} {
		t.Run(fmt.Sprintf("separate=%v", c.separate), func(t *testing.T) {
			s := &countingStorage{Storage: memory.New()}
			rec := &tracecheck.Recorder{}
			var prompt string
			a := newProc(t, s, "A", procOpts{tracer: rec, cfg: func(cfg *runner.Config) { cfg.SeparatePlans = c.separate },
				agent: runner.AgentFunc(func(_ context.Context, sess *runner.Session) error {
					prompt = sess.Delivered.Prompt.Text
					return nil
				})})
			newThread(t, a.ws, "t", "m1", "m2")
			before := s.n.Load()
			outcome, err := a.r.TakeTurn(context.Background(), "t")
			require.NoError(t, err)
			require.Equal(t, runner.OutcomeDone, outcome)
			require.Equal(t, c.want, s.n.Load()-before)
			require.Equal(t, "m2", prompt)
			var actions []core.Action
			for _, l := range rec.Lines() {
				if l.Proc == "A" {
					actions = append(actions, l.Action)
				}
			}
			require.Equal(t, []core.Action{core.ActionPost, core.ActionPost, core.ActionClaim, core.ActionPlan, core.ActionRunStart, core.ActionRunEnd,
				core.ActionPlan, core.ActionRunStart, core.ActionRunEnd, core.ActionRelease}, actions)
			_, err = tracecheck.Check(sortedLines(rec))
			require.NoError(t, err)
		})
	}
}

// After an agent awaits its answer, the turn goes on: it replies, starts
// the next run, and a lost claim cancels that run's agent (not the
// waiting one's, which kept its context).
func TestRunAfterAwaitCancelledOnLoss(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	asked, heard, second := make(chan struct{}), make(chan string, 1), make(chan struct{})
	hold := make(chan struct{}) // the first agent stays on after hearing, till the test ends
	defer close(hold)
	a := newProc(t, s, "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
		if sess.Delivered.Prompt.Text != "deploy?" {
			close(second)
			<-ctx.Done() // the second run waits to be cancelled
			return ctx.Err()
		}
		req, err := sess.Ask(ctx, "where?")
		if err != nil {
			return err
		}
		close(asked)
		actx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		m, err := sess.Await(actx, req)
		if err != nil {
			return err
		}
		heard <- m.Text
		<-hold
		return nil
	})})
	b := newProc(t, s, "B", procOpts{skew: ttl + time.Second})
	newThread(t, a.ws, "t", "deploy?")
	ta := a.r.NewTurn("t")
	stepTo(t, ta, runner.StepAgent)
	stepped := make(chan struct{})
	go func() { ta.Step(ctx); close(stepped) }()
	waitFor(t, asked, "the first agent to ask")
	waitFor(t, stepped, "the agent step to end once the agent awaits")
	require.Equal(t, runner.StepPlan, ta.Next())

	for _, m := range []string{"staging", "next"} {
		_, err := a.ws.Post(ctx, "t", m)
		require.NoError(t, err)
	}
	stepTo(t, ta, runner.StepAgent) // Plan, Reply, Plan, RunStart
	require.Equal(t, "staging", waitFor(t, heard, "the first agent to hear its answer"))
	stepped = make(chan struct{})
	go func() { ta.Step(ctx); close(stepped) }()
	waitFor(t, second, "the second run's agent to start")
	_, err := b.ws.Claim(ctx, "t", "B-1", ttl)
	require.NoError(t, err)
	require.ErrorIs(t, ta.Renew(ctx), core.ErrThreadBusy)
	waitFor(t, stepped, "the second agent to be cancelled by the lost claim")
	stepTo(t, ta, runner.StepOver)
	outcome, _ := ta.Outcome()
	require.Equal(t, runner.OutcomeLost, outcome)
}
