package shrink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// HistoryResult is a history porcupine finds not linearizable, shrunk.
type HistoryResult struct {
	// Ops is a minimal sub-history that fails as the history did, in
	// the input's order (renumbered, WithRenumber): no operation of it
	// can go while it still does.
	Ops []porcupine.Operation
	// Kept are the indices of Ops in the history given.
	Kept []int
	// Culprit is the index, in the history given, of the operation the
	// failure is at: the first, by return, whose return leaves the
	// operations returned so far not linearizable. Ops holds it.
	Culprit int
	// Tries counts the candidates checked; Unknown how many porcupine
	// checks could not decide in time (each counted as not the same
	// failure: shrinking keeps only what it has seen fail).
	Tries, Unknown int
}

// ErrInconclusive: porcupine could not decide the history given, or
// where its failure begins, within the timeout; nothing to shrink yet.
var ErrInconclusive = errors.New("porcupine timed out on the history")

// maxHistoryPairs bounds the operations whose pairs are tried.
const maxHistoryPairs = 60

// ShrinkHistory shrinks a history porcupine finds not linearizable under
// model to a minimal sub-history that fails the same way.
//
// The same way is, as for a trace the checker rejects, at the same
// operation: the culprit, the first operation (by return) whose return
// leaves the operations returned by then not linearizable. A candidate
// fails the same way when it holds the culprit, is not linearizable, and
// is linearizable without the culprit. Dropping operations alone would
// not do: a Renew without its holder's Claim is not linearizable by
// itself, a failure the history never had.
//
// It takes the first partition of the model (a thread's operations) that
// fails alone, cuts it after the culprit, then drops whole clients'
// operations, chunks and single operations (ddmin), and pairs. Each
// porcupine check runs within timeout (0: none); one that cannot decide
// in time counts as not the same failure. A history porcupine finds
// linearizable returns ErrNotReproduced, one it cannot decide
// ErrInconclusive.
//
// A model whose operations depend on others (a holder's operations on
// its Claim) or carry ids allocated densely (run ids) gives WithNeeds and
// WithRenumber, so that a candidate is what a history could have been:
// LeaseShrinking gives them for tracecheck.LeaseModel.
func ShrinkHistory(ctx context.Context, model porcupine.Model, ops []porcupine.Operation, timeout time.Duration, opts ...HistoryOption) (HistoryResult, error) {
	return shrinkHistory(ctx, model, ops, func(cand []porcupine.Operation) porcupine.CheckResult {
		return porcupine.CheckOperationsTimeout(model, cand, timeout)
	}, timeout, opts...)
}

// HistoryOption configures ShrinkHistory.
type HistoryOption func(*historyOptions)

type historyOptions struct {
	needs    func([]porcupine.Operation) [][][]int
	renumber func([]porcupine.Operation) []porcupine.Operation
}

// WithNeeds gives what each operation needs beside it: for operation i,
// needs(ops)[i] lists groups of indices, and a candidate that keeps i
// keeps at least one operation of each of its groups (a Renew keeps its
// holder's Claim; a read of the cursor one write of the value it read).
// A candidate that does not is not tried.
func WithNeeds(needs func(ops []porcupine.Operation) [][][]int) HistoryOption {
	return func(o *historyOptions) { o.needs = needs }
}

// WithRenumber gives a candidate's normalisation before it is checked:
// ids allocated densely (run ids) renumbered over the operations kept.
// It returns a new slice.
func WithRenumber(renumber func(cand []porcupine.Operation) []porcupine.Operation) HistoryOption {
	return func(o *historyOptions) { o.renumber = renumber }
}

// shrinkHistory is ShrinkHistory with porcupine's check given, so that a
// test can make chosen candidates time out.
func shrinkHistory(ctx context.Context, model porcupine.Model, ops []porcupine.Operation, porc func([]porcupine.Operation) porcupine.CheckResult, timeout time.Duration, opts ...HistoryOption) (HistoryResult, error) {
	var o historyOptions
	for _, opt := range opts {
		opt(&o)
	}
	var needs [][][]int
	if o.needs != nil {
		needs = o.needs(ops)
	}
	res := HistoryResult{}
	check := func(keep []int) porcupine.CheckResult {
		cand := make([]porcupine.Operation, len(keep))
		for k, i := range keep {
			cand[k] = ops[i]
		}
		if o.renumber != nil {
			cand = o.renumber(cand)
		}
		r := porc(cand)
		if r == porcupine.Unknown {
			res.Unknown++
		}
		return r
	}
	// The first partition (a thread's operations) that fails alone: the
	// history is linearizable exactly when each partition is, and each is
	// checked once, not the whole history again.
	var cur []int
	parts := [][]int{make([]int, len(ops))}
	for i := range parts[0] {
		parts[0][i] = i
	}
	if model.Partition != nil {
		parts = partitions(model, ops)
	}
	unknown := false
	for _, part := range parts {
		switch check(part) {
		case porcupine.Illegal:
			cur = part
		case porcupine.Unknown:
			unknown = true
		}
		if cur != nil {
			break
		}
	}
	switch {
	case cur == nil && unknown:
		return res, fmt.Errorf("%w (%d operations, timeout %v)", ErrInconclusive, len(ops), timeout)
	case cur == nil:
		return res, fmt.Errorf("%w: porcupine finds the history linearizable", ErrNotReproduced)
	}
	// By return: the culprit is the first whose prefix fails.
	slices.SortStableFunc(cur, func(a, b int) int { return cmp.Compare(ops[a].Return, ops[b].Return) })
	// Binary search, then a scan from the start when failing is not
	// monotone in the prefix there.
	k := sort.Search(len(cur), func(k int) bool { return check(cur[:k+1]) == porcupine.Illegal })
	before := porcupine.Ok
	if k > 0 && k < len(cur) {
		before = check(cur[:k])
	}
	if before == porcupine.Illegal {
		k = 0
		for k < len(cur) && check(cur[:k+1]) != porcupine.Illegal {
			k++
		}
		before = porcupine.Ok
		if k > 0 && k < len(cur) {
			before = check(cur[:k])
		}
	}
	if k == len(cur) || before != porcupine.Ok {
		return res, fmt.Errorf("%w: where the failure begins is not decided (%d operations, timeout %v)", ErrInconclusive, len(cur), timeout)
	}
	culprit := cur[k]
	cur = slices.Clone(cur[:k+1])
	slices.Sort(cur)
	res.Culprit = culprit
	m := &minimizer{ctx: ctx, fails: func(keep []int) (bool, error) {
		if !slices.Contains(keep, culprit) || !closed(keep, needs) || check(keep) != porcupine.Illegal {
			return false, nil
		}
		return check(without(keep, []int{culprit})) == porcupine.Ok, nil
	}}
	clients := map[int][]int{}
	var ids []int
	for _, i := range cur {
		c := ops[i].ClientId
		if _, ok := clients[c]; !ok {
			ids = append(ids, c)
		}
		clients[c] = append(clients[c], i)
	}
	groups := make([][]int, len(ids))
	for k, c := range ids {
		groups[k] = clients[c]
	}
	for changed := true; changed && m.err == nil; {
		changed = m.groups(&cur, groups)
		changed = m.ddmin(&cur) || changed
		changed = m.pairs(&cur, maxHistoryPairs) || changed
	}
	if m.err != nil {
		return res, m.err
	}
	res.Tries = m.tries
	res.Kept = cur
	for _, i := range cur {
		res.Ops = append(res.Ops, ops[i])
	}
	if o.renumber != nil {
		res.Ops = o.renumber(res.Ops)
	}
	return res, nil
}

// closed reports whether keep holds, for each operation it keeps, one
// operation of each group it needs.
func closed(keep []int, needs [][][]int) bool {
	if needs == nil {
		return true
	}
	in := map[int]bool{}
	for _, i := range keep {
		in[i] = true
	}
	for _, i := range keep {
		for _, group := range needs[i] {
			if !slices.ContainsFunc(group, func(j int) bool { return in[j] }) {
				return false
			}
		}
	}
	return true
}

// partitions returns the model's partitions of ops as indices into ops.
// An operation is found again by its index, carried in Metadata while
// the model partitions (porcupine's partitions never read it).
func partitions(model porcupine.Model, ops []porcupine.Operation) [][]int {
	tagged := slices.Clone(ops)
	for i := range tagged {
		tagged[i].Metadata = i
	}
	var out [][]int
	for _, part := range model.Partition(tagged) {
		idx := make([]int, len(part))
		for k, op := range part {
			idx[k] = op.Metadata.(int)
		}
		slices.Sort(idx)
		out = append(out, idx)
	}
	return out
}

// LinearizabilityLines returns the trace lines porcupine's lease model
// checks (tracecheck.OperationsFromTrace) and their operations, one for
// one: what ShrinkHistory keeps maps back to lines, which a history file
// holds (tracecheck.NewHistoryWriter).
func LinearizabilityLines(lines []core.TraceEvent) ([]core.TraceEvent, []porcupine.Operation) {
	var kept []core.TraceEvent
	for _, l := range lines {
		if len(tracecheck.OperationsFromTrace([]core.TraceEvent{l})) == 1 {
			kept = append(kept, l)
		}
	}
	return kept, tracecheck.OperationsFromTrace(kept)
}

// WriteHistoryStory writes ops as a story: one operation a line in
// real-time order (by call, then return), with the client, the call and
// return times from the first known call, and the operation as the model
// describes it. A time not known (0 for a call, math.MaxInt64 for a
// return: a write whose outcome its process never learned) shows as ?.
func WriteHistoryStory(w io.Writer, model porcupine.Model, ops []porcupine.Operation) {
	sorted := slices.Clone(ops)
	slices.SortStableFunc(sorted, func(a, b porcupine.Operation) int {
		if a.Call != b.Call {
			return cmp.Compare(a.Call, b.Call)
		}
		return cmp.Compare(a.Return, b.Return)
	})
	origin := int64(math.MaxInt64)
	for _, op := range sorted {
		if op.Call > 0 {
			origin = min(origin, op.Call)
		}
	}
	at := func(t int64) string {
		if t <= 0 || t == math.MaxInt64 || origin == math.MaxInt64 {
			return "?"
		}
		return time.Duration(t - origin).String()
	}
	for _, op := range sorted {
		what := fmt.Sprintf("%v -> %v", op.Input, op.Output)
		if model.DescribeOperation != nil {
			what = model.DescribeOperation(op.Input, op.Output)
		}
		fmt.Fprintf(w, "  client %-3d call %-12s return %-12s %s\n", op.ClientId, at(op.Call), at(op.Return), what)
	}
}
