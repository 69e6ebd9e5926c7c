package shrink

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/sim"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// tlcShortestGuard is TLC's shortest counterexample, in states, for the
// property a fence's guard protects: a RunStart past `Fenced =>
// HasLease(p)` is how I1 breaks (9 states), an Abandon past
// `FenceAbandon => HasLease(p)` how NoLiveAbandon does (8). The
// invariants themselves, as the unfenced spec's checker finds them, have
// the same bounds.
var tlcShortestGuard = map[Failure]int{
	{Check: CheckTrace, Action: core.ActionRunStart, Rule: "Fenced => HasLease(p)"}:          tlcShortest[tracecheck.InvConsumedAtMostOnce],
	{Check: CheckTrace, Action: core.ActionAbandon, Rule: "FenceAbandon => HasLease(p)"}:     tlcShortest[tracecheck.InvNoLiveAbandon],
	{Check: CheckTrace, Action: core.ActionRunStart, Rule: tracecheck.InvConsumedAtMostOnce}: tlcShortest[tracecheck.InvConsumedAtMostOnce],
	{Check: CheckTrace, Action: core.ActionAbandon, Rule: tracecheck.InvNoLiveAbandon}:       tlcShortest[tracecheck.InvNoLiveAbandon],
}

// Fences-off traces of seeded executions, rejected by the checker of the
// fenced spec at a fence's guard, and by the checker of the unfenced spec
// at an invariant, shrink (by their lines alone: no operation log) to a
// story that is rejected the same way when checked again, and is no
// longer than TLC's shortest counterexample for that property.
func TestShrinkTraceUnfenced(t *testing.T) {
	ctx := context.Background()
	unfenced := tracecheck.WithSpec(tracecheck.Spec{})
	seen := map[Failure]bool{}
	shrunk := 0
	for seed := range uint64(60) {
		e, err := Execute(ctx, sim.Config{Seed: seed, Unfenced: true})
		require.NoError(t, err)
		for _, opts := range [][]tracecheck.Option{nil, {unfenced}} {
			_, err := tracecheck.Check(e.Lines, opts...)
			var v *tracecheck.Violation
			if !errors.As(err, &v) {
				continue
			}
			f := Failure{Check: CheckTrace, Action: v.Action, Rule: v.Rule}
			if seen[f] {
				continue
			}
			seen[f] = true
			r, err := ShrinkTrace(ctx, e.Lines, opts...)
			require.NoError(t, err, "seed %d %s", seed, f)
			require.Equal(t, f, r.Failure)
			t.Logf("seed %d %s: %d lines (thread %d) -> %d lines, %d states, %d tries", seed, f, len(e.Lines), r.From, len(r.Lines), r.States(), r.Tries)
			require.LessOrEqual(t, len(r.Lines), r.From)
			if len(r.Lines) < r.From {
				shrunk++
			}

			// Checked again from scratch, the story fails the same way.
			st, err := tracecheck.Check(r.Lines, opts...)
			var again *tracecheck.Violation
			require.ErrorAs(t, err, &again)
			require.Equal(t, f, Failure{Check: CheckTrace, Action: again.Action, Rule: again.Rule})
			require.Equal(t, len(r.Lines), again.Line, "the story ends at its rejected line")
			require.Equal(t, r.States(), 1+len(r.Lines)+st.LapsesInferred)

			if bound, ok := tlcShortestGuard[f]; ok {
				require.LessOrEqual(t, r.States(), bound, "%s: the story is %d states, TLC's shortest %d", f, r.States(), bound)
			}
			requireOneMinimal(t, r, opts)
		}
	}
	for _, want := range []Failure{
		{Check: CheckTrace, Action: core.ActionRunStart, Rule: "Fenced => HasLease(p)"},
		{Check: CheckTrace, Action: core.ActionAbandon, Rule: "FenceAbandon => HasLease(p)"},
		{Check: CheckTrace, Action: core.ActionRunStart, Rule: tracecheck.InvConsumedAtMostOnce},
		{Check: CheckTrace, Action: core.ActionAbandon, Rule: tracecheck.InvNoLiveAbandon},
	} {
		require.True(t, seen[want], "no seed showed %s", want)
	}
	require.Positive(t, shrunk, "no story was shorter than its trace")
}

// A trace the checker accepts is not shrunk.
func TestShrinkTraceAccepted(t *testing.T) {
	ctx := context.Background()
	e, err := Execute(ctx, sim.Config{Seed: 3})
	require.NoError(t, err)
	require.Nil(t, e.Violation)
	_, err = ShrinkTrace(ctx, e.Lines)
	require.ErrorIs(t, err, ErrNotReproduced)
}

// requireOneMinimal fails unless no single line of the story can go (with
// the ids renumbered, as shrinking does) while the same failure remains.
func requireOneMinimal(t *testing.T, r TraceResult, opts []tracecheck.Option) {
	t.Helper()
	var rn renumbering
	rn.index(r.Lines)
	for drop := range r.Lines {
		var keep []int
		for i := range r.Lines {
			if i != drop {
				keep = append(keep, i)
			}
		}
		cand, ok := rn.apply(r.Lines, keep)
		if !ok {
			continue
		}
		_, err := tracecheck.Check(cand, opts...)
		var v *tracecheck.Violation
		if errors.As(err, &v) && v.Action == r.Failure.Action && v.Rule == r.Failure.Rule {
			t.Fatalf("%s: line %d of the story can go and the failure remains", r.Failure, drop+1)
		}
	}
}
