package runner_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

func TestConfigValidation(t *testing.T) {
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch))
	agent := runner.AgentFunc(func(context.Context, *runner.Session) error { return nil })
	cases := []struct {
		name string
		cfg  runner.Config
		want string
	}{
		{"no workspace", runner.Config{Agent: agent}, "Workspace is required"},
		{"no agent", runner.Config{Workspace: ws}, "Agent is required"},
		{"negative ttl", runner.Config{Workspace: ws, Agent: agent, ClaimTTL: -time.Second}, "ClaimTTL -1s must be positive"},
		{"renew not shorter", runner.Config{Workspace: ws, Agent: agent, ClaimTTL: time.Second, RenewEvery: time.Second}, "RenewEvery 1s must be shorter than ClaimTTL 1s"},
		{"ttl too short for the default renewal", runner.Config{Workspace: ws, Agent: agent, ClaimTTL: 2 * time.Nanosecond}, "ClaimTTL 2ns is too short: RenewEvery, ClaimTTL/3 by default, would be 0"},
		{"negative renew", runner.Config{Workspace: ws, Agent: agent, RenewEvery: -time.Second}, "RenewEvery -1s must be positive"},
		{"negative poll", runner.Config{Workspace: ws, Agent: agent, PollEvery: -time.Second}, "PollEvery -1s must be positive"},
		{"negative grace", runner.Config{Workspace: ws, Agent: agent, ShutdownGrace: -time.Second}, "ShutdownGrace -1s must be positive"},
		// Each bound at its edge, and the fields no case above set, each
		// naming its field (the seventh mutation pass: a bound moved from
		// 0 to -1ns, a bound dropped for the last three fields, and an
		// error naming another field failed no test).
		{"ttl just negative", runner.Config{Workspace: ws, Agent: agent, ClaimTTL: -time.Nanosecond}, "ClaimTTL -1ns must be positive"},
		{"poll just negative", runner.Config{Workspace: ws, Agent: agent, PollEvery: -time.Nanosecond}, "PollEvery -1ns must be positive"},
		{"grace just negative", runner.Config{Workspace: ws, Agent: agent, ShutdownGrace: -time.Nanosecond}, "ShutdownGrace -1ns must be positive"},
		{"negative turns", runner.Config{Workspace: ws, Agent: agent, MaxConcurrentTurns: -1}, "MaxConcurrentTurns -1 must be positive"},
		{"negative turn messages", runner.Config{Workspace: ws, Agent: agent, MaxTurnMessages: -1}, "MaxTurnMessages -1 must not be negative"},
		{"negative turn duration", runner.Config{Workspace: ws, Agent: agent, MaxTurnDuration: -time.Nanosecond}, "MaxTurnDuration -1ns must be positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := runner.New(c.cfg)
			require.Nil(t, r)
			require.ErrorContains(t, err, c.want)
		})
	}
	r, err := runner.New(runner.Config{Workspace: ws, Agent: agent})
	require.NoError(t, err)
	cfg := r.Config()
	require.Equal(t, runner.DefaultClaimTTL, cfg.ClaimTTL)
	require.Equal(t, runner.DefaultClaimTTL/3, cfg.RenewEvery)
	require.Equal(t, runner.DefaultPollEvery, cfg.PollEvery)
	require.Equal(t, runner.DefaultShutdownGrace, cfg.ShutdownGrace)
	require.Equal(t, runner.DefaultMaxConcurrentTurns, cfg.MaxConcurrentTurns)
	require.Equal(t, runner.DefaultTakeoverTurns, cfg.TakeoverTurns)
	require.Equal(t, runner.DefaultClaimTTL, cfg.MaxTurnDuration)
	// MaxTurnDuration's default is the ClaimTTL set, not the default one
	// (the seventh mutation pass: a default of DefaultClaimTTL failed no
	// test).
	r, err = runner.New(runner.Config{Workspace: ws, Agent: agent, ClaimTTL: 9 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 9*time.Second, r.Config().MaxTurnDuration)
	require.Equal(t, 3*time.Second, r.Config().RenewEvery)
	h1, err := cfg.NewHolder()
	require.NoError(t, err)
	h2, err := cfg.NewHolder()
	require.NoError(t, err)
	require.Len(t, string(h1), 32, "128 bits in hex")
	require.NotEqual(t, h1, h2, "holders are fresh per claim")
}

// Bad input writes nothing: an empty holder, an unknown thread.
func TestBadInputWritesNothing(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	p := newProc(t, s, "A", procOpts{cfg: func(c *runner.Config) {
		c.NewHolder = func() (core.Holder, error) { return "", nil }
	}})
	newThread(t, p.ws, "t", "m1")
	before, err := p.ws.Thread(ctx, "t")
	require.NoError(t, err)

	outcome, err := p.r.TakeTurn(ctx, "t")
	require.Equal(t, runner.OutcomeError, outcome)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.ErrorContains(t, err, "empty holder")
	after, err := p.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, before, after)
	l, err := p.ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Lease{}, l)

	q := newProc(t, s, "B", procOpts{})
	outcome, err = q.r.TakeTurn(ctx, "nope")
	require.Equal(t, runner.OutcomeError, outcome)
	require.ErrorIs(t, err, core.ErrUnknownThread)
	ids, err := q.ws.Threads(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{"t"}, ids)
}

// A renewal that finds the claim gone cancels the running agent's
// context; the run's end is still recorded (it is not fenced and the run
// was not abandoned), and the turn ends lost.
func TestLostRenewalCancelsAgent(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	started := make(chan struct{})
	a := newProc(t, s, "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, _ *runner.Session) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})})
	b := newProc(t, s, "B", procOpts{skew: ttl + time.Second})
	newThread(t, a.ws, "t", "m1")

	type result struct {
		o   runner.Outcome
		err error
	}
	done := make(chan result)
	go func() {
		o, err := a.r.TakeTurn(ctx, "t")
		done <- result{o, err}
	}()
	waitFor(t, started, "A's agent to start")
	_, err := b.ws.Claim(ctx, "t", "B-1", ttl)
	require.NoError(t, err, "B's clock is ahead: it sees A's claim expired")
	waitUntil(t, func() bool { return a.clock.Waiters() > 0 }, "A's renewal timer to wait on A's clock")
	a.clock.Advance(a.r.Config().RenewEvery)

	res := waitFor(t, done, "A's turn to end after its renewal found the claim gone")
	require.Equal(t, runner.OutcomeLost, res.o)
	require.ErrorIs(t, res.err, core.ErrThreadBusy)
	th, err := a.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.StateEnded, th.Runs()[0].State)
	l, err := a.ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Holder("B-1"), l.Holder, "A must not release B's lease")
}

// unknownCommit commits a transaction and then says it cannot tell
// whether it did, once, when armed: the connection broke during COMMIT.
// It counts the transactions it was given; an agent may read storage
// beside the turn's own calls, so its fields are behind mu.
type unknownCommit struct {
	core.Storage
	mu    sync.Mutex
	armed bool
	calls int
}

func (u *unknownCommit) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	u.mu.Lock()
	u.calls++
	u.mu.Unlock()
	err := u.Storage.Update(ctx, fn)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.armed && err == nil {
		u.armed = false
		return errors.Join(core.ErrCommitUnknown, errors.New("connection reset during COMMIT"))
	}
	return err
}

// arm makes the next transaction's commit unknown, and returns how many
// transactions came before it.
func (u *unknownCommit) arm() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.armed = true
	return u.calls
}

// count is how many transactions u was given.
func (u *unknownCommit) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls
}

// writeInDoubt steps the turn to step and takes that step with storage's
// next commit reported unknown: the turn must end there, OutcomeError
// with that error, after that one call (a second, sent under the same
// holder, core would refuse as out of order, and only a defect explains).
func writeInDoubt(t *testing.T, turn *runner.Turn, u *unknownCommit, step runner.Step) {
	t.Helper()
	stepTo(t, turn, step)
	calls := u.arm()
	turn.Step(context.Background())
	require.Equal(t, runner.StepOver, turn.Next())
	outcome, err := turn.Outcome()
	require.Equal(t, runner.OutcomeError, outcome)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.NotErrorIs(t, err, core.ErrOutOfOrder, "the %s was sent again", step)
	require.Equal(t, 1, u.count()-calls, "the %s was retried, or the round went on, under the same holder", step)
}

// A write whose commit outcome is unknown ends the round; it is never
// retried under the same holder. The next claimant abandons what did start.
func TestCommitUnknownNotRetried(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	u := &unknownCommit{Storage: s}
	a := newProc(t, u, "A", procOpts{})
	b := newProc(t, s, "B", procOpts{skew: ttl})
	newThread(t, b.ws, "t", "m1", "m2")

	ta := a.r.NewTurn("t")
	writeInDoubt(t, ta, u, runner.StepRunStart)
	require.ErrorIs(t, waitRun(t, latestRun(ta), "the run whose start is in doubt"), core.ErrCommitUnknown)

	outcome, err := b.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome)
	f := readFacts(t, s, "t")
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1}, f.consumed)
	th, err := b.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.StateAbandoned, th.Runs()[0].State, "B abandons the run whose start A could not confirm")
}

// A Reply whose commit outcome is unknown is not sent again under the same
// holder either: the turn ends with the Reply's own error, after one call.
func TestReplyCommitUnknownNotRetried(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	u := &unknownCommit{Storage: s}
	// The agent asks and returns, its request open: the turn's next plan
	// answers it with m2. (An agent that awaited the answer would read
	// storage beside the turn's calls, and its reads would count among
	// them, or take the commit armed for the Reply.)
	a := newProc(t, u, "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, sn *runner.Session) error {
		_, err := sn.Ask(ctx, "which one?")
		return err
	})})
	b := newProc(t, s, "B", procOpts{skew: ttl})
	newThread(t, b.ws, "t", "m1", "m2")

	writeInDoubt(t, a.r.NewTurn("t"), u, runner.StepReply)

	outcome, err := b.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome)
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1}, readFacts(t, s, "t").consumed, "the Reply committed: m2 answered once")
}

// A fenced start is a failed turn: its span's status is Error, and the
// metrics count a fenced turn and a fenced refusal of run_started.
func TestTelemetryFencedStartIsFailedTurn(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s := memory.New()
	a := newProc(t, s, "A", procOpts{cfg: func(c *runner.Config) { c.TracerProvider, c.MeterProvider = tp, mp }})
	b := newProc(t, s, "B", procOpts{skew: ttl})
	newThread(t, a.ws, "t", "m1")

	ta := a.r.NewTurn("t")
	stepTo(t, ta, runner.StepRunStart)
	outcome, err := b.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome)
	stepTo(t, ta, runner.StepOver)

	ended := spans.Ended()
	require.Len(t, ended, 1)
	require.Equal(t, "threadclaim.turn", ended[0].Name())
	require.Equal(t, codes.Error, ended[0].Status().Code)
	require.Contains(t, ended[0].Status().Description, "fenced")
	require.Contains(t, ended[0].Attributes(), attribute.String("outcome", "fenced"))

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	sums := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					key := ""
					for _, kv := range dp.Attributes.ToSlice() {
						key += string(kv.Key) + "=" + kv.Value.Emit()
					}
					if sums[m.Name] == nil {
						sums[m.Name] = map[string]int64{}
					}
					sums[m.Name][key] += dp.Value
				}
			}
		}
	}
	require.Equal(t, map[string]int64{"outcome=fenced": 1}, sums[runner.MetricTurns])
	require.Equal(t, map[string]int64{"write=run_started": 1}, sums[runner.MetricFencedRefusals])
	require.Nil(t, sums[runner.MetricRunsStarted], "a refused start is not a started run")
}

// Run works every thread with messages until its context ends, waking on
// Wake without waiting for the poll.
func TestRunWakesAndConsumes(t *testing.T) {
	s := memory.New()
	wake := make(chan core.ThreadID, 1)
	a := newProc(t, s, "A", procOpts{cfg: func(c *runner.Config) { c.Wake = wake; c.PollEvery = time.Hour }})
	newThread(t, a.ws, "t1", "m1")
	newThread(t, a.ws, "t2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- a.r.Run(ctx) }()
	waitUntil(t, func() bool { return taken(t, a, "t1") == 1 }, "Run to consume t1's message")
	_, err := a.ws.Post(context.Background(), "t2", "m1")
	require.NoError(t, err)
	wake <- "" // look at every thread
	waitUntil(t, func() bool { return taken(t, a, "t2") == 1 }, "Run, woken, to consume t2's message")
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
}

// countingStorage counts transactions.
type countingStorage struct {
	core.Storage
	n atomic.Int64
}

func (c *countingStorage) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	c.n.Add(1)
	return c.Storage.Update(ctx, fn)
}

// A closed Wake channel does not make Run spin: it falls back to polling,
// so with nothing posted and the poll an hour away it makes no more
// transactions after its first look.
func TestRunClosedWakePolls(t *testing.T) {
	s := &countingStorage{Storage: memory.New()}
	wake := make(chan core.ThreadID)
	close(wake)
	a := newProc(t, s, "A", procOpts{cfg: func(c *runner.Config) { c.Wake = wake; c.PollEvery = time.Hour }})
	newThread(t, a.ws, "t1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.r.Run(ctx) }()
	// Run looks, waits for its poll (a timer), reads the closed Wake,
	// looks again and waits for its next poll (a second timer): the first
	// timer alone is before the second look, whose transactions the
	// count below would see.
	waitUntil(t, func() bool { return a.clock.Waiters() >= 2 }, "Run to look again once Wake was closed, and wait for its next poll")
	before := s.n.Load()
	time.Sleep(20 * time.Millisecond) // a spinning Run would make thousands of transactions here
	require.Equal(t, before, s.n.Load(), "Run spins on a closed Wake channel")
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
}

// A claim whose commit outcome is unknown but that did commit is given up
// like any write whose outcome was unknown: traced as Crash, never used.
func TestClaimCommitUnknownGivenUp(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	u := &unknownCommit{Storage: s}
	rec := &crashes{}
	clock := coretest.NewClock(epoch)
	ws := core.NewWorkspace(u, clock, core.WithProcess("A"), core.WithTracer(rec))
	r, err := runner.New(runner.Config{Workspace: ws, Clock: clock, ClaimTTL: ttl,
		Agent:     runner.AgentFunc(func(context.Context, *runner.Session) error { return nil }),
		NewHolder: func() (core.Holder, error) { return "A-1", nil }})
	require.NoError(t, err)
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err = ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	u.arm()
	outcome, err := r.TakeTurn(ctx, "t")
	require.Equal(t, runner.OutcomeError, outcome)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.Equal(t, []core.Action{core.ActionPost, core.ActionCrash}, rec.actions)
	th, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Empty(t, th.Runs(), "the round went on under a claim it could not confirm")
}

type crashes struct{ actions []core.Action }

func (c *crashes) Trace(ev core.TraceEvent) { c.actions = append(c.actions, ev.Action) }

// A turn that consumes a message counts it: a done turn, a run started and
// ended, and one consumption latency, measured from the post by the
// runner's clock.
func TestTelemetryConsumption(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	a := newProc(t, memory.New(), "A", procOpts{cfg: func(c *runner.Config) { c.MeterProvider = mp }})
	newThread(t, a.ws, "t", "m1")
	a.clock.Advance(3 * time.Second) // the message waits 3s before a runner takes it
	outcome, err := a.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	counts := map[string]int64{}
	var latency metricdata.HistogramDataPoint[float64]
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					counts[m.Name] += dp.Value
				}
			case metricdata.Histogram[float64]:
				require.Equal(t, runner.MetricConsumptionLatency, m.Name)
				require.Len(t, d.DataPoints, 1)
				latency = d.DataPoints[0]
			}
		}
	}
	require.Equal(t, int64(1), counts[runner.MetricTurns])
	require.Equal(t, int64(1), counts[runner.MetricRunsStarted])
	require.Equal(t, int64(1), counts[runner.MetricRunsEnded])
	require.Zero(t, counts[runner.MetricFencedRefusals])
	require.Equal(t, uint64(1), latency.Count)
	require.InDelta(t, 3.0, latency.Sum, 1e-9)
}

// When TakeTurn's context ends, the turn stops gracefully: the agent's context
// is cancelled, the run's end is recorded and the claim released, and no
// storage call is cut off in flight.
func TestWorkStopsGracefully(t *testing.T) {
	s := memory.New()
	started := make(chan struct{})
	a := newProc(t, s, "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, _ *runner.Session) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})})
	newThread(t, a.ws, "t", "m1", "m2")
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		o   runner.Outcome
		err error
	}
	done := make(chan result)
	go func() {
		o, err := a.r.TakeTurn(ctx, "t")
		done <- result{o, err}
	}()
	waitFor(t, started, "the agent to start")
	cancel()
	res := waitFor(t, done, "TakeTurn to stop gracefully once its context ended")
	require.Equal(t, runner.OutcomeStopped, res.o)
	require.NoError(t, res.err)
	require.False(t, res.o.Failed())
	th, err := a.ws.Thread(context.Background(), "t")
	require.NoError(t, err)
	require.Len(t, th.Runs(), 1, "a stopping turn started another run")
	require.Equal(t, core.StateEnded, th.Runs()[0].State, "the run's end was not recorded")
	l, err := a.ws.Lease(context.Background(), "t")
	require.NoError(t, err)
	require.Equal(t, core.Lease{}, l, "the claim was not released")

	outcome, err := a.r.TakeTurn(ctx, "t")
	require.Equal(t, runner.OutcomeStopped, outcome)
	require.ErrorIs(t, err, context.Canceled, "a stopped runner takes no new turn")
}
