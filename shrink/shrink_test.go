package shrink

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/sim"
)

// tlcShortestI1 is the length of TLC's shortest counterexample to
// I1_ConsumedAtMostOnce under spec/ThreadClaimLapseUnfenced.cfg, in
// states: Init and eight actions (Post, Claim, Lapse, Plan, Claim, Plan,
// RunStart, RunStart). A Go story of n lines with its one inferred Lapse
// is n+2 states.
const tlcShortestI1 = 9

// Every failure the unfenced mutant shows in the first seeds shrinks to a
// story that still fails the same way when replayed, and is short: the I1
// story no longer than TLC's shortest counterexample.
func TestShrinkUnfencedStories(t *testing.T) {
	ctx := context.Background()
	seen := map[Failure]bool{}
	for seed := range uint64(80) {
		e, err := Execute(ctx, sim.Config{Seed: seed, Unfenced: true})
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
			if f.Invariant == "I1_ConsumedAtMostOnce" {
				require.LessOrEqual(t, len(story)+2, tlcShortestI1, "I1 story longer than TLC's shortest")
				require.Equal(t, core.ActionRunStart, story[len(story)-1].Action)
			}
		}
	}
	for _, want := range []Failure{
		{Check: CheckInvariant, Invariant: "I1_ConsumedAtMostOnce"},
		{Check: CheckInvariant, Invariant: "NoLiveAbandon"},
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
	e, err := Execute(ctx, sim.Config{Seed: 0, Unfenced: true})
	require.NoError(t, err)
	_, err = Shrink(ctx, e.Log, Failure{Check: CheckInvariant, Invariant: "I3_OneActiveRun"})
	require.ErrorIs(t, err, ErrNotReproduced)

	ok, err := Execute(ctx, sim.Config{Seed: 0})
	require.NoError(t, err)
	require.Empty(t, ok.Failures())
	_, err = Shrink(ctx, ok.Log, Failure{Check: CheckInvariant, Invariant: "I1_ConsumedAtMostOnce"})
	require.ErrorIs(t, err, ErrNotReproduced)
}
