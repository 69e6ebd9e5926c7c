package tlc

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

func okFixtures(t *testing.T) ([]string, [][]core.TraceEvent) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "tla", "testdata", "ok-*.ndjson"))
	more, _ := filepath.Glob(filepath.Join("..", "tracecheck", "testdata", "ok-*.ndjson"))
	var names []string
	var traces [][]core.TraceEvent
	for _, f := range append(files, more...) {
		lines, err := tracecheck.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		names, traces = append(names, filepath.Base(f)), append(traces, lines)
	}
	if len(traces) == 0 {
		t.Fatal("no ok-* fixtures")
	}
	return names, traces
}

func mutate(rng *rand.Rand, lines []core.TraceEvent) ([]core.TraceEvent, string) {
	m, what := tracecheck.Mutate(rng, lines)
	return m, what.Desc
}

// The Go checker and TLC give the same verdict, at the same line, on
// mutants of the fixtures.
func TestDifferentialOnFixtureMutants(t *testing.T) {
	env := realTLC(t)
	if testing.Short() {
		t.Skip("TLC NOT RUN: -short skips the differential (tracecheck tlc differential runs 500)")
	}
	names, traces := okFixtures(t)
	cases := MakeCases(rand.New(rand.NewPCG(7, 7)), mutate, names, traces, 60)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rs, err := env.Differential(ctx, testBatch(scratch(t)), cases)
	if err != nil {
		t.Fatalf("the differential's TLC run did not finish in 8 minutes: %v", err)
	}
	rejected := 0
	for _, r := range rs {
		if r.Go > 0 {
			rejected++
		}
		if !r.Agree() {
			t.Errorf("%s, %s: Go checker %d, TLC %d (0 = accepted); Go: %s", r.Case.From, r.Case.Desc, r.Go, r.TLC, r.GoErr)
		}
	}
	if rejected == 0 || rejected == len(rs) {
		t.Errorf("%d of %d mutants rejected: a differential needs both verdicts", rejected, len(rs))
	}
}

// MakeCases keeps the timing fields: the trace spec checks them too.
func TestMakeCasesKeepsTiming(t *testing.T) {
	lines := []core.TraceEvent{{Action: core.ActionClaim, Thread: "t", Tick: 1, Holder: "h", Lease: "h", Now: 5, TTL: 3, Expires: 8}}
	keep := func(_ *rand.Rand, l []core.TraceEvent) ([]core.TraceEvent, string) { return l, "unchanged" }
	cs := MakeCases(rand.New(rand.NewPCG(1, 1)), keep, []string{"x"}, [][]core.TraceEvent{lines}, 3)
	if len(cs) != 3 {
		t.Fatalf("%d cases, want 3", len(cs))
	}
	if ev := cs[0].Lines[0]; ev != lines[0] {
		t.Errorf("the case's line is %+v, want %+v", ev, lines[0])
	}
}
