package shrink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// TraceResult is a rejected trace shrunk to its story.
type TraceResult struct {
	Failure Failure
	// Lines is the story: lines of the rejected thread, in their order,
	// with the ids that must stay dense (ticks, messages, runs, requests)
	// renumbered over the lines kept, and the Claim's timing dropped when
	// the failure does not need it.
	Lines []core.TraceEvent
	// From is how many lines the rejected thread had up to its rejected
	// line, before shrinking.
	From int
	// Violation is the Go trace checker's rejection of Lines: the same
	// action, the same rule.
	Violation *tracecheck.Violation
	Lapses    int // Lapses the checker inferred in Lines
	Tries     int // candidates checked
}

// States is the story's length as TLC counts a counterexample: Init, one
// state per line, one per inferred Lapse.
func (r TraceResult) States() int { return 1 + len(r.Lines) + r.Lapses }

// maxTracePairs bounds the lines whose pairs are tried, and maxGroupPairs
// the turns and posts whose pairs are: checking is cheap (microseconds a
// line), but pairs grow as the square.
const (
	maxTracePairs = 120
	maxGroupPairs = 80
)

// ShrinkTrace shrinks a trace the Go trace checker rejects (checked with
// opts, as tracecheck.Check would be: the lines in check order) to the
// shortest story of that rejection it finds: the rejected thread's lines
// up to the rejected one, dropped — whole processes, the cone of a line
// (traceCones), whole turns and steps of a process (traceGroups), chunks
// and single lines, pairs, runs of consecutive steps or lines — while the
// checker still rejects the same action at the same rule (a guard's
// conjunct, an invariant, a field). Lines kept keep their order. A trace
// the checker accepts returns ErrNotReproduced: there is no failure to
// shrink.
//
// Dropping a line leaves gaps in the ids a thread allocates densely, so a
// candidate is renumbered before it is checked. Ticks: each line keeps its
// tick's distance from the last write before it (a write follows the last
// kept write, a read sees it, a line out of order stays as far out of
// order). Messages by their kept Posts, runs by their kept RunStarts,
// requests by their kept Asks: a line that names a message, run or
// request whose creating line was dropped makes the candidate invalid,
// never a guess; the taken cursor counts the messages kept up to it. A
// Claim's replaced expiry is the one the kept lines give, and the Claim
// and Renew timing is dropped altogether when the failure survives
// without it.
func ShrinkTrace(ctx context.Context, lines []core.TraceEvent, opts ...tracecheck.Option) (TraceResult, error) {
	_, err := tracecheck.Check(lines, opts...)
	var v *tracecheck.Violation
	if !errors.As(err, &v) {
		if err != nil {
			return TraceResult{}, err
		}
		return TraceResult{}, fmt.Errorf("%w: the Go trace checker accepts the trace", ErrNotReproduced)
	}
	want := Failure{Check: CheckTrace, Action: v.Action, Rule: v.Rule}
	var th []core.TraceEvent
	for i := range lines[:v.Line] {
		if lines[i].Thread == v.Event.Thread {
			th = append(th, lines[i])
		}
	}
	var r renumbering
	r.index(th)
	kept := ownLines(th, v)
	same := func(keep []int) (*tracecheck.Violation, tracecheck.Stats, bool) {
		if !holdsAll(keep, kept) {
			return nil, tracecheck.Stats{}, false
		}
		cand, ok := r.apply(th, keep)
		if !ok {
			return nil, tracecheck.Stats{}, false
		}
		st, err := tracecheck.Check(cand, opts...)
		var cv *tracecheck.Violation
		if !errors.As(err, &cv) || cv.Action != want.Action || cv.Rule != want.Rule {
			return nil, st, false
		}
		return cv, st, true
	}
	m := &minimizer{ctx: ctx, fails: func(keep []int) (bool, error) {
		_, _, ok := same(keep)
		return ok, nil
	}}
	cur := make([]int, len(th))
	for i := range cur {
		cur[i] = i
	}
	if _, _, ok := same(cur); !ok {
		// The thread alone, renumbered as it is, fails as the whole trace
		// did: it has the same lines and the same ticks.
		return TraceResult{}, fmt.Errorf("%w: the rejected thread alone is not rejected the same way (%s)", ErrNotReproduced, want)
	}
	r.strip = true
	if _, _, ok := same(cur); !ok {
		r.strip = false
	}
	procs, turns, steps := traceGroups(th)
	cones := traceCones(th)
	for changed := true; changed && m.err == nil; {
		changed = m.groups(&cur, procs)
		changed = m.groups(&cur, cones) || changed
		changed = m.groups(&cur, turns) || changed
		changed = m.groups(&cur, steps) || changed
		changed = m.ddmin(&cur) || changed
		changed = m.pairs(&cur, maxTracePairs) || changed
		changed = m.groupPairs(&cur, steps, maxGroupPairs) || changed
		changed = m.windows(&cur, steps, maxGroupPairs) || changed
		changed = m.windows(&cur, singles(cur), maxTracePairs) || changed
	}
	if m.err != nil {
		return TraceResult{}, m.err
	}
	// Deletion stops where no group or pair it tries can go: a story can
	// still hide a shorter one that drops lines no single move drops
	// together (the cone of a run and the Claim of the turn that started
	// it). Search the story's own subsets for the fewest states.
	statesOf := func(keep []int) (int, bool) {
		_, st, ok := same(keep)
		return 1 + len(keep) + st.LapsesInferred, ok
	}
	cur, err = fewestStates(ctx, cur, statesOf, &m.tries)
	if err != nil {
		return TraceResult{}, err
	}
	story, _ := r.apply(th, cur)
	cv, st, ok := same(cur)
	if !ok {
		return TraceResult{}, fmt.Errorf("shrink: the shrunk trace no longer fails with %s", want) // cannot happen: cur was accepted
	}
	return TraceResult{Failure: want, Lines: story, From: len(th), Violation: cv, Lapses: st.LapsesInferred, Tries: m.tries}, nil
}

// ownLines returns the lines of th (the rejected thread up to the
// rejected line, its last) that a story must keep: when the failed guard
// is on the process's own state (pc[p]), the earlier lines of the
// rejected line's claim (its holder), which are what put the process in
// that state. Without them a story can shrink to the rejected line
// alone, failing the same guard for another reason (a process that never
// claimed is idle too) and explaining nothing: a late Renew after its
// claim's Crash was shrunk to `Renew ✗ pc[p] # "idle"`.
func ownLines(th []core.TraceEvent, v *tracecheck.Violation) []int {
	last := len(th) - 1
	if last < 0 || !strings.Contains(v.Rule, "pc[p]") || th[last].Holder == "" {
		return nil
	}
	var out []int
	for i, ev := range th[:last] {
		if ev.Holder == th[last].Holder && ev.Proc == th[last].Proc {
			out = append(out, i)
		}
	}
	return out
}

// holdsAll reports whether keep holds every index of want.
func holdsAll(keep, want []int) bool {
	for _, w := range want {
		if !slices.Contains(keep, w) {
			return false
		}
	}
	return true
}

// traceCones returns, for each line, its cone: the line, the lines that
// name an id it created (a message its Post did, a run its RunStart did,
// a request its Ask did), theirs in turn, and the Posts of the messages
// the cone consumed. A link of a chain — a run that asked the question
// the next turn answers — goes only with everything after it that
// follows from it.
func traceCones(th []core.TraceEvent) [][]int {
	post, start, ask := map[core.Seq]int{}, map[core.RunID]int{}, map[core.RequestID]int{}
	for i, ev := range th {
		switch ev.Action {
		case core.ActionPost:
			post[ev.Msg] = i
		case core.ActionRunStart:
			start[ev.Run] = i
		case core.ActionAsk:
			ask[ev.Req] = i
		}
	}
	dependents := make([][]int, len(th))
	link := func(creator int, ok bool, i int) {
		if ok && creator != i {
			dependents[creator] = append(dependents[creator], i)
		}
	}
	for i, ev := range th {
		if ev.Msg != 0 {
			c, ok := post[ev.Msg]
			link(c, ok, i)
		}
		if ev.Run != 0 {
			c, ok := start[ev.Run]
			link(c, ok, i)
		}
		if ev.Req != 0 {
			c, ok := ask[ev.Req]
			link(c, ok, i)
		}
	}
	cones := make([][]int, len(th))
	for i := range th {
		in := map[int]bool{i: true}
		work := []int{i}
		for len(work) > 0 {
			x := work[len(work)-1]
			work = work[:len(work)-1]
			next := dependents[x]
			if a := th[x].Action; (a == core.ActionRunStart || a == core.ActionReply) && th[x].Msg != 0 {
				if c, ok := post[th[x].Msg]; ok {
					next = append(slices.Clone(next), c)
				}
			}
			for _, y := range next {
				if !in[y] {
					in[y] = true
					work = append(work, y)
				}
			}
		}
		for x := range in {
			cones[i] = append(cones[i], x)
		}
		slices.Sort(cones[i])
	}
	return cones
}

// singles makes each line a group of its own.
func singles(cur []int) [][]int {
	out := make([][]int, len(cur))
	for k, i := range cur {
		out[k] = []int{i}
	}
	return out
}

// traceGroups returns the lines of each process; each turn of a
// process (its lines from a Claim up to its next Claim); and each step
// (its lines up to one that leaves the process idle or claimed again:
// a Claim, RunEnd, Reply, Abandon, a refusal, Release or Crash; a Renew
// alone). A turn and a step come with the Posts of the messages they
// consumed.
func traceGroups(th []core.TraceEvent) (procs, turns, steps [][]int) {
	byProc := map[string]int{}
	postOf := map[core.Seq]int{}
	turnOf := map[string]int{} // the turn a process is in
	stepOf := map[string]int{} // the step it is in, -1 after one ended
	for i, ev := range th {
		if ev.Action == core.ActionPost {
			postOf[ev.Msg] = i
			continue
		}
		if ev.Proc == "" {
			continue
		}
		p, ok := byProc[ev.Proc]
		if !ok {
			p = len(procs)
			byProc[ev.Proc] = p
			procs = append(procs, nil)
			stepOf[ev.Proc] = -1
		}
		procs[p] = append(procs[p], i)
		t, ok := turnOf[ev.Proc]
		if !ok || ev.Action == core.ActionClaim {
			t = len(turns)
			turnOf[ev.Proc] = t
			turns = append(turns, nil)
		}
		s := stepOf[ev.Proc]
		if s < 0 || ev.Action == core.ActionRenew {
			s = len(steps)
			stepOf[ev.Proc] = s
			steps = append(steps, nil)
		}
		turns[t] = append(turns[t], i)
		steps[s] = append(steps[s], i)
		if (ev.Action == core.ActionRunStart || ev.Action == core.ActionReply) && ev.Msg != 0 {
			if j, ok := postOf[ev.Msg]; ok {
				turns[t] = append(turns[t], j)
				steps[s] = append(steps[s], j)
			}
		}
		switch ev.Action {
		case core.ActionClaim, core.ActionRunEnd, core.ActionReply, core.ActionAbandon, core.ActionAbandonFenced,
			core.ActionStartFenced, core.ActionReplyFenced, core.ActionEndRefused, core.ActionRelease, core.ActionCrash, core.ActionRenew:
			stepOf[ev.Proc] = -1
		}
	}
	return procs, turns, steps
}

// renumbering makes a candidate (some of a thread's lines, in order) a
// trace whose densely allocated ids follow on from each other again.
type renumbering struct {
	strip bool // drop the Claim and Renew timing

	// step is each line's tick less the version before it (the last
	// write's tick): 1 for a write and 0 for a read in order, anything
	// else where the order rule fails. A kept line keeps its step.
	step []int64

	// The ids the thread's lines create: messages by Post, runs by
	// RunStart, requests by Ask.
	posted, started, asked []uint64
}

func (r *renumbering) index(th []core.TraceEvent) {
	var version uint64
	r.step = make([]int64, len(th))
	for i, ev := range th {
		r.step[i] = int64(ev.Tick) - int64(version)
		if !ev.Read {
			version = ev.Tick
		}
		// An id is created once: a line that creates it again (replayed)
		// is named by it, as any other line naming it is.
		switch ev.Action {
		case core.ActionPost:
			r.posted = appendNew(r.posted, uint64(ev.Msg))
		case core.ActionRunStart:
			r.started = appendNew(r.started, uint64(ev.Run))
		case core.ActionAsk:
			r.asked = appendNew(r.asked, uint64(ev.Req))
		}
	}
}

func appendNew(ids []uint64, id uint64) []uint64 {
	if slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}

// idMap maps one kind of id: the ids created by lines kept get 1, 2, ...
// in their order; one created by a line dropped has no new id; one never
// created moves down by the created ids dropped below it (a line that
// names an id that does not exist still does).
type idMap struct {
	to      map[uint64]uint64
	dropped []uint64 // sorted
}

func newIDMap(created []uint64, kept map[uint64]bool) idMap {
	m := idMap{to: map[uint64]uint64{}}
	n := uint64(0)
	for _, id := range created {
		if kept[id] {
			n++
			m.to[id] = n
		} else {
			m.dropped = append(m.dropped, id)
		}
	}
	slices.Sort(m.dropped)
	return m
}

func (m idMap) get(id uint64) (uint64, bool) {
	if id == 0 {
		return 0, true
	}
	if n, ok := m.to[id]; ok {
		return n, true
	}
	below, found := slices.BinarySearch(m.dropped, id)
	if found {
		return 0, false
	}
	return id - uint64(below), true
}

// rank maps a cursor over the ids (the taken cursor over messages): the
// ids kept up to it.
func (m idMap) rank(id uint64) uint64 {
	below, found := slices.BinarySearch(m.dropped, id)
	if found {
		below++
	}
	return id - uint64(below)
}

// apply returns the lines of th at keep, renumbered; false when a kept
// line names an id whose creating line was dropped.
func (r *renumbering) apply(th []core.TraceEvent, keep []int) ([]core.TraceEvent, bool) {
	kept := func(a core.Action, id func(core.TraceEvent) uint64) map[uint64]bool {
		out := map[uint64]bool{}
		for _, i := range keep {
			if th[i].Action == a {
				out[id(th[i])] = true
			}
		}
		return out
	}
	msgs := newIDMap(r.posted, kept(core.ActionPost, func(e core.TraceEvent) uint64 { return uint64(e.Msg) }))
	runs := newIDMap(r.started, kept(core.ActionRunStart, func(e core.TraceEvent) uint64 { return uint64(e.Run) }))
	reqs := newIDMap(r.asked, kept(core.ActionAsk, func(e core.TraceEvent) uint64 { return uint64(e.Req) }))
	out := make([]core.TraceEvent, 0, len(keep))
	var version uint64
	held, expires := false, int64(0) // the lease as the kept lines leave it
	for _, i := range keep {
		ev := th[i]
		msg, ok1 := msgs.get(uint64(ev.Msg))
		taken, ok2 := msgs.rank(uint64(ev.Taken)), true
		run, ok3 := runs.get(uint64(ev.Run))
		req, ok4 := reqs.get(uint64(ev.Req))
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, false
		}
		ev.Msg, ev.Taken, ev.Run, ev.Req = core.Seq(msg), core.Seq(taken), core.RunID(run), core.RequestID(req)
		ev.Tick = uint64(max(int64(version)+r.step[i], 0))
		if !ev.Read {
			version = ev.Tick
		}
		if r.strip {
			ev.Now, ev.TTL, ev.Expires, ev.Replaced = 0, 0, 0, 0
		}
		switch {
		case ev.Action == core.ActionClaim && !ev.Read:
			if ev.Now != 0 {
				switch {
				case !held:
					ev.Replaced = 0
				case expires != 0:
					ev.Replaced = expires
				}
			}
			held, expires = true, ev.Expires
		case ev.Action == core.ActionRenew:
			expires = ev.Expires
		case ev.Action == core.ActionRelease && !ev.Read:
			held, expires = false, 0
		}
		out = append(out, ev)
	}
	return out, true
}
