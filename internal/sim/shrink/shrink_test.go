package shrink

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// tlcShortest is the length, in states, of TLC's shortest counterexample
// to each invariant: I1_ConsumedAtMostOnce under
// spec/ThreadClaimLapseUnfenced.cfg is Init and eight actions (Post,
// Claim, Lapse, Plan, Claim, Plan, RunStart, RunStart); NoLiveAbandon
// under spec/ThreadClaimLapseAbandonUnfenced.cfg is Init and seven (Post,
// Claim, Lapse, Claim, Plan, RunStart, Abandon). A Go story of n lines
// with k inferred Lapses is 1+n+k states.
var tlcShortest = map[string]int{core.InvConsumedAtMostOnce: 9, core.InvNoLiveAbandon: 8}

// Every failure the unfenced mutant shows in the first seeds shrinks to a
// story that still fails the same way when replayed, and is short: the I1
// story no longer than TLC's shortest counterexample.
func TestShrinkUnfencedStories(t *testing.T) {
	ctx := context.Background()
	seen := map[Failure]bool{}
	for seed := range uint64(80) {
		e, err := Execute(ctx, sim.Config{Seed: seed, Unfenced: core.AllFences()})
		require.NoError(t, err)
		for _, f := range e.Failures() {
			if seen[f] {
				continue
			}
			seen[f] = true
			r, err := Shrink(ctx, e.Log, f)
			require.NoError(t, err, "seed %d %s", seed, f)
			story := r.Exec.Story(f)
			t.Logf("seed %d %s: %d ops -> %d, story %d lines", seed, f, len(e.Log.Ops), len(r.Log.Ops), len(story))
			require.Less(t, len(r.Log.Ops), len(e.Log.Ops), "nothing removed")
			require.LessOrEqual(t, len(story), 12, "%s: story too long", f)

			// The shrunk log, replayed from scratch, fails the same way.
			again, err := Execute(ctx, r.Log.Config())
			require.NoError(t, err)
			require.True(t, again.Has(f), "%s: the shrunk log does not reproduce it: %v", f, again.Failures())
			require.Equal(t, r.Exec.Lines, again.Lines)
			if n, ok := tlcShortest[f.Invariant]; ok {
				st, _ := tracecheck.Check(story)
				states := 1 + len(story) + st.LapsesInferred
				require.LessOrEqual(t, states, n, "%s: the story is %d states, TLC's shortest %d", f, states, n)
			}
		}
	}
	for _, want := range []Failure{
		{Check: CheckInvariant, Invariant: core.InvConsumedAtMostOnce},
		{Check: CheckInvariant, Invariant: core.InvNoLiveAbandon},
		{Check: CheckTrace, Action: core.ActionRunStart, Rule: "Fenced => HasLease(p)"},
		{Check: CheckTrace, Action: core.ActionAbandon, Rule: "FenceAbandon => HasLease(p)"},
	} {
		require.True(t, seen[want], "no seed showed %s", want)
	}
}

// Shrinking keeps the failure asked for, not any failure: a log that does
// not show it is refused, and a fenced (passing) log has nothing to shrink.
func TestShrinkKeepsTheSameFailure(t *testing.T) {
	ctx := context.Background()
	e, err := Execute(ctx, sim.Config{Seed: 0, Unfenced: core.AllFences()})
	require.NoError(t, err)
	_, err = Shrink(ctx, e.Log, Failure{Check: CheckInvariant, Invariant: core.InvOneActiveRun})
	require.ErrorIs(t, err, ErrNotReproduced)

	ok, err := Execute(ctx, sim.Config{Seed: 0})
	require.NoError(t, err)
	require.Empty(t, ok.Failures())
	_, err = Shrink(ctx, ok.Log, Failure{Check: CheckInvariant, Invariant: core.InvConsumedAtMostOnce})
	require.ErrorIs(t, err, ErrNotReproduced)
}
