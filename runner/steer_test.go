package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// The steering tests compare the trace's lines themselves: the trace
// checker learns the Steer, SteerRecord and SteerRefused lines in a change
// of its own.

// hookTracer keeps a process's trace lines and calls on, when set, with
// each line as it is traced, in the call that traced it.
type hookTracer struct {
	mu    sync.Mutex
	lines []core.TraceEvent
	on    func(core.TraceEvent)
}

func (h *hookTracer) Trace(ev core.TraceEvent) {
	h.mu.Lock()
	h.lines = append(h.lines, ev)
	on := h.on
	h.mu.Unlock()
	if on != nil {
		on(ev)
	}
}

func (h *hookTracer) actions() []core.Action {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]core.Action, len(h.lines))
	for i, l := range h.lines {
		out[i] = l.Action
	}
	return out
}

// after returns the actions traced after the first line of action a.
func (h *hookTracer) after(t *testing.T, a core.Action) []core.Action {
	t.Helper()
	all := h.actions()
	for i, x := range all {
		if x == a {
			return all[i+1:]
		}
	}
	t.Fatalf("no %s line in %v", a, all)
	return nil
}

// takeTurn takes one turn of p on the thread, failing the test, naming
// the turn, when it does not end within waitLimit.
func takeTurn(t *testing.T, p *proc, thread core.ThreadID) (runner.Outcome, error) {
	t.Helper()
	type result struct {
		o   runner.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, err := p.r.TakeTurn(context.Background(), thread)
		done <- result{o, err}
	}()
	r := waitFor(t, done, fmt.Sprintf("%s's turn on thread %q to end", p.name, thread))
	return r.o, r.err
}

// sums reads the runner's counters: "name" or "name attr=value", to the
// sum.
func sums(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					out[m.Name] += dp.Value
					for _, kv := range dp.Attributes.ToSlice() {
						out[m.Name+" "+string(kv.Key)+"="+kv.Value.Emit()] += dp.Value
					}
				}
			}
		}
	}
	return out
}

// The messages posted after the run's prompt are given to its agent as
// steering, oldest first, each recorded after it was given: the records
// consume them, the run lists them, the turn counts them, and the
// telemetry counts and traces them.
func TestSteerGivenThenRecorded(t *testing.T) {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s := memory.New()
	tr := &hookTracer{}
	var reports []runner.TurnReport
	a := newProc(t, s, "A", procOpts{tracer: tr, agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
		var heard []string
		for {
			m, ok, err := s.Steer(ctx)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			heard = append(heard, m.Text)
		}
		return s.Output("heard " + strings.Join(heard, ", "))
	}), cfg: func(c *runner.Config) {
		c.TracerProvider, c.MeterProvider = tp, mp
		c.OnTurn = func(r runner.TurnReport) { reports = append(reports, r) }
	}})
	newThread(t, a.ws, "t", "m1", "m2", "m3")
	o, err := takeTurn(t, a, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)

	th, err := a.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, "heard m2, m3", th.Runs()[0].Output)
	require.Equal(t, []core.Seq{2, 3}, th.Runs()[0].Steering)
	require.Equal(t, core.Seq(3), th.Taken)
	require.Equal(t, []core.Action{core.ActionSteer, core.ActionSteerRecord, core.ActionSteer, core.ActionSteerRecord, core.ActionRunEnd, core.ActionRelease},
		tr.after(t, core.ActionRunStart))
	require.Len(t, reports, 1)
	require.Equal(t, 3, reports[0].Consumed, "the prompt and two messages of steering")

	got := sums(t, reader)
	require.Equal(t, int64(2), got[runner.MetricSteering+" action=Steer"])
	require.Equal(t, int64(2), got[runner.MetricSteering+" action=SteerRecord"])
	require.Zero(t, got[runner.MetricSteering+" action=SteerRefused"])
	ended := spans.Ended()
	require.Len(t, ended, 1)
	var events []string
	for _, ev := range ended[0].Events() {
		if strings.HasPrefix(ev.Name, "steer") {
			events = append(events, ev.Name)
		}
	}
	require.Equal(t, []string{"steer", "steer_recorded", "steer", "steer_recorded"}, events)
}

// The record of steering is made in the background as Steer returns; the
// run's next call waits for it, whichever it is: the runner's end of the
// run when the agent returns at once, Ask, Await's end of the run, the
// next Steer. Each agent runs many times, under -race.
func TestSteerRecordBeforeTheRunsNextCall(t *testing.T) {
	agents := map[string]func(ctx context.Context, s *runner.Session) error{
		"agent returns": func(ctx context.Context, s *runner.Session) error {
			_, _, err := s.Steer(ctx)
			return err
		},
		"Ask": func(ctx context.Context, s *runner.Session) error {
			if _, _, err := s.Steer(ctx); err != nil {
				return err
			}
			_, err := s.Ask(ctx, "which one?")
			return err
		},
		"Await": func(ctx context.Context, s *runner.Session) error {
			if _, _, err := s.Steer(ctx); err != nil {
				return err
			}
			req, err := s.Ask(ctx, "which one?")
			if err != nil {
				return err
			}
			actx, cancel := context.WithTimeout(ctx, waitLimit)
			defer cancel()
			_, err = s.Await(actx, req)
			return err
		},
		"Steer": func(ctx context.Context, s *runner.Session) error {
			if _, _, err := s.Steer(ctx); err != nil {
				return err
			}
			_, _, err := s.Steer(ctx)
			return err
		},
	}
	next := map[string]core.Action{"agent returns": core.ActionRunEnd, "Ask": core.ActionAsk, "Await": core.ActionAsk, "Steer": core.ActionSteer}
	for name, agent := range agents {
		t.Run(name, func(t *testing.T) {
			for i := range 25 {
				ctx := context.Background()
				tr := &hookTracer{}
				a := newProc(t, memory.New(), "A", procOpts{tracer: tr, agent: runner.AgentFunc(agent)})
				newThread(t, a.ws, "t", "m1", "m2", "m3")
				o, err := takeTurn(t, a, "t")
				require.NoError(t, err)
				require.Equal(t, runner.OutcomeDone, o, "run %d", i)
				after := tr.after(t, core.ActionSteer)
				require.Equal(t, []core.Action{core.ActionSteerRecord, next[name]}, after[:2], "run %d: the lines after Steer", i)
				th, err := a.ws.Thread(ctx, "t")
				require.NoError(t, err)
				want := []core.Seq{2}
				if name == "Steer" {
					want = []core.Seq{2, 3}
				}
				require.Equal(t, want, th.Runs()[0].Steering, "run %d", i)
				for m, n := range th.Consumed() {
					require.Equal(t, 1, n, "run %d: message %d consumed %d times", i, m, n)
				}
			}
		})
	}
}

// Steering given to a run that a later claim abandons before its record:
// the record is refused, and the round ends as a refused end does. The
// agent's ctx is cancelled; its later calls, and its run's handle, return
// core.ErrRunAbandoned; the turn is lost, and writes nothing more (no
// RunEnd, no Release). The next holder gives the message again.
func TestSteerRecordRefused(t *testing.T) {
	for _, then := range []string{"returns", "awaits"} {
		t.Run("agent "+then, func(t *testing.T) {
			ctx := context.Background()
			s := memory.New()
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			b := newProc(t, s, "B", procOpts{skew: ttl})
			var cb core.Claim
			tr := &hookTracer{}
			// As A gives the steering, before its record, A's claim lapses
			// and B claims the thread and abandons A's run.
			tr.on = abandonAtSteer(ctx, b, &cb)
			results := make(chan []error, 1)
			handles := make(chan *runner.RunHandle, 1)
			a := newProc(t, s, "A", procOpts{tracer: tr, agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
				var errs []error
				_, ok, err := s.Steer(ctx)
				if err != nil || !ok {
					errs = append(errs, fmt.Errorf("steering was not given: ok %v, err %w", ok, err))
				}
				if then == "returns" {
					// The turn records the steering (StepSteerRecord).
					results <- []error{core.ErrRunAbandoned, core.ErrRunAbandoned}
					return nil
				}
				// The run's next write records the steering first.
				_, err = s.Ask(ctx, "q")
				errs = append(errs, err)
				select {
				case <-ctx.Done():
				case <-time.After(waitLimit):
					errs = append(errs, errors.New("the agent's ctx was not cancelled after its steering's record was refused"))
				}
				_, _, err = s.Steer(ctx)
				errs = append(errs, err)
				_, err = s.Await(ctx, 1)
				errs = append(errs, err)
				results <- errs
				return ctx.Err()
			}), cfg: func(c *runner.Config) {
				c.MeterProvider = mp
				c.OnRun = func(h *runner.RunHandle) { handles <- h }
			}})
			newThread(t, a.ws, "t", "m1", "m2")
			o, err := takeTurn(t, a, "t")
			require.ErrorIs(t, err, core.ErrRunAbandoned)
			require.Equal(t, runner.OutcomeLost, o)
			errs := waitFor(t, results, "the agent's calls after the refused record")
			require.GreaterOrEqual(t, len(errs), 2)
			for i, err := range errs {
				require.ErrorIs(t, err, core.ErrRunAbandoned, "the agent's call %d after the refused record", i)
			}
			h := waitFor(t, handles, "the run's handle")
			wctx, cancel := context.WithTimeout(ctx, waitLimit)
			defer cancel()
			require.ErrorIs(t, h.Wait(wctx), core.ErrRunAbandoned, "the run's handle")
			require.Equal(t, []core.Action{core.ActionSteerRefused}, tr.after(t, core.ActionSteer), "A's lines after the steering it gave")

			th, err := a.ws.Thread(ctx, "t")
			require.NoError(t, err)
			require.Equal(t, core.StateAbandoned, th.Runs()[0].State)
			require.Empty(t, th.Runs()[0].Steering)
			require.Equal(t, core.Seq(1), th.Taken, "the refused record consumed nothing")
			p, err := b.ws.Plan(ctx, cb)
			require.NoError(t, err)
			require.Equal(t, core.Plan{Kind: core.PlanRun, Message: 2, Taken: 1, Posted: p.Posted}, p, "B gives the message again")
			got := sums(t, reader)
			require.Equal(t, int64(1), got[runner.MetricSteering+" action=Steer"])
			require.Equal(t, int64(1), got[runner.MetricSteering+" action=SteerRefused"])
			require.Zero(t, got[runner.MetricSteering+" action=SteerRecord"])
		})
	}
}

// The record refused at the agent's own Ask or Steer, after which the
// agent returns (with the call's error or without): the turn ends lost
// as when it makes the record itself, the run's handle returns
// core.ErrRunAbandoned, and nothing more is written or traced. Found by
// the twentieth pass: before, the turn went on to record the run's end
// in the round the refusal had ended, and crashed the turn on the
// refusal of that (ErrRoundOver), an OutcomeError.
func TestSteerRecordRefusedAtAgentsCallThenReturns(t *testing.T) {
	for _, via := range []string{"Ask", "Steer"} {
		t.Run(via, func(t *testing.T) {
			ctx := context.Background()
			s := memory.New()
			b := newProc(t, s, "B", procOpts{skew: ttl})
			tr := &hookTracer{}
			tr.on = abandonAtSteer(ctx, b, new(core.Claim))
			calls := make(chan error, 1)
			handles := make(chan *runner.RunHandle, 1)
			a := newProc(t, s, "A", procOpts{tracer: tr, agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
				if _, ok, err := s.Steer(ctx); err != nil || !ok {
					return fmt.Errorf("steering was not given: ok %v, err %w", ok, err)
				}
				var err error
				if via == "Ask" {
					_, err = s.Ask(ctx, "q")
				} else {
					_, _, err = s.Steer(ctx)
				}
				calls <- err
				return err
			}), cfg: func(c *runner.Config) { c.OnRun = func(h *runner.RunHandle) { handles <- h } }})
			newThread(t, a.ws, "t", "m1", "m2")
			o, err := takeTurn(t, a, "t")
			require.ErrorIs(t, waitFor(t, calls, "the agent's "+via), core.ErrRunAbandoned, "the agent's "+via)
			require.ErrorIs(t, err, core.ErrRunAbandoned)
			require.Equal(t, runner.OutcomeLost, o)
			require.ErrorIs(t, waitRun(t, waitFor(t, handles, "the run's handle"), "the run"), core.ErrRunAbandoned)
			require.Equal(t, []core.Action{core.ActionSteerRefused}, tr.after(t, core.ActionSteer), "A's lines after the steering it gave")
		})
	}
}

// A renewal finds the claim lost while the run is steered: the agent's
// ctx is cancelled, and the record, which is not fenced, still consumes
// the message, since no later claim abandoned the run; so does the run's
// end. The turn is lost; the thread's next holder has nothing to do.
func TestSteerLeaseLostWhileSteered(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	given := make(chan struct{})
	cancelled := make(chan struct{})
	a := newProc(t, s, "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
		if _, ok, err := s.Steer(ctx); err != nil || !ok {
			return fmt.Errorf("steering was not given: ok %v, err %w", ok, err)
		}
		close(given)
		select {
		case <-ctx.Done():
			close(cancelled)
		case <-time.After(waitLimit):
			return errors.New("the agent's ctx was not cancelled when the claim was lost")
		}
		return nil
	})})
	b := newProc(t, s, "B", procOpts{skew: ttl})
	newThread(t, a.ws, "t", "m1", "m2")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepAgent)
	stepped := make(chan bool, 1)
	go func() { stepped <- turn.Step(ctx) }()
	waitFor(t, given, "the agent to be given steering")
	cb, err := b.ws.Claim(ctx, "t", "B-1", ttl)
	require.NoError(t, err)
	require.ErrorIs(t, turn.Renew(ctx), core.ErrThreadBusy)
	waitFor(t, cancelled, "the agent's ctx to be cancelled")
	waitFor(t, stepped, "the agent's step to end")
	stepTo(t, turn, runner.StepOver)
	o, err := turn.Outcome()
	require.ErrorIs(t, err, core.ErrThreadBusy)
	require.Equal(t, runner.OutcomeLost, o)

	th, err := a.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.StateEnded, th.Runs()[0].State)
	require.Equal(t, []core.Seq{2}, th.Runs()[0].Steering)
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1}, th.Consumed())
	p, err := b.ws.Plan(ctx, cb)
	require.NoError(t, err)
	require.Equal(t, core.PlanNothing, p.Kind)
}

// Steer after the run's end was taken up (Await) is out of order, and
// gives nothing.
func TestSteerAfterAwaitOutOfOrder(t *testing.T) {
	errs := make(chan error, 1)
	a := newProc(t, memory.New(), "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
		req, err := s.Ask(ctx, "which one?")
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		if _, err := s.Await(actx, req); err != nil {
			return err
		}
		_, _, err = s.Steer(ctx)
		errs <- err
		return nil
	})})
	newThread(t, a.ws, "t", "m1", "m2", "m3")
	o, err := takeTurn(t, a, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
	require.ErrorIs(t, waitFor(t, errs, "the agent's Steer after Await"), core.ErrOutOfOrder)
}

// abandonAtSteer is a hook for a tracer of A's: at A's Steer line, B
// claims thread "t" (its claim in *cb) and abandons A's run, as if A's
// claim had lapsed between the steering's giving and its record.
func abandonAtSteer(ctx context.Context, b *proc, cb *core.Claim) func(core.TraceEvent) {
	return func(ev core.TraceEvent) {
		if ev.Action != core.ActionSteer {
			return
		}
		var err error
		*cb, err = b.ws.Claim(ctx, "t", "B-1", ttl)
		if err == nil {
			var p core.Plan
			if p, err = b.ws.Plan(ctx, *cb); err == nil {
				err = b.ws.Abandon(ctx, *cb, p.Runs[0])
			}
		}
		if err != nil {
			panic(fmt.Sprintf("B could not abandon A's run: %v", err))
		}
	}
}
