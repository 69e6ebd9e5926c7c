package core

import (
	"maps"
	"slices"
)

// ForkForTesting returns a Workspace over s, stamping leases with clock and
// tracing to tracer, that goes on from where w is: the same process name,
// options and remembered holders, and a copy of every round w keeps, in
// the same phase. The claim function maps a claim w made to the same
// claim on the fork, whose calls then follow the copied round. The two
// share nothing afterwards.
//
// It exists for simulations that fork an execution at a point they go on
// from in several ways (a state of the specification with several
// successors), s and clock being copies of the execution's storage and
// clock. No call of w may be in flight, and none of its rounds may have a
// Crash in progress.
func (w *Workspace) ForkForTesting(s Storage, clock Clock, tracer Tracer) (fork *Workspace, claim func(Claim) Claim) {
	w.mu.Lock()
	f := &forked{from: w, to: &Workspace{
		storage: s, clock: clock, proc: w.proc, tracer: tracer,
		fences: w.fences, mutants: w.mutants, doubts: w.doubts,
		rounds: make(map[ThreadID]*round, len(w.rounds)),
		used:   maps.Clone(w.used),
		usedQ:  slices.Clone(w.usedQ),
	}}
	var open [4]*round
	rounds := open[:0]
	for _, r := range w.rounds {
		rounds = append(rounds, r)
	}
	w.mu.Unlock()
	for _, r := range rounds {
		f.to.rounds[r.thread] = f.round(r)
	}
	return f.to, f.claim
}

// forked maps the rounds of a workspace to those of its fork.
type forked struct {
	from, to *Workspace
	// orig[k]'s copy is copies[k]: a process has a round or two.
	orig, copies []*round
}

func (f *forked) claim(c Claim) Claim {
	c.r = f.round(c.r)
	return c
}

// round returns r's copy, made the first time it is asked for; r itself
// when it is not a round of the workspace forked.
func (f *forked) round(r *round) *round {
	if r == nil || r.ws != f.from {
		return r
	}
	if k := slices.Index(f.orig, r); k >= 0 {
		return f.copies[k]
	}
	r.mu.Lock()
	c := &round{
		ws: f.to, thread: r.thread, holder: r.holder,
		phase: r.phase, plan: r.plan, run: r.run, steer: r.steer,
		doubt: r.doubt, claimDoubt: r.claimDoubt, doubtReleased: r.doubtReleased,
		crashing: r.crashing, crashFailed: r.crashFailed,
		tick: r.tick, taken: r.taken, asked: r.asked,
	}
	if r.doubtLine != nil {
		l := *r.doubtLine
		c.doubtLine = &l
	}
	if r.doubtPlan != nil {
		l := *r.doubtPlan
		c.doubtPlan = &l
	}
	r.mu.Unlock()
	f.orig, f.copies = append(f.orig, r), append(f.copies, c)
	return c
}
