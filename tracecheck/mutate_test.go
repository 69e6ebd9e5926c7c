package tracecheck_test

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// TestMutateKeepsShape guards Mutate's contract: every mutant is written
// and read back unchanged (it is well-formed), the input is not touched,
// every kind shows up, and the kinds that change a line do change it.
func TestMutateKeepsShape(t *testing.T) {
	files, err := filepath.Glob("testdata/ok-*.ndjson")
	if err != nil || len(files) == 0 {
		t.Fatal("no ok fixtures", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := map[tracecheck.MutationKind]int{}
	changed := 0
	for _, f := range files {
		base, err := tracecheck.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		orig := slices.Clone(base)
		for range 300 {
			mut, m := tracecheck.Mutate(rng, base)
			kinds[m.Kind]++
			if m.Line < 1 || m.Line > len(base) || m.Desc == "" {
				t.Fatalf("%s: mutation %+v names no line of the trace", f, m)
			}
			var buf bytes.Buffer
			w := tracecheck.NewWriter(&buf)
			for _, ev := range mut {
				w.Trace(ev)
			}
			back, err := tracecheck.Read(&buf, "mutant")
			if err != nil {
				t.Fatalf("%s: %s: the mutant does not read back: %v", f, m, err)
			}
			if !slices.Equal(back, mut) {
				t.Fatalf("%s: %s: read back differently", f, m)
			}
			switch {
			case m.Kind == tracecheck.MutDrop && len(mut) != len(base)-1,
				m.Kind == tracecheck.MutDuplicate && len(mut) != len(base)+1:
				t.Fatalf("%s: %s: %d lines from %d", f, m, len(mut), len(base))
			case m.Kind != tracecheck.MutSwap && m.Kind != tracecheck.MutAction && m.Kind != tracecheck.MutTick &&
				m.Kind != tracecheck.MutDuplicate && slices.Equal(mut, base):
				t.Fatalf("%s: %s changed nothing", f, m)
			}
			if !slices.Equal(mut, base) {
				changed++
			}
		}
		if !slices.Equal(base, orig) {
			t.Fatalf("%s: Mutate changed its input", f)
		}
	}
	for _, k := range tracecheck.MutationKinds() {
		if kinds[k] == 0 {
			t.Errorf("no %s mutation in %d", k, len(files)*300)
		}
	}
	if changed < len(files)*300*9/10 {
		t.Errorf("only %d of %d mutants differ from their trace", changed, len(files)*300)
	}
}

// TestMutantsAreMostlyRejected guards that the mutator and the checker
// together bite: most mutants of an accepted trace are rejected, each at a
// line of the mutant, and the checker never panics on one.
func TestMutantsAreMostlyRejected(t *testing.T) {
	base, err := tracecheck.ReadFile("testdata/ok-fenced-refusals.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rejected := 0
	const n = 1000
	for range n {
		mut, m := tracecheck.Mutate(rng, base)
		_, err := tracecheck.Check(mut)
		var v *tracecheck.Violation
		switch {
		case err == nil:
		case !asViolation(err, &v) || v.Line < 1 || v.Line > len(mut):
			t.Fatalf("%s: want a violation at a line of the mutant, got %v", m, err)
		default:
			rejected++
		}
	}
	if rejected < n*8/10 {
		t.Errorf("only %d of %d mutants rejected", rejected, n)
	}
	t.Logf("%d of %d mutants rejected", rejected, n)
}

// A mutant trace stays one of the actions a line may name.
func TestMutateActionsAreLogged(t *testing.T) {
	base := []core.TraceEvent{{Tick: 1, Action: core.ActionPost, Thread: "t", Proc: "x", Msg: 1}}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		mut, _ := tracecheck.MutateKind(rng, base, tracecheck.MutAction)
		if mut[0].Action == core.ActionLapse || mut[0].Action == "" {
			t.Fatalf("mutated to %q", mut[0].Action)
		}
	}
}
