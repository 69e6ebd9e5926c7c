package tlc

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/specmodel"
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

// With fences off, as with them on, the Go checker and TLC give the same
// verdict at the same line: on walks of the model with every fence off
// (each a behaviour of the unfenced spec, which breaks I1 and
// NoLiveAbandon), and on mutants of them, checked against the spec with
// no fence, with Abandon's alone, and with RunStart's and Reply's.
func TestDifferentialWithFencesOff(t *testing.T) {
	env := realTLC(t)
	if testing.Short() {
		t.Skip("TLC NOT RUN: -short skips the differential")
	}
	c, err := specmodel.ReadConfig("../spec/ThreadClaimLapseUnfenced.cfg")
	if err != nil {
		t.Fatal(err)
	}
	c.FenceStart, c.FenceReply, c.FenceAbandon = false, false, false
	m := specmodel.New(c)
	rng := rand.New(rand.NewPCG(41, 43))
	var walks [][]core.TraceEvent
	for range 400 {
		if l := m.TraceLines(m.RandomWalk(rng, 10+rng.IntN(20))); len(l) > 0 {
			walks = append(walks, l)
		}
	}
	for _, fences := range [][]string{{}, {"abandon"}, {"start", "reply"}} {
		cases := MakeCases(rng, func(rng *rand.Rand, lines []core.TraceEvent) ([]core.TraceEvent, string) {
			for range rng.IntN(3) {
				lines, _ = tracecheck.Mutate(rng, lines)
			}
			return lines, ""
		}, make([]string, len(walks)), walks, 800)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		b := testBatch(scratch(t))
		b.Fences = fences
		rs, err := env.Differential(ctx, b, cases)
		cancel()
		if err != nil {
			t.Fatalf("fences %v: TLC (deadline 5 min): %v", fences, err)
		}
		bad, accepted := 0, 0
		for _, r := range rs {
			if r.Go == 0 {
				accepted++
			}
			if !r.Agree() {
				if bad++; bad <= 3 {
					t.Errorf("fences %v: the Go checker %d, TLC %d (0 = accepted); Go: %s", fences, r.Go, r.TLC, r.GoErr)
				}
			}
		}
		if accepted == 0 || accepted == len(rs) {
			t.Errorf("fences %v: %d of %d accepted: a differential needs both verdicts", fences, accepted, len(rs))
		}
		t.Logf("fences %v: %d traces, %d accepted by the Go checker, %d disagree", fences, len(rs), accepted, bad)
	}
}
