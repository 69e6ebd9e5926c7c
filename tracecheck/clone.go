package tracecheck

import (
	"maps"
	"slices"
)

// Clone returns a checker that has seen what c has: Step on the clone
// checks lines as if they followed those c saw, and leaves c as it is. A
// simulation that forks an execution at a point it goes on from in
// several ways clones the check of the trace so far with it, rather than
// checking each branch's whole trace again.
func (c *Checker) Clone() *Checker {
	d := *c
	d.threads = maps.Clone(c.threads)
	d.list = make([]*threadState, len(c.list))
	for k, t := range c.list {
		d.list[k] = t.clone()
	}
	d.failed = nil
	return &d
}

func (t *threadState) clone() *threadState {
	u := *t
	u.runs = slices.Clone(t.runs)
	u.reqs = slices.Clone(t.reqs)
	u.consumed = slices.Clone(t.consumed)
	u.given = slices.Clone(t.given)
	u.steeredOf = slices.Clone(t.steeredOf)
	u.steered = slices.Clone(t.steered)
	u.holders.slots = slices.Clone(t.holders.slots)
	u.names = slices.Clone(t.names)
	u.procs = maps.Clone(t.procs)
	u.order = make([]*specProc, len(t.order))
	for k, p := range t.order {
		q := *p
		u.order[k] = &q
	}
	return &u
}
