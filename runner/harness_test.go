package runner_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/tracecheck"
)

const ttl = 10 * time.Second

var epoch = time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)

// proc is one runner process: its own clock, workspace and runner.
type proc struct {
	name    string
	clock   *coretest.Clock
	ws      *core.Workspace
	r       *runner.Runner
	holders atomic.Int64
}

type procOpts struct {
	skew   time.Duration
	fences *core.Fences
	agent  runner.Agent
	tracer core.Tracer
	cfg    func(*runner.Config)
}

func newProc(t testing.TB, s core.Storage, name string, o procOpts) *proc {
	t.Helper()
	p := &proc{name: name, clock: coretest.NewClock(epoch.Add(o.skew))}
	opts := []core.Option{core.WithProcess(name)}
	if o.fences != nil {
		opts = append(opts, core.WithFencesForTesting(*o.fences))
	}
	if o.tracer != nil {
		opts = append(opts, core.WithTracer(o.tracer))
	}
	p.ws = core.NewWorkspace(s, p.clock, opts...)
	agent := o.agent
	if agent == nil {
		agent = runner.AgentFunc(func(context.Context, *runner.Session) error { return nil })
	}
	cfg := runner.Config{
		Workspace: p.ws,
		Agent:     agent,
		Clock:     p.clock,
		ClaimTTL:  ttl,
		NewHolder: func() (core.Holder, error) {
			return core.Holder(fmt.Sprintf("%s-%d", name, p.holders.Add(1))), nil
		},
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	r, err := runner.New(cfg)
	require.NoError(t, err)
	p.r = r
	return p
}

func newThread(t testing.TB, ws *core.Workspace, id core.ThreadID, msgs ...string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, ws.CreateThread(ctx, id))
	for _, m := range msgs {
		_, err := ws.Post(ctx, id, m)
		require.NoError(t, err)
	}
}

// stepTo steps the turn until its next step is want.
func stepTo(t testing.TB, turn *runner.Turn, want runner.Step) {
	t.Helper()
	for turn.Next() != want {
		require.NotEqual(t, runner.StepOver, turn.Next(), "turn ended before %s", want)
		turn.Step(context.Background())
	}
}

// facts are what the invariants speak of, read from storage's events.
type facts struct {
	consumed map[core.Seq]int // times each message was consumed
	active   []core.RunID
}

func readFacts(t testing.TB, s core.Storage, id core.ThreadID) facts {
	t.Helper()
	f := facts{consumed: map[core.Seq]int{}}
	require.NoError(t, s.Update(context.Background(), func(ctx context.Context, tx core.Transaction) error {
		evs, err := tx.Events(ctx, id)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Consumes() {
				f.consumed[e.Message]++
			}
		}
		th, err := tx.Thread(ctx, id)
		if err != nil {
			return err
		}
		for _, r := range th.ActiveRuns() {
			f.active = append(f.active, r.ID)
		}
		return nil
	}))
	return f
}

// waitLimit bounds every wait of these tests: a test that waits fails
// naming what it waited for, never hangs until go test's timeout.
const waitLimit = 10 * time.Second

// taken is the thread's taken cursor.
func taken(t testing.TB, p *proc, id core.ThreadID) core.Seq {
	t.Helper()
	th, err := p.ws.Thread(context.Background(), id)
	require.NoError(t, err)
	return th.Taken
}

// waitFor receives from ch, or fails the test naming what it waited for.
func waitFor[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		panic("unreachable")
	}
}

// waitRun waits for the run's handle to finish and returns the run's
// error, or fails the test naming the run it waited for.
func waitRun(t testing.TB, h *runner.RunHandle, what string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	err := h.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatalf("timed out after %v waiting for %s to finish", waitLimit, what)
	}
	return err
}

// waitUntil polls cond until it holds, or fails naming what it waited for.
func waitUntil(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// sortedLines returns the recorder's lines in trace order. The runner's
// goroutines and the test's own (a Post while an agent's Await records
// its run's end) trace their lines as each call returns, so a later
// write's line may come first; tracecheck.Sort is the normalising step
// the trace's order rule names for lines of concurrent callers.
func sortedLines(rec *tracecheck.Recorder) []core.TraceEvent {
	lines := rec.Lines()
	tracecheck.Sort(lines)
	return lines
}
