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
	seen := shrinkEachFailure(t, func(seed uint64, e *Execution, f Failure, r Result) {
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
	})
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

// TestFewerMessages: a story's messages per thread come down to the most
// any thread is posted in it, and never go up (catches pass 13's mutant
// 54: they stay as they were).
func TestFewerMessages(t *testing.T) {
	post := func(th int) sim.Op { return sim.Op{Kind: sim.OpPost, Thread: th} }
	l := sim.Log{Threads: 2, Messages: 4, Ops: []sim.Op{post(0), post(1), post(0), {Kind: sim.OpStep}}}
	require.Equal(t, 2, fewerMessages(l).Messages)
	l.Ops = nil
	require.Equal(t, 1, fewerMessages(l).Messages, "at least one")
	l.Messages = 1
	l.Ops = []sim.Op{post(0), post(0), post(0)}
	require.Equal(t, 1, fewerMessages(l).Messages, "never more than the log had")
}

// TestFewestStatesTriesTheLastItemAlone: the search begins with the
// rejected line alone, the smallest subset there is (catches pass 13's
// mutant 65: subsets of one item skipped).
func TestFewestStatesTriesTheLastItemAlone(t *testing.T) {
	cur := []int{0, 1, 2, 3}
	// Any subset that keeps 3 fails, one state an item and Init.
	cost := func(keep []int) (int, bool) {
		if len(keep) == 0 || keep[len(keep)-1] != 3 {
			return 0, false
		}
		return 1 + len(keep), true
	}
	tries := 0
	got, err := fewestStates(context.Background(), cur, cost, &tries)
	require.NoError(t, err)
	require.Equal(t, []int{3}, got)
}

// TestShrunkStepsAskOnlyWhatTheyNeed: in a shrunk story no step asks a
// question, takes steering or names a thread other than the first where
// the story fails the same way without it (catches pass 13's mutants 56:
// a question asked weighs nothing, so none is ever taken away, and 55: a
// step's thread never set to the first).
func TestShrunkStepsAskOnlyWhatTheyNeed(t *testing.T) {
	ctx := context.Background()
	edits := []struct {
		name string
		has  func(sim.Op) bool
		edit func(*sim.Op)
	}{
		{"asks", func(o sim.Op) bool { return o.Asks > 0 }, func(o *sim.Op) { o.Asks = 0 }},
		{"steers", func(o sim.Op) bool { return o.Steers > 0 }, func(o *sim.Op) { o.Steers = 0 }},
		{"thread", func(o sim.Op) bool { return o.Kind == sim.OpStep && o.Thread > 0 }, func(o *sim.Op) { o.Thread = 0 }},
	}
	asked := 0
	shrinkEachFailure(t, func(seed uint64, _ *Execution, f Failure, r Result) {
		for i, op := range r.Log.Ops {
			for _, ed := range edits {
				if !ed.has(op) {
					continue
				}
				if ed.name == "asks" {
					asked++
				}
				l := r.Log
				l.Ops = append([]sim.Op{}, r.Log.Ops...)
				ed.edit(&l.Ops[i])
				again, err := Execute(ctx, l.Config())
				if err != nil {
					continue // the edit does not fit the log
				}
				require.False(t, again.Has(f), "seed %d %s: op %d (%v) fails the same way without its %s", seed, f, i, op, ed.name)
			}
		}
	})
	t.Logf("%d shrunk steps ask a question they need", asked)
}

// shrinkEachFailure runs the fences-off seeded executions of the first 80
// seeds and shrinks each failure they show, once, from the first seed
// that shows it; check sees the execution, the failure and its shrunk
// story. It returns the failures seen.
func shrinkEachFailure(t *testing.T, check func(seed uint64, e *Execution, f Failure, r Result)) map[Failure]bool {
	t.Helper()
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
			check(seed, e, f, r)
		}
	}
	return seen
}
