package shrink

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// handMadeHistory is a history of two threads whose only conflict is two
// Claims of thread t1 that both succeed, the second (h2, at now 200)
// while the first's lease (h1, until 1100) is live, after the first
// returned: ops 1 and 4. Every other operation is legal alone and with
// any others (reads of the cursor before any consume, a later Claim once
// both leases expired, Releases, a whole other thread that is fine), so
// the minimal non-linearizable sub-history is exactly {1, 4}.
func handMadeHistory() []porcupine.Operation {
	op := func(client int, in tracecheck.LinInput, out tracecheck.LinOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	ok := tracecheck.LinOutput{Status: tracecheck.LinOK}
	t1, t2 := core.ThreadID("t1"), core.ThreadID("t2")
	return []porcupine.Operation{
		op(2, tracecheck.LinInput{Kind: tracecheck.LinTaken, Thread: t1}, tracecheck.LinOutput{}, 0, 5),
		op(0, tracecheck.LinInput{Kind: tracecheck.LinClaim, Thread: t1, Holder: "h1", Now: 100, TTL: 1000}, ok, 10, 20),
		op(3, tracecheck.LinInput{Kind: tracecheck.LinRelease, Thread: t1, Holder: "h9"}, ok, 12, 18),
		op(4, tracecheck.LinInput{Kind: tracecheck.LinClaim, Thread: t2, Holder: "k1", Now: 1, TTL: 10}, ok, 13, 19),
		op(1, tracecheck.LinInput{Kind: tracecheck.LinClaim, Thread: t1, Holder: "h2", Now: 200, TTL: 1000}, ok, 30, 40),
		op(4, tracecheck.LinInput{Kind: tracecheck.LinRunStart, Thread: t2, Holder: "k1", Msg: 1}, tracecheck.LinOutput{Status: tracecheck.LinOK, Run: 1}, 31, 39),
		op(2, tracecheck.LinInput{Kind: tracecheck.LinClaim, Thread: t1, Holder: "h3", Now: 5000, TTL: 1000}, ok, 50, 60),
		op(4, tracecheck.LinInput{Kind: tracecheck.LinTaken, Thread: t2}, tracecheck.LinOutput{Taken: 1}, 52, 58),
		op(2, tracecheck.LinInput{Kind: tracecheck.LinRelease, Thread: t1, Holder: "h3"}, ok, 62, 70),
		op(4, tracecheck.LinInput{Kind: tracecheck.LinRelease, Thread: t2, Holder: "k1"}, ok, 63, 69),
	}
}

func TestShrinkHistoryToItsCore(t *testing.T) {
	ctx := context.Background()
	h := handMadeHistory()
	model := tracecheck.LeaseModel()
	res, err := ShrinkHistory(ctx, model, h, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []int{1, 4}, res.Kept)
	require.Equal(t, 4, res.Culprit)
	require.Equal(t, []porcupine.Operation{h[1], h[4]}, res.Ops)
	// Checked again, the core is not linearizable; without either of its
	// operations it is.
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(model, res.Ops, 0))
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(model, res.Ops[:1], 0))
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(model, res.Ops[1:], 0))
	t.Logf("%d operations shrunk to %d in %d tries", len(h), len(res.Ops), res.Tries)

	var b bytes.Buffer
	WriteHistoryStory(&b, model, res.Ops)
	require.Contains(t, b.String(), "call 0s ")
	require.Contains(t, b.String(), "return 30ns ")
	require.Contains(t, b.String(), "Claim(h2, now=200")
}

// A linearizable history is not shrunk, and one porcupine cannot decide
// is inconclusive, not shrunk.
func TestShrinkHistoryNeedsAFailure(t *testing.T) {
	ctx := context.Background()
	h := handMadeHistory()
	model := tracecheck.LeaseModel()
	fine := slices.Delete(slices.Clone(h), 4, 5)
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(model, fine, 0))
	_, err := ShrinkHistory(ctx, model, fine, time.Minute)
	require.ErrorIs(t, err, ErrNotReproduced)

	slow := model
	slow.Step = func(state, input, output any) (bool, any) {
		time.Sleep(20 * time.Millisecond)
		return model.Step(state, input, output)
	}
	_, err = ShrinkHistory(ctx, slow, h, time.Millisecond)
	require.ErrorIs(t, err, ErrInconclusive)
}

// A candidate porcupine cannot decide in time counts as not the same
// failure: here every candidate without operation 2 (a Release of
// another holder's, concurrent with the first Claim) times out, so the
// result keeps it beside the core.
func TestShrinkHistoryUnknownIsNotTheFailure(t *testing.T) {
	ctx := context.Background()
	h := handMadeHistory()
	model := tracecheck.LeaseModel()
	res, err := shrinkHistory(ctx, model, h, func(cand []porcupine.Operation) porcupine.CheckResult {
		if !slices.ContainsFunc(cand, func(o porcupine.Operation) bool { return o.Input == h[2].Input }) {
			return porcupine.Unknown
		}
		return porcupine.CheckOperationsTimeout(model, cand, 0)
	}, 0)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 4}, res.Kept)
	require.Equal(t, 4, res.Culprit)
	require.Positive(t, res.Unknown)
}

// Dropping operations must not make a failure the history never had: a
// Renew without its holder's Claim is not linearizable alone, but the
// history fails at the second Claim, and its story keeps both Claims.
func TestShrinkHistoryKeepsTheCulprit(t *testing.T) {
	ctx := context.Background()
	ok := tracecheck.LinOutput{Status: tracecheck.LinOK}
	h := []porcupine.Operation{
		{ClientId: 0, Input: tracecheck.LinInput{Kind: tracecheck.LinClaim, Thread: "t1", Holder: "h1", Now: 100, TTL: 1000}, Output: ok, Call: 10, Return: 20},
		{ClientId: 0, Input: tracecheck.LinInput{Kind: tracecheck.LinRenew, Thread: "t1", Holder: "h1", Now: 150, TTL: 1000}, Output: ok, Call: 22, Return: 28},
		{ClientId: 1, Input: tracecheck.LinInput{Kind: tracecheck.LinClaim, Thread: "t1", Holder: "h2", Now: 200, TTL: 1000}, Output: ok, Call: 30, Return: 40},
	}
	model := tracecheck.LeaseModel()
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(model, h[1:2], 0), "a lone Renew is not linearizable")
	res, err := ShrinkHistory(ctx, model, h, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 2, res.Culprit)
	require.Equal(t, []int{0, 2}, res.Kept)
}

// Fences-off concurrent executions (real goroutines, real time, timed
// Claims and Renews): a rejected trace shrinks to a story within TLC's
// bound for its guard, rejected again the same way; a history porcupine
// finds not linearizable shrinks to a few operations that fail the same
// way: not linearizable, and linearizable without the culprit.
//
// Whether a fence-off write lands on a lapsed lease is the scheduler's
// doing, so the test runs seeds until it has two of each or its own
// deadline passes. Six processes whose clocks are up to four TTLs apart
// make it likely: 14 of 20 seeds under -race on a 2-core machine (3 of 40
// with three processes and two TTLs, which once found none in 12).
//
// Shrinking keeps a story 1-minimal, not the shortest there is, so one
// seed's story may be longer than TLC's bound (10 states against 8 for an
// Abandon, seen once): as in TestShrinkTraceUnfenced, the best story of
// each failure must be within it, and the test runs more seeds while one
// is not.
func TestShrinkConcurrentExecutions(t *testing.T) {
	ctx := context.Background()
	model := tracecheck.LeaseModel()
	histories, traces := 0, 0
	best := map[Failure]int{}
	overBound := func() []Failure {
		var over []Failure
		for f, n := range best {
			if bound, ok := tlcShortestGuard[f]; ok && n > bound {
				over = append(over, f)
			}
		}
		return over
	}
	const ttl = 40 * time.Millisecond
	deadline := time.Now().Add(90 * time.Second)
	seed := uint64(0)
	for ; time.Now().Before(deadline) && (histories < 2 || traces < 2 || len(overBound()) > 0); seed++ {
		res, err := sim.RunConcurrent(ctx, sim.ConcurrentConfig{Seed: seed, Procs: 6, Threads: 2, Messages: 8, ClaimTTL: ttl, MaxSkew: 4 * ttl, Unfenced: core.AllFences()})
		if err != nil && !errors.As(err, new(*sim.InvariantError)) {
			require.NoError(t, err)
		}
		tracecheck.Sort(res.Lines)
		if _, err := tracecheck.Check(res.Lines); err != nil {
			traces++
			tr, err := ShrinkTrace(ctx, res.Lines)
			require.NoError(t, err)
			t.Logf("seed %d: %s: %d lines -> %d, %d states", seed, tr.Failure, tr.From, len(tr.Lines), tr.States())
			_, err = tracecheck.Check(tr.Lines)
			var v *tracecheck.Violation
			require.ErrorAs(t, err, &v)
			require.Equal(t, tr.Failure, Failure{Check: CheckTrace, Action: v.Action, Rule: v.Rule})
			if n, ok := best[tr.Failure]; !ok || tr.States() < n {
				best[tr.Failure] = tr.States()
			}
			requireOneMinimal(t, tr, nil)
		}
		if _, err := tracecheck.CheckLinearizable(tracecheck.OperationsFromTrace(res.Lines), time.Minute, ""); !errors.Is(err, tracecheck.ErrNotLinearizable) {
			continue
		}
		histories++
		r, err := ShrinkLinearizability(ctx, res.Lines, time.Minute)
		require.NoError(t, err)
		t.Logf("seed %d: %d operations shrunk to %d", seed, r.From, len(r.Ops))
		require.LessOrEqual(t, len(r.Ops), 6)
		require.Len(t, r.Lines, len(r.Ops))

		// Again from the story's own lines: not linearizable.
		again := tracecheck.OperationsFromTrace(r.Lines)
		require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(model, again, 0))
		require.Equal(t, withoutClients(r.Ops), withoutClients(again)) // clients are numbered by appearance
		// A story a history could have been: every holder that wrote
		// claimed first (a RunStart without its Claim fails alone, a
		// failure no history had).
		for _, op := range r.Ops {
			in, out := op.Input.(tracecheck.LinInput), op.Output.(tracecheck.LinOutput)
			if in.Kind == tracecheck.LinClaim || in.Kind == tracecheck.LinTaken || in.Kind == tracecheck.LinRelease || out.Status != tracecheck.LinOK {
				continue
			}
			require.True(t, slices.ContainsFunc(r.Ops, func(o porcupine.Operation) bool {
				ci := o.Input.(tracecheck.LinInput)
				return ci.Kind == tracecheck.LinClaim && ci.Holder == in.Holder
			}), "%s by %s has no Claim in the story", in.Kind, in.Holder)
		}
		c := slices.Index(r.Kept, r.Culprit)
		require.GreaterOrEqual(t, c, 0, "the story holds the culprit")
		require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(model, slices.Delete(slices.Clone(r.Ops), c, c+1), 0))
	}
	require.Positive(t, histories, "no fences-off concurrent execution was found not linearizable in %d seeds (90s)", seed)
	require.Positive(t, traces, "no fences-off concurrent execution's trace was rejected in %d seeds (90s)", seed)
	for _, f := range overBound() {
		require.LessOrEqual(t, best[f], tlcShortestGuard[f], "%s: the shortest story of %d seeds (90s) is longer than TLC's shortest counterexample", f, seed)
	}
}

func withoutClients(ops []porcupine.Operation) []porcupine.Operation {
	out := slices.Clone(ops)
	for i := range out {
		out[i].ClientId = 0
	}
	return out
}
