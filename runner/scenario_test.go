package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// adrScenario plays ADR-0069's counterexample: A claims and plans a run for
// the oldest message; A's claim lapses before its run_started (lapse moves
// B's clock past A's expiry); B claims, abandons nothing, plans the same
// message; then A's start and B's start are tried in that order.
func adrScenario(t *testing.T, fences *core.Fences, lapse func(a, b *proc)) (s *memory.Store, a, b *proc, ta, tb *runner.Turn) {
	ctx := context.Background()
	s = memory.New()
	a = newProc(t, s, "A", procOpts{fences: fences})
	b = newProc(t, s, "B", procOpts{fences: fences})
	newThread(t, a.ws, "t", "m1")

	ta = a.r.NewTurn("t")
	stepTo(t, ta, runner.StepRunStart)
	require.Equal(t, core.Seq(1), latestRun(ta).Prompt)

	lapse(a, b)

	tb = b.r.NewTurn("t")
	stepTo(t, tb, runner.StepRunStart)
	require.Equal(t, core.Seq(1), latestRun(tb).Prompt, "B must plan the same message")

	ta.Step(ctx) // A's run_started
	tb.Step(ctx) // B's run_started
	return s, a, b, ta, tb
}

// The clock-skew case: B's clock runs ahead of A's by more than the TTL,
// so B sees A's claim expired while A's renewal timer has not fired.
func skewLapse(a, b *proc) { b.clock.Advance(ttl + time.Second) }

func TestADRScenarioFenced(t *testing.T) {
	s, _, _, ta, tb := adrScenario(t, nil, skewLapse)

	outcome, err := ta.Outcome()
	require.Equal(t, runner.OutcomeFenced, outcome)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	require.ErrorIs(t, waitRun(t, latestRun(ta), "the handle of A's refused start"), core.ErrThreadBusy, "RunHandle.Wait of a refused start")
	require.Equal(t, core.RunID(0), latestRun(ta).RunID(), "a refused start has no run")
	require.Equal(t, runner.StepAgent, tb.Next(), "B's start must succeed")

	f := readFacts(t, s, "t")
	require.Equal(t, map[core.Seq]int{1: 1}, f.consumed, "I1: message consumed once")
	require.Len(t, f.active, 1, "I3: one active run")
}

// The mutant: with the fence switched off the same schedule consumes the
// message twice and leaves two runs active. This is what the checks exist
// to catch; if it stops failing, the fenced test above proves nothing.
func TestADRScenarioUnfencedMutant(t *testing.T) {
	s, _, _, ta, tb := adrScenario(t, &core.Fences{}, skewLapse)
	require.Equal(t, runner.StepAgent, ta.Next(), "unfenced, A's start goes through")
	require.Equal(t, runner.StepAgent, tb.Next())
	f := readFacts(t, s, "t")
	require.Equal(t, 2, f.consumed[1], "the mutant consumes message 1 twice")
	require.Len(t, f.active, 2, "the mutant has two active runs")
}

// stallingStorage holds back the Update calls of one process while stalled:
// a write in flight that has not reached storage yet.
type stallingStorage struct {
	core.Storage
	entered chan struct{}
	release chan struct{}
}

func (s *stallingStorage) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if s.entered != nil {
		close(s.entered)
		s.entered = nil
		<-s.release
	}
	return s.Storage.Update(ctx, fn)
}

// The stalled-write case: A's run_started is in flight past the TTL (every
// process's clock moves on, A's timers included); B takes the thread, and
// A's write, when it lands, is refused.
func TestStalledWriteFenced(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	stall := &stallingStorage{Storage: s}
	a := newProc(t, stall, "A", procOpts{})
	b := newProc(t, s, "B", procOpts{})
	newThread(t, b.ws, "t", "m1")

	ta := a.r.NewTurn("t")
	stepTo(t, ta, runner.StepRunStart)

	stall.entered, stall.release = make(chan struct{}), make(chan struct{})
	entered := stall.entered
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ta.Step(ctx) // blocks in flight
	}()
	waitFor(t, entered, "A's RunStart to reach storage")
	a.clock.Advance(2 * ttl)
	b.clock.Advance(2 * ttl)

	tb := b.r.NewTurn("t")
	stepTo(t, tb, runner.StepAgent)
	close(stall.release)
	stepped := make(chan struct{})
	go func() { wg.Wait(); close(stepped) }()
	waitFor(t, stepped, "A's stalled RunStart to return once released")

	outcome, err := ta.Outcome()
	require.Equal(t, runner.OutcomeFenced, outcome)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	require.ErrorIs(t, waitRun(t, latestRun(ta), "the handle of A's refused start"), core.ErrThreadBusy)
	f := readFacts(t, s, "t")
	require.Equal(t, map[core.Seq]int{1: 1}, f.consumed)
	require.Len(t, f.active, 1)
}

// A run left by a holder whose claim lapsed is abandoned by the next
// claimant; the old holder's end is then refused and its turn is lost.
func TestAbandonedRunEndRefused(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	a := newProc(t, s, "A", procOpts{})
	b := newProc(t, s, "B", procOpts{})
	newThread(t, a.ws, "t", "m1", "m2")
	ta := a.r.NewTurn("t")
	stepTo(t, ta, runner.StepAgent)
	b.clock.Advance(ttl)
	tb := b.r.NewTurn("t")
	stepTo(t, tb, runner.StepAbandon)
	tb.Step(ctx)
	stepTo(t, tb, runner.StepAgent)
	require.Equal(t, core.Seq(2), latestRun(tb).Prompt)

	stepTo(t, ta, runner.StepOver)
	outcome, err := ta.Outcome()
	require.Equal(t, runner.OutcomeLost, outcome)
	require.ErrorIs(t, err, core.ErrRunAbandoned)
	require.ErrorIs(t, waitRun(t, latestRun(ta), "A's abandoned run"), core.ErrRunAbandoned)

	stepTo(t, tb, runner.StepOver)
	outcome, err = tb.Outcome()
	require.Equal(t, runner.OutcomeDone, outcome)
	require.NoError(t, err)
	require.NoError(t, waitRun(t, latestRun(tb), "B's run"))
	f := readFacts(t, s, "t")
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1}, f.consumed)
	require.Empty(t, f.active)
}

// A turn answers an open request with the next message, then starts a run
// for the one after, and releases when nothing is left.
func TestTurnRepliesThenRuns(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	asked := false
	a := newProc(t, s, "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
		if asked {
			return nil
		}
		asked = true
		_, err := sess.Ask(ctx, "which?")
		return err
	})})
	newThread(t, a.ws, "t", "m1")
	outcome, err := a.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome)

	for _, m := range []string{"answer", "next"} {
		_, err := a.ws.Post(ctx, "t", m)
		require.NoError(t, err)
	}
	outcome, err = a.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, outcome)

	th, err := a.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Seq(3), th.Taken)
	require.Equal(t, core.Request{ID: 1, Run: 1, Question: "which?", State: core.RequestAnswered, Answer: 2}, th.Requests[0])
	require.Len(t, th.Runs(), 2)
	require.Equal(t, core.Seq(3), th.Runs()[1].Prompt)
	l, err := a.ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Lease{}, l, "a finished turn releases its claim")
	_ = s
}

// A fenced Abandon: C started a run and died; A claims the thread once C's
// lease has expired and plans the run's abandonment; A's own claim lapses
// (B's clock runs further ahead) and B claims the thread, its next step the
// same Abandon. A's Abandon is refused by the fence: A's turn is fenced (a
// refusal of "abandon" counted, no run abandoned by A), and B abandons C's
// run and starts the next message.
func TestAbandonFenced(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s, rec := memory.New(), &tracecheck.Recorder{}
	c := newProc(t, s, "C", procOpts{tracer: rec})
	a := newProc(t, s, "A", procOpts{tracer: rec, skew: ttl + time.Second, cfg: func(c *runner.Config) { c.MeterProvider = mp }})
	b := newProc(t, s, "B", procOpts{tracer: rec, skew: 2 * (ttl + time.Second)})
	newThread(t, c.ws, "t", "m1", "m2")
	stepTo(t, c.r.NewTurn("t"), runner.StepAgent) // C's run of m1 is active; C goes no further
	ta := a.r.NewTurn("t")
	stepTo(t, ta, runner.StepAbandon)
	tb := b.r.NewTurn("t")
	stepTo(t, tb, runner.StepAbandon)

	ta.Step(ctx) // A's Abandon, under B's lease
	outcome, err := ta.Outcome()
	require.Equal(t, runner.OutcomeFenced, outcome)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	got := sums(t, reader)
	require.Equal(t, int64(1), got[runner.MetricFencedRefusals+" write=abandon"])
	require.Equal(t, int64(1), got[runner.MetricFencedRefusals], "one refusal, of abandon")
	require.Equal(t, int64(1), got[runner.MetricTurns+" outcome=fenced"])
	require.Equal(t, int64(1), got[runner.MetricTurns], "one turn, fenced")
	require.Zero(t, got[runner.MetricRunsAbandoned], "A abandoned nothing")
	require.Equal(t, []core.RunID{1}, readFacts(t, s, "t").active, "C's run is still active after A's refused Abandon")

	stepTo(t, tb, runner.StepAgent)
	f := readFacts(t, s, "t")
	require.Equal(t, []core.RunID{2}, f.active, "B abandoned C's run and started its own")
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1}, f.consumed)
	_, err = tracecheck.Check(sortedLines(rec))
	require.NoError(t, err)
}

// fusedStartScenario: A's turn on a thread with a backlog has run its
// first run's agent; A's claim lapses (B's clock runs ahead) and B claims
// the thread, its next step the Abandon of A's run. A then ends its run
// and, with three messages behind the next prompt, starts the next in the
// same transaction (core.Workspace.RunEndThenStart), where the fence
// decides.
func fusedStartScenario(t *testing.T, fences *core.Fences) (s *memory.Store, rec *tracecheck.Recorder, ta, tb *runner.Turn) {
	ctx := context.Background()
	s, rec = memory.New(), &tracecheck.Recorder{}
	a := newProc(t, s, "A", procOpts{fences: fences, tracer: rec})
	b := newProc(t, s, "B", procOpts{tracer: rec})
	newThread(t, a.ws, "t", "m1", "m2", "m3", "m4", "m5")
	ta = a.r.NewTurn("t")
	stepTo(t, ta, runner.StepRunEnd)
	skewLapse(a, b)
	tb = b.r.NewTurn("t")
	stepTo(t, tb, runner.StepAbandon)
	ta.Step(ctx) // the run's end, the plan and the next start: one transaction
	return s, rec, ta, tb
}

// The start fused with the run's end is fenced as a start alone is: the
// end is recorded (it is not fenced), the start is not, and the turn's
// RunStart step then records the refusal; B goes on with the message.
func TestFusedStartFenced(t *testing.T) {
	ctx := context.Background()
	s, rec, ta, tb := fusedStartScenario(t, nil)
	require.Equal(t, runner.StepRunStart, ta.Next(), "the fence refused the fused start: the start is the next step's")
	ta.Step(ctx)
	outcome, err := ta.Outcome()
	require.Equal(t, runner.OutcomeFenced, outcome)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	stepTo(t, tb, runner.StepAgent)
	require.Equal(t, core.Seq(2), latestRun(tb).Prompt, "B starts the message A's fused start did not take")
	f := readFacts(t, s, "t")
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1}, f.consumed)
	require.Len(t, f.active, 1)
	_, err = tracecheck.Check(sortedLines(rec))
	require.NoError(t, err)
}

// The mutant: with A's start fence off, the fused start goes through under
// B's lease, and the trace checker rejects it (the spec refuses that
// start). If this stops failing, the fenced test above proves nothing.
func TestFusedStartUnfencedMutant(t *testing.T) {
	_, rec, ta, _ := fusedStartScenario(t, &core.Fences{Reply: true, Abandon: true})
	require.Equal(t, runner.StepAgent, ta.Next(), "unfenced, A's fused start goes through")
	_, err := tracecheck.Check(sortedLines(rec))
	require.Error(t, err, "a start under another holder's lease")
}
