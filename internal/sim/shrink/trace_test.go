package shrink

import (
	"context"
	"errors"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// tlcShortestGuard is TLC's shortest counterexample, in states, for the
// property a fence's guard protects: a RunStart past `Fenced =>
// HasLease(p)` is how I1 breaks (9 states), an Abandon past
// `FenceAbandon => HasLease(p)` how NoLiveAbandon does (8). The
// invariants themselves, as the unfenced spec's checker finds them, have
// the same bounds.
var tlcShortestGuard = map[Failure]int{
	{Check: CheckTrace, Action: core.ActionRunStart, Rule: "Fenced => HasLease(p)"}:      tlcShortest[core.InvConsumedAtMostOnce],
	{Check: CheckTrace, Action: core.ActionAbandon, Rule: "FenceAbandon => HasLease(p)"}: tlcShortest[core.InvNoLiveAbandon],
	{Check: CheckTrace, Action: core.ActionRunStart, Rule: core.InvConsumedAtMostOnce}:   tlcShortest[core.InvConsumedAtMostOnce],
	{Check: CheckTrace, Action: core.ActionAbandon, Rule: core.InvNoLiveAbandon}:         tlcShortest[core.InvNoLiveAbandon],
}

// Fences-off traces of seeded executions, rejected by the checker of the
// fenced spec at a fence's guard, and by the checker of the unfenced spec
// at an invariant, shrink (by their lines alone: no operation log) to a
// story that is rejected the same way when checked again, and is no
// longer than TLC's shortest counterexample for that property.
func TestShrinkTraceUnfenced(t *testing.T) {
	ctx := context.Background()
	unfenced := tracecheck.WithFences(core.Fences{})
	// Each failure is shrunk from its first three seeds: shrinking keeps a
	// story 1-minimal, not the shortest there is, so one seed's story may
	// be longer than TLC's shortest (a process that crashed and claimed
	// again, say); the best of three must not be.
	seen := map[Failure]int{}
	best := map[Failure]int{}
	shrunk := 0
	for seed := range uint64(60) {
		e, err := Execute(ctx, sim.Config{Seed: seed, Unfenced: core.AllFences()})
		require.NoError(t, err)
		for _, opts := range [][]tracecheck.Option{nil, {unfenced}} {
			_, err := tracecheck.Check(e.Lines, opts...)
			var v *tracecheck.Violation
			if !errors.As(err, &v) {
				continue
			}
			f := Failure{Check: CheckTrace, Action: v.Action, Rule: v.Rule}
			if seen[f] == 3 {
				continue
			}
			seen[f]++
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

			if b, ok := best[f]; !ok || r.States() < b {
				best[f] = r.States()
			}
			requireOneMinimal(t, r, opts)
		}
	}
	for f, bound := range tlcShortestGuard {
		if b, ok := best[f]; ok {
			require.LessOrEqual(t, b, bound, "%s: the shortest story of its first three seeds is %d states, TLC's shortest %d", f, b, bound)
		}
	}
	for _, want := range []Failure{
		{Check: CheckTrace, Action: core.ActionRunStart, Rule: "Fenced => HasLease(p)"},
		{Check: CheckTrace, Action: core.ActionAbandon, Rule: "FenceAbandon => HasLease(p)"},
		{Check: CheckTrace, Action: core.ActionRunStart, Rule: core.InvConsumedAtMostOnce},
		{Check: CheckTrace, Action: core.ActionAbandon, Rule: core.InvNoLiveAbandon},
	} {
		require.Positive(t, seen[want], "no seed showed %s", want)
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

// A story no group, pair or window of lines can shorten — a fleet's, on
// PostgreSQL with the RunStart fence off: an earlier round's run and the
// Claim that began it only go together, and no move drops both — is
// searched through its own subsets: the fewest states that still fail
// the same way, TLC's count (Post, Claim, Plan, a Lapse, the other
// Claim, the RunStart: 7 states, against the 14 deletion stops at).
func TestShrinkTraceFewestStates(t *testing.T) {
	lines, err := tracecheck.ReadFile("testdata/stuck-start-fleet.ndjson")
	require.NoError(t, err)
	want := Failure{Check: CheckTrace, Action: core.ActionRunStart, Rule: "Fenced => HasLease(p)"}
	st, err := tracecheck.Check(lines)
	var v *tracecheck.Violation
	require.ErrorAs(t, err, &v)
	require.Equal(t, want, Failure{Check: CheckTrace, Action: v.Action, Rule: v.Rule})
	from := TraceResult{Failure: want, Lines: lines, Lapses: st.LapsesInferred}
	require.Equal(t, 14, from.States())
	requireOneMinimal(t, from, nil) // deletion alone is stuck here

	r, err := ShrinkTrace(context.Background(), lines)
	require.NoError(t, err)
	require.Equal(t, want, r.Failure)
	require.Len(t, r.Lines, 5)
	require.Equal(t, 7, r.States())
	st, err = tracecheck.Check(r.Lines)
	require.ErrorAs(t, err, &v)
	require.Equal(t, want, Failure{Check: CheckTrace, Action: v.Action, Rule: v.Rule})
	require.Equal(t, r.States(), 1+len(r.Lines)+st.LapsesInferred)
}

// fewestStates returns the cheapest failing subset that keeps the last
// item, smallest first, and keeps to its budget of candidates.
func TestFewestStates(t *testing.T) {
	ctx := context.Background()
	cur := []int{0, 1, 2, 3, 4, 5, 6, 7}
	// Fails while it keeps 7 and either {1, 4} or {2, 3, 5}; {2, 3, 5}
	// costs 4 states, {1, 4} (fewer items) costs 5 for its two lapses.
	cost := func(keep []int) (int, bool) {
		has := map[int]bool{}
		for _, i := range keep {
			has[i] = true
		}
		if !has[7] {
			return 0, false
		}
		switch {
		case has[1] && has[4]:
			return 1 + len(keep) + 2, true
		case has[2] && has[3] && has[5]:
			return len(keep), true
		}
		return 0, false
	}
	tries := 0
	got, err := fewestStates(ctx, cur, cost, &tries)
	require.NoError(t, err)
	require.Equal(t, []int{2, 3, 5, 7}, got)
	require.Positive(t, tries)

	// Nothing cheaper than cur: cur comes back.
	got, err = fewestStates(ctx, cur, func(keep []int) (int, bool) { return len(keep), len(keep) == len(cur) }, &tries)
	require.NoError(t, err)
	require.Equal(t, cur, got)

	// Too long to search: cur comes back, nothing checked.
	long := make([]int, maxExactItems+1)
	tries = 0
	got, err = fewestStates(ctx, long, cost, &tries)
	require.NoError(t, err)
	require.Equal(t, long, got)
	require.Zero(t, tries)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = fewestStates(cancelled, make([]int, maxExactItems), func([]int) (int, bool) { return 100, true }, &tries)
	require.ErrorIs(t, err, context.Canceled)
}

// A story whose rejected line fails a guard on its process's own state
// keeps the lines of that line's claim that put the process there: a
// Renew after its claim's Crash (a COMMIT that reached the server late,
// as merged before the Crash was moved after it) shrinks to Claim,
// Crash, Renew ✗, not to the Renew alone, which fails `pc[p] # "idle"`
// only because a process that never claimed is idle too.
func TestShrinkTraceKeepsTheClaimsLines(t *testing.T) {
	h1 := core.Holder("h1")
	lines := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
		{Tick: 2, Read: true, Action: core.ActionCrash, Thread: "t1", Proc: "p1", Holder: h1},
		{Tick: 3, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2},
		{Tick: 4, Action: core.ActionRenew, Thread: "t1", Proc: "p1", Holder: h1, Lease: h1},
	}
	res, err := ShrinkTrace(context.Background(), lines)
	require.NoError(t, err)
	var got []string
	for _, l := range res.Lines {
		got = append(got, string(l.Action))
	}
	require.Equal(t, []string{"Claim", "Crash", "Renew"}, got)
}

// TestStoryEndsAtTheRejectedLine: a rejected line's story is its thread's
// lines up to it, the rejected line last (catches pass 13's mutants 53:
// the rejected line left out, and 70: the thread's later lines kept).
func TestStoryEndsAtTheRejectedLine(t *testing.T) {
	ctx := context.Background()
	told, after := 0, 0
	for seed := range uint64(40) {
		e, err := Execute(ctx, sim.Config{Seed: seed, Unfenced: core.AllFences()})
		require.NoError(t, err)
		if e.Violation == nil {
			continue
		}
		f := Failure{Check: CheckTrace, Action: e.Violation.Action, Rule: e.Violation.Rule}
		story := e.Story(f)
		require.NotEmpty(t, story, "seed %d", seed)
		require.Equal(t, e.Violation.Event, story[len(story)-1], "seed %d: the story's last line", seed)
		for _, l := range story {
			require.Equal(t, e.Violation.Event.Thread, l.Thread, "seed %d: a line of another thread", seed)
		}
		told++
		for _, l := range e.Lines {
			if l.Thread == e.Violation.Event.Thread && l.Tick > e.Violation.Event.Tick {
				after++
				break
			}
		}
	}
	require.Positive(t, told, "no seed of 40 had a rejected line")
	require.Positive(t, after, "no rejected thread went on past its rejected line")
}

// TestSlugHasNoLeadingDash: a slug begins with a word even when what it
// names does not (a line with no action), and runs of other characters
// become one dash (catches pass 13's mutant 64: a leading dash kept).
func TestSlugHasNoLeadingDash(t *testing.T) {
	require.Equal(t, "line-action", Failure{Check: CheckTrace, Rule: "line.action"}.Slug())
	require.Equal(t, "RunStart-Fenced-HasLease-p", Failure{Check: CheckTrace, Action: core.ActionRunStart, Rule: "Fenced => HasLease(p)"}.Slug())
	require.Equal(t, "Liveness", Failure{Check: CheckInvariant, Invariant: " Liveness "}.Slug())
}

// TestTraceConesTakeTheConsumedPosts: a RunStart's cone and a Reply's
// each hold the Post of the message they consumed (catches pass 13's
// mutant 61: a Reply's answer's Post left out of its cone).
func TestTraceConesTakeTheConsumedPosts(t *testing.T) {
	th := []core.TraceEvent{
		{Tick: 1, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 1},
		{Tick: 2, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: "h1"},
		{Tick: 3, Action: core.ActionRunStart, Thread: "t1", Proc: "p1", Holder: "h1", Msg: 1, Run: 1},
		{Tick: 4, Action: core.ActionAsk, Thread: "t1", Proc: "p1", Holder: "h1", Run: 1, Req: 1},
		{Tick: 5, Action: core.ActionPost, Thread: "t1", Proc: "poster", Msg: 2},
		{Tick: 6, Action: core.ActionReply, Thread: "t1", Proc: "p1", Holder: "h1", Msg: 2, Req: 1},
	}
	cones := traceCones(th)
	require.Equal(t, []int{5}, cones[5][len(cones[5])-1:], "the Reply is in its own cone")
	require.Contains(t, cones[5], 4, "the Reply's cone holds the Post of its answer")
	require.Contains(t, cones[2], 0, "the RunStart's cone holds the Post of its prompt")
}

// TestLeaseNeedsTheAnsweringReply: a Reply refused as already answered
// needs the Reply that answered the request (catches pass 13's mutant 66:
// that need dropped, so that a story keeps the refusal alone).
func TestLeaseNeedsTheAnsweringReply(t *testing.T) {
	ops := []porcupine.Operation{
		{ClientId: 0, Input: tracecheck.LinInput{Kind: tracecheck.LinClaim, Thread: "t1", Holder: "h1"}, Output: tracecheck.LinOutput{Status: tracecheck.LinOK}},
		{ClientId: 0, Input: tracecheck.LinInput{Kind: tracecheck.LinReply, Thread: "t1", Holder: "h1", Msg: 2, Req: 1}, Output: tracecheck.LinOutput{Status: tracecheck.LinOK}},
		{ClientId: 1, Input: tracecheck.LinInput{Kind: tracecheck.LinReply, Thread: "t1", Holder: "h2", Msg: 3, Req: 1}, Output: tracecheck.LinOutput{Status: tracecheck.LinAnswered}},
	}
	needs := leaseNeeds(ops)
	require.Equal(t, [][]int{{0}}, needs[1], "the answering Reply needs its claim")
	require.Equal(t, [][]int{{1}}, needs[2], "the refused Reply needs the Reply that answered (h2 has no claim here)")
	require.False(t, closed([]int{2}, needs))
	require.True(t, closed([]int{0, 1, 2}, needs))
}

// TestShrinkTraceDropsUnneededTiming: a story that the checker rejects
// the same way without the Claim and Renew timing is told without it
// (catches pass 13's mutant 68: the timing kept though stripping was
// chosen).
func TestShrinkTraceDropsUnneededTiming(t *testing.T) {
	ctx := context.Background()
	seen := map[Failure]bool{}
	stripped := 0
	for seed := range uint64(60) {
		e, err := Execute(ctx, sim.Config{Seed: seed, Unfenced: core.AllFences()})
		require.NoError(t, err)
		_, err = tracecheck.Check(e.Lines)
		var v *tracecheck.Violation
		if !errors.As(err, &v) {
			continue
		}
		f := Failure{Check: CheckTrace, Action: v.Action, Rule: v.Rule}
		if seen[f] {
			continue
		}
		seen[f] = true
		r, err := ShrinkTrace(ctx, e.Lines)
		require.NoError(t, err, "seed %d %s", seed, f)
		bare := append([]core.TraceEvent{}, r.Lines...)
		for i := range bare {
			bare[i].Now, bare[i].TTL, bare[i].Expires, bare[i].Replaced = 0, 0, 0, 0
		}
		_, err = tracecheck.Check(bare)
		var bv *tracecheck.Violation
		if !errors.As(err, &bv) || bv.Action != f.Action || bv.Rule != f.Rule {
			continue // the story needs its timing
		}
		stripped++
		require.Equal(t, bare, r.Lines, "seed %d %s: the story keeps timing it does not need", seed, f)
	}
	require.Positive(t, stripped, "no story of 60 seeds could do without its timing")
}
