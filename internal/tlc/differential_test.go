package tlc

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/tracecheck"
)

func okFixtures(t *testing.T) ([]string, [][]core.TraceEvent) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("../..", "tla", "testdata", "ok-*.ndjson"))
	more, _ := filepath.Glob(filepath.Join("../..", "tracecheck", "testdata", "ok-*.ndjson"))
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
// no fence, with Abandon's alone, and with RunStart's and Reply's. Random
// walks rarely hold an Abandon by a claim that lost its lease, so walks
// that do are drawn on purpose. Each setting also shows it can fail: a
// Go checker held to other fences than TLC's (all of them, or none) would
// disagree with TLC on some of its cases.
func TestDifferentialWithFencesOff(t *testing.T) {
	env := realTLC(t)
	if testing.Short() {
		t.Skip("TLC NOT RUN: -short skips the differential")
	}
	c, err := specmodel.ReadConfig("../../spec/ThreadClaimLapseUnfenced.cfg")
	if err != nil {
		t.Fatal(err)
	}
	c.Fences = core.Fences{}
	m := specmodel.New(c)
	rng := rand.New(rand.NewPCG(41, 43))
	var walks [][]core.TraceEvent
	for range 400 {
		if l := m.TraceLines(m.RandomWalk(rng, 10+rng.IntN(20))); len(l) > 0 {
			walks = append(walks, l)
		}
	}
	abandonOnly := goSpec(core.Fences{Start: true, Reply: true})
	lapsedAbandons := 0
	for range 40000 {
		if lapsedAbandons == 150 {
			break
		}
		l := m.TraceLines(m.RandomWalk(rng, 20+rng.IntN(60)))
		if at, _ := GoVerdict(l, abandonOnly...); at > 0 && l[at-1].Action == core.ActionAbandon {
			walks = append(walks, l)
			lapsedAbandons++
		}
	}
	if lapsedAbandons < 50 {
		t.Fatalf("%d walks with an Abandon past its fence, want 50 or more", lapsedAbandons)
	}
	t.Logf("%d walks, %d of them with an Abandon past its fence", len(walks), lapsedAbandons)
	for _, set := range []struct {
		fences core.Fences // the fences the batch holds its traces to
		blind  core.Fences // the fences a Go checker that must disagree somewhere is held to
		name   string      // blind's name
	}{{core.Fences{}, core.AllFences(), "all"}, {core.Fences{Abandon: true}, core.Fences{}, "none"}, {core.Fences{Start: true, Reply: true}, core.Fences{}, "none"}} {
		fences := set.fences
		cases := MakeCases(rng, func(rng *rand.Rand, lines []core.TraceEvent) ([]core.TraceEvent, string) {
			for range rng.IntN(3) {
				lines, _ = tracecheck.Mutate(rng, lines)
			}
			return lines, ""
		}, make([]string, len(walks)), walks, 800)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		b := testBatch(scratch(t))
		b.Unfenced = core.AllFences().Without(fences)
		rs, err := env.Differential(ctx, b, cases)
		cancel()
		if err != nil {
			t.Fatalf("fences %v: TLC (deadline 5 min): %v", fences, err)
		}
		blind := goSpec(core.AllFences().Without(set.blind))
		bad, accepted, blindBad := 0, 0, 0
		for _, r := range rs {
			if r.Go == 0 {
				accepted++
			}
			if !r.Agree() {
				if bad++; bad <= 3 {
					t.Errorf("fences %v: the Go checker %d, TLC %d (0 = accepted); Go: %s", fences, r.Go, r.TLC, r.GoErr)
				}
			}
			if at, _ := GoVerdict(r.Case.Lines, blind...); at != r.TLC {
				blindBad++
			}
		}
		if accepted == 0 || accepted == len(rs) {
			t.Errorf("fences %v: %d of %d accepted: a differential needs both verdicts", fences, accepted, len(rs))
		}
		if blindBad == 0 {
			t.Errorf("fences %v: a Go checker held to %s of the fences agrees with TLC on all %d cases: the differential could not tell them apart", fences, set.name, len(rs))
		}
		t.Logf("fences %v: %d traces, %d accepted by the Go checker, %d disagree; held to %s of the fences it would disagree on %d", fences, len(rs), accepted, bad, set.name, blindBad)
	}
}
