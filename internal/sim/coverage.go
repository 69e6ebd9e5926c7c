package sim

import (
	"slices"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// Coverage measures how much of a cfg's reachable state graph the
// executions' traces visit: each thread's trace is followed through the
// spec model (specmodel) from Init, inferring a Lapse just before a Claim
// that needs one, as the trace checkers do, and every state and edge it
// passes is marked. A thread whose trace leaves the cfg's bounds (more
// messages, claims or asks than the cfg allows, or processes it does not
// name) is followed only up to there.
type Coverage struct {
	graph   *specmodel.Graph
	model   *specmodel.Model
	stepIdx map[specmodel.Step]int
	states  []bool
	visited int
	edges   map[uint64]struct{}
	total   int // edges of the graph
}

// NewCoverage returns an empty coverage of g, a finished exploration.
func NewCoverage(g *specmodel.Graph) *Coverage {
	c := &Coverage{graph: g, model: g.Model(), stepIdx: map[specmodel.Step]int{}, states: make([]bool, g.Len()), edges: map[uint64]struct{}{}}
	for i, st := range c.model.Steps() {
		c.stepIdx[st] = i
	}
	for _, n := range g.Result().Transitions {
		c.total += n
	}
	return c
}

// States returns the states visited and the graph's states.
func (c *Coverage) States() (visited, total int) { return c.visited, len(c.states) }

// Edges returns the edges visited and the graph's edges.
func (c *Coverage) Edges() (visited, total int) { return len(c.edges), c.total }

// Visited reports whether state i of the graph was visited.
func (c *Coverage) Visited(i int) bool { return c.states[i] }

// Add follows a trace, all its threads, and marks what it visits.
func (c *Coverage) Add(lines []core.TraceEvent) { c.Mark(c.Follow(lines)) }

// Visits are the states and edges a trace visits, found by Follow and not
// yet marked.
type Visits struct {
	states []int32
	edges  []uint64
}

// Follow follows a trace, all its threads, as Add does, and returns what
// it visits without marking it: it only reads the graph, so that several
// goroutines may follow traces at once, and one marks (Mark).
func (c *Coverage) Follow(lines []core.TraceEvent) *Visits {
	v := &Visits{}
	threads := map[core.ThreadID]*follower{}
	for _, l := range lines {
		f := threads[l.Thread]
		if f == nil {
			f = c.newFollower(v)
			threads[l.Thread] = f
		}
		f.line(l)
	}
	return v
}

// Mark marks the visits Follow found.
func (c *Coverage) Mark(v *Visits) {
	for _, i := range v.states {
		if !c.states[i] {
			c.states[i] = true
			c.visited++
		}
	}
	for _, e := range v.edges {
		c.edges[e] = struct{}{}
	}
}

// follower is one thread's walk through the graph.
type follower struct {
	c     *Coverage
	state specmodel.State
	at    int      // the state's number in the graph
	lost  bool     // the trace left the graph
	procs []string // the cfg's, in order
	buf   []byte
	// visits, when set, collects what the walk visits instead of marking
	// it (Follow).
	visits *Visits
}

// newFollower starts a walk at Init, collecting its visits in v, or
// marking them when v is nil.
func (c *Coverage) newFollower(v *Visits) *follower {
	f := &follower{c: c, state: c.model.Init(), procs: c.model.Config().Procs, visits: v}
	f.mark(0)
	return f
}

func (f *follower) line(l core.TraceEvent) {
	if f.lost {
		return
	}
	st, ok := stepOf(l, f.procs)
	if !ok {
		f.lost = true
		return
	}
	if l.Action == core.ActionLapse {
		// A lapse the execution saw (Seeded.CoverageLines): a lease the
		// walk's state no longer holds, or one already inferred to have
		// expired, has nothing left to lapse.
		if f.c.model.Do(&f.state, st).Enabled {
			f.step(st)
		}
		return
	}
	if l.Action == core.ActionClaim && f.state.Lease.Holder != 0 && !f.state.Lease.Expired {
		f.step(specmodel.Step{Action: core.ActionLapse, P: -1})
	}
	f.step(st)
}

func (f *follower) step(st specmodel.Step) {
	if f.lost {
		return
	}
	idx, ok := f.c.stepIdx[st]
	if !ok {
		f.lost = true
		return
	}
	out := f.c.model.Do(&f.state, st)
	if !out.Enabled {
		f.lost = true
		return
	}
	f.state = out.Next
	f.buf = f.state.AppendKey(f.buf[:0])
	j, ok := f.c.graph.Lookup(string(f.buf))
	if !ok {
		f.lost = true
		return
	}
	f.mark(j)
	if edge := uint64(f.at)<<16 | uint64(idx); f.visits != nil {
		f.visits.edges = append(f.visits.edges, edge)
	} else {
		f.c.edges[edge] = struct{}{}
	}
	f.at = j
}

func (f *follower) mark(i int) {
	if f.visits != nil {
		f.visits.states = append(f.visits.states, int32(i))
		return
	}
	if !f.c.states[i] {
		f.c.states[i] = true
		f.c.visited++
	}
}

// stepOf returns the spec step a trace line records, its process numbered
// as procs names them in order; false for a process procs does not name.
// A Lapse line (Seeded.CoverageLines) and a Post name no process.
func stepOf(l core.TraceEvent, procs []string) (specmodel.Step, bool) {
	st := specmodel.Step{Action: l.Action, P: -1}
	if l.Action != core.ActionPost && l.Action != core.ActionLapse {
		if st.P = slices.Index(procs, l.Proc); st.P < 0 {
			return st, false
		}
	}
	if l.Action == core.ActionAbandon {
		st.R = int(l.Run)
	}
	return st, true
}
