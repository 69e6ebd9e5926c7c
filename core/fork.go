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
	f := &Workspace{
		storage: s, clock: clock, proc: w.proc, tracer: tracer,
		fences: w.fences, mutants: w.mutants, noRounds: w.noRounds, doubts: w.doubts,
		rounds: make(map[ThreadID]*round, len(w.rounds)),
		used:   maps.Clone(w.used),
		usedQ:  slices.Clone(w.usedQ),
	}
	rounds := maps.Clone(w.rounds)
	w.mu.Unlock()
	// A process has a round or two: a slice finds their copies.
	var from, to []*round
	copyOf := func(r *round) *round {
		if r == nil || r.ws != w {
			return r
		}
		for k, o := range from {
			if o == r {
				return to[k]
			}
		}
		r.mu.Lock()
		c := &round{
			ws: f, thread: r.thread, holder: r.holder,
			phase: r.phase, plan: r.plan, run: r.run,
			doubt: r.doubt, claimDoubt: r.claimDoubt,
			crashing: r.crashing, crashFailed: r.crashFailed,
			tick: r.tick, taken: r.taken,
		}
		if r.doubtLine != nil {
			l := *r.doubtLine
			c.doubtLine = &l
		}
		r.mu.Unlock()
		from, to = append(from, r), append(to, c)
		return c
	}
	for id, r := range rounds {
		f.rounds[id] = copyOf(r)
	}
	return f, func(c Claim) Claim {
		c.r = copyOf(c.r)
		return c
	}
}
