package specmodel

import (
	"fmt"
	"strings"

	"github.com/threadclaim/threadclaim/core"
)

// InvDeadlock is the name a Violation gives a deadlock, when the cfg checks
// for one (CHECK_DEADLOCK TRUE): a state with no successor.
const InvDeadlock = "Deadlock"

// Graph is the reachable part of the spec's state graph for one cfg,
// explored breadth first from Init. States are numbered in the order they
// were found, 0 being Init, so that a state's number grows with its depth
// and the path through Parent is a shortest one.
type Graph struct {
	model  *Model
	keys   []string         // state i's canonical key
	parent []int32          // the state i was first reached from; -1 for Init
	via    []int32          // the step (index in Model.Steps) that reached i
	depth  []uint16         // 1 for Init, as TLC counts
	index  map[string]int32 // key to number
	result Result
	// maxDepth is the depth the exploration stopped at (0: none): the
	// states of that depth have not been expanded.
	maxDepth int
	// With Options.Edges, the graph's edges in compressed rows: state i's
	// edges are edgeTo/edgeVia[edgeOff[i]:edgeOff[i+1]], in Next's order.
	edgeOff []int32
	edgeTo  []int32
	edgeVia []uint8
}

// Result is what an exploration found, in TLC's terms.
type Result struct {
	Distinct  int // distinct states found
	Generated int // states generated: Init plus every successor computed, duplicates included
	// Transitions counts, per action, the successors computed (an edge per
	// enabled action instance, self-loops included).
	Transitions map[core.Action]int
	Depth       int // the longest shortest path, in states (Init is 1)
	// Violation is the first invariant violation breadth-first search met,
	// nil when every invariant holds in every reachable state. The search
	// stops there, so the other figures count only what it saw.
	Violation *Violation
}

// Violation is a reachable state that breaks an invariant, with a shortest
// path to it.
type Violation struct {
	// Invariant is the cfg's first invariant that fails there, InvDeadlock,
	// or core.PropNoLiveTakeover for a step that takes a live lease.
	Invariant string
	Depth     int         // the path's length in states (Init is 1): TLC's depth
	Trace     []TraceStep // from Init to the violating state
}

// TraceStep is one state of a path and the step that led to it (the zero
// Step, with an empty Action, for Init).
type TraceStep struct {
	Step  Step
	State State
}

// Explore enumerates the states reachable from Init breadth first,
// checking the cfg's invariants in every state as it is found, and stops
// at the first violation.
func (m *Model) Explore() *Graph { return m.ExploreWith(Options{}) }

// Options change how far ExploreWith goes.
type Options struct {
	// Continue goes on past a violation (TLC's -continue): the Result's
	// Violation is still the first one found, with its shortest path. The
	// unfenced cfgs' state spaces are not finite (a stale RunStart moves
	// taken back, and a message is consumed again and again), so Continue
	// needs MaxDepth there.
	Continue bool
	// MaxDepth stops after every state of that depth (Init is 1) was
	// found; 0 for no bound.
	MaxDepth int
	// Edges keeps every edge (Graph.Out), not only the tree of first
	// visits: what a walk of the whole graph plans with. It costs about
	// 5 bytes an edge.
	Edges bool
}

// ExploreWith is Explore with options.
func (m *Model) ExploreWith(o Options) *Graph {
	all := o.Continue
	g := &Graph{model: m, index: make(map[string]int32, 1<<16), maxDepth: o.MaxDepth}
	g.result.Transitions = map[core.Action]int{}
	init := m.Init()
	g.add(init.Key(), -1, -1, 1)
	g.result.Generated = 1
	if inv := m.Violated(&init); inv != "" {
		g.violate(0, inv)
		if !all {
			return g
		}
	}
	steps := m.steps
	// The successors are built in one scratch state: each is encoded (or
	// checked) before the next is built.
	mm := *m
	mm.scratch = &State{}
	var buf []byte
	if o.Edges {
		if len(steps) > 256 {
			panic("specmodel: more steps than an edge's byte holds")
		}
		g.edgeOff = append(g.edgeOff, 0)
	}
	for i := 0; i < len(g.keys); i++ {
		d := g.depth[i]
		if o.MaxDepth > 0 && int(d) >= o.MaxDepth {
			break
		}
		if o.Edges && i > 0 {
			g.edgeOff = append(g.edgeOff, int32(len(g.edgeTo)))
		}
		s := m.Decode(g.keys[i])
		enabled := false
		for si := range steps {
			out := mm.Do(&s, steps[si])
			if !out.Enabled {
				continue
			}
			enabled = true
			g.result.Generated++
			g.result.Transitions[steps[si].Action]++
			buf = out.Next.AppendKey(buf[:0])
			if m.takeover && g.result.Violation == nil && LiveTakeover(&s, &out.Next) {
				// An action property: the path is the one to s, then this step.
				j, seen := g.index[string(buf)]
				if !seen {
					j = g.add(string(buf), int32(i), int32(si), d+1)
				}
				g.violateStep(int32(i), j, int32(si))
				if !all {
					return g
				}
				continue
			}
			if j, ok := g.index[string(buf)]; ok {
				g.edge(o.Edges, j, si)
				continue
			}
			j := g.add(string(buf), int32(i), int32(si), d+1)
			g.edge(o.Edges, j, si)
			if g.result.Violation != nil {
				continue
			}
			if inv := m.Violated(&out.Next); inv != "" {
				g.violate(j, inv)
				if !all {
					return g
				}
			}
		}
		if enabled {
			continue
		}
		if m.cfg.CheckDeadlock && g.result.Violation == nil {
			g.violate(int32(i), InvDeadlock)
			if !all {
				return g
			}
		}
	}
	if o.Edges {
		g.edgeOff = append(g.edgeOff, int32(len(g.edgeTo)))
	}
	g.finish()
	return g
}

func (g *Graph) edge(keep bool, j int32, si int) {
	if keep {
		g.edgeTo = append(g.edgeTo, j)
		g.edgeVia = append(g.edgeVia, uint8(si))
	}
}

// HasEdges reports whether the graph kept its edges: explored with
// Options.Edges, to the end, without a violation.
func (g *Graph) HasEdges() bool {
	return g.result.Violation == nil && len(g.edgeOff) == len(g.keys)+1
}

// NumEdges returns the number of edges kept (0 without HasEdges).
func (g *Graph) NumEdges() int {
	if !g.HasEdges() {
		return 0
	}
	return len(g.edgeTo)
}

// Out returns the edges leaving state i, as the range [first, end) of edge
// numbers, in Next's order. It needs HasEdges.
func (g *Graph) Out(i int) (first, end int) { return int(g.edgeOff[i]), int(g.edgeOff[i+1]) }

// Edge returns edge e's step and the state it leads to.
func (g *Graph) Edge(e int) (Step, int) { return g.model.steps[g.edgeVia[e]], int(g.edgeTo[e]) }

func (g *Graph) add(key string, parent, via int32, depth uint16) int32 {
	j := int32(len(g.keys))
	g.keys = append(g.keys, key)
	g.parent = append(g.parent, parent)
	g.via = append(g.via, via)
	g.depth = append(g.depth, depth)
	g.index[key] = j
	return j
}

func (g *Graph) finish() {
	g.result.Distinct = len(g.keys)
	if n := len(g.depth); n > 0 {
		g.result.Depth = int(g.depth[n-1])
	}
}

func (g *Graph) violate(i int32, inv string) {
	g.finish()
	tr := g.Path(int(i))
	g.result.Violation = &Violation{Invariant: inv, Depth: len(tr), Trace: tr}
}

// violateStep records a violation of NoLiveTakeover by the step si from
// state i to state j.
func (g *Graph) violateStep(i, j, si int32) {
	g.finish()
	tr := g.Path(int(i))
	tr = append(tr, TraceStep{Step: g.model.steps[si], State: g.model.Decode(g.keys[j])})
	g.result.Violation = &Violation{Invariant: core.PropNoLiveTakeover, Depth: len(tr), Trace: tr}
}

// Result returns what the exploration found.
func (g *Graph) Result() Result { return g.result }

// Model returns the model the graph was explored with.
func (g *Graph) Model() *Model { return g.model }

// Len is the number of states found.
func (g *Graph) Len() int { return len(g.keys) }

// State returns state i.
func (g *Graph) State(i int) State { return g.model.Decode(g.keys[i]) }

// Key returns state i's canonical key.
func (g *Graph) Key(i int) string { return g.keys[i] }

// Depth returns state i's depth (Init is 1).
func (g *Graph) Depth(i int) int { return int(g.depth[i]) }

// MaxDepth is the depth the exploration stopped at (Options.MaxDepth; 0
// for none): the states of that depth were found but not expanded.
func (g *Graph) MaxDepth() int { return g.maxDepth }

// Lookup returns the number of the state with that key.
func (g *Graph) Lookup(key string) (int, bool) {
	i, ok := g.index[key]
	return int(i), ok
}

// Path returns a shortest path from Init to state i.
func (g *Graph) Path(i int) []TraceStep {
	var rev []TraceStep
	for j := int32(i); j >= 0; j = g.parent[j] {
		ts := TraceStep{State: g.model.Decode(g.keys[j])}
		if g.via[j] >= 0 {
			ts.Step = g.model.steps[g.via[j]]
		}
		rev = append(rev, ts)
	}
	for a, b := 0, len(rev)-1; a < b; a, b = a+1, b-1 {
		rev[a], rev[b] = rev[b], rev[a]
	}
	return rev
}

// Decode is the inverse of State.AppendKey for this model's constants. It
// panics on a key no state of the model has: keys come from the model.
func (m *Model) Decode(key string) State {
	k := 0
	next := func() uint8 {
		if k >= len(key) {
			panic(fmt.Sprintf("specmodel: short state key %q", key))
		}
		k++
		return key[k-1]
	}
	s := State{Msgs: next(), Taken: next()}
	s.Lease = Lease{Holder: next(), Expired: next() == 1}
	n := int(next())
	s.Runs = make([]Run, n, n+1)
	for i := range s.Runs {
		s.Runs[i] = Run{Holder: next(), Prompt: next(), State: RunState(next())}
	}
	n = int(next())
	s.Reqs = make([]Req, n, n+1)
	for i := range s.Reqs {
		s.Reqs[i] = Req{Run: next(), State: ReqState(next()), Answer: next()}
	}
	s.Consumed = make([]uint8, m.cfg.MaxMsgs)
	for i := range s.Consumed {
		s.Consumed[i] = next()
	}
	s.LiveAbandoned = next() == 1
	s.Given = make([]uint8, m.cfg.MaxMsgs)
	for i := range s.Given {
		s.Given[i] = next()
	}
	n = int(next())
	s.Steered = make([]Pair, n, n+1)
	for i := range s.Steered {
		s.Steered[i] = Pair{Run: next(), Msg: next()}
	}
	s.Procs = make([]Proc, len(m.cfg.Procs))
	for i := range s.Procs {
		s.Procs[i] = Proc{PC: PC(next()), Hold: next(), Plan: Plan{Kind: PlanKind(next()), Msg: next(), Req: next()}, Run: next()}
	}
	s.NextHolder = next()
	if k != len(key) {
		panic(fmt.Sprintf("specmodel: long state key %q", key))
	}
	return s
}

// Successors calls yield for each enabled step in state i with the
// successor's number, in Next's order. The successor is always in the graph
// when the exploration finished without a violation.
func (g *Graph) Successors(i int, yield func(st Step, j int)) {
	s := g.State(i)
	var buf []byte
	for _, st := range g.model.steps {
		out := g.model.Do(&s, st)
		if !out.Enabled {
			continue
		}
		buf = out.Next.AppendKey(buf[:0])
		j, ok := g.index[string(buf)]
		if !ok {
			j = -1
		}
		yield(st, int(j))
	}
}

// FormatTrace renders a path one step a line: the step as the spec writes
// it, then the state after it.
func (m *Model) FormatTrace(tr []TraceStep) string {
	var b strings.Builder
	for i, ts := range tr {
		name := "Init"
		if ts.Step.Action != "" {
			name = m.Describe(ts.Step)
		}
		fmt.Fprintf(&b, "%3d %-18s %s\n", i+1, name, ts.State.String())
	}
	return b.String()
}

// PathSteps returns the steps of a shortest path from Init to state i,
// without the states (Path's, cheaper).
func (g *Graph) PathSteps(i int) []Step {
	n := int(g.depth[i]) - 1
	steps := make([]Step, n)
	for j := int32(i); g.parent[j] >= 0; j = g.parent[j] {
		n--
		steps[n] = g.model.steps[g.via[j]]
	}
	return steps
}

// Parent returns the state from which state i was first reached (-1 for
// Init) and the step that reached it: the edges Path follows.
func (g *Graph) Parent(i int) (int, Step) {
	if g.parent[i] < 0 {
		return -1, Step{}
	}
	return int(g.parent[i]), g.model.steps[g.via[i]]
}
