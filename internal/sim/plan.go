package sim

import (
	"errors"
	"math/rand/v2"
	"slices"

	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// Walk is one planned path through a cfg's state graph, from Init: the
// spec steps a directed execution drives one thread's processes through
// (Config.Walks).
type Walk []specmodel.Step

// Planner plans walks that together visit a cfg's whole state graph,
// seeking what earlier walks left unvisited (model-checking-guided
// testing). Every walk starts from Init, as a directed execution's thread
// does, so the cost of a plan is its steps.
//
// A cfg's graph is nearly acyclic: its cycles are edges from a state back
// to itself and small groups of states with edges both ways. The planner
// condenses those groups into components, which leaves an acyclic graph,
// and plans each walk as a greedy pick of the path from Init that visits
// the most of what is still unvisited. gain(c) is what is left inside
// component c plus the gain of its best way out; a walk takes every
// unvisited edge inside each component it enters, then its best way out.
// An unvisited state counts stateWeight, an unvisited edge one, so that
// the states are covered first.
//
// Gains only fall as walks visit what they counted. Before a walk takes a
// way out it recomputes the gain of the component it leads to, and picks
// again if that fell; after the walk it recomputes the gains of the
// components it passed, from the end back; and when a walk gains less than
// a quarter of what Init's gain promised, it recomputes all of them. The
// plan depends on the graph and the seed only, not on what the executions
// did, so that seed k's walks are the same whoever runs them and in
// whatever order.
type Planner struct {
	g   *specmodel.Graph
	rng *rand.Rand
	// skip marks the edges no walk takes (the Skip function's).
	skip []bool
	// comp numbers each reachable state's component (-1: unreachable
	// without the skipped edges); components are numbered from the sinks
	// back, so that every edge between two goes to a lower number.
	comp []int32
	// Per component, in compressed rows: its states (members), the edges
	// between them (inner), and the edges out of it (outEdge, to the
	// component outComp).
	memOff, members  []int32
	innerOff, inner  []int32
	outOff           []int32
	outEdge, outComp []int32
	src              []int32 // each edge's source state
	states, edges    []bool  // planned to be visited
	left, gain       []int64 // per component: what is left inside, and gain (see Planner)
	nStates, nEdges  int     // planned to be visited
	nReach, nTakes   int     // reachable states and edges
	path             []int32 // the components the walk being planned passed
}

// stateWeight is what an unvisited state counts for in a walk's gain,
// against one for an unvisited edge: enough that the walks cover the
// states early (scripts/test sets a floor on state coverage), not so much
// that they pass up edges meanwhile.
const stateWeight = 4

// ErrNoEdges: the planner needs a graph explored with
// specmodel.Options.Edges, to the end.
var ErrNoEdges = errors.New("sim: the graph has no edges (explore it with specmodel.Options{Edges: true})")

// Skip says which steps a walk must not take, from a state: those the
// code under test cannot be made to take there.
type Skip func(from *specmodel.State, st specmodel.Step) bool

// NewPlanner plans walks of g with choices drawn from seed, leaving out
// the edges skip names (nil for none).
func NewPlanner(g *specmodel.Graph, seed uint64, skip Skip) (*Planner, error) {
	if !g.HasEdges() {
		return nil, ErrNoEdges
	}
	n, m := g.Len(), g.NumEdges()
	p := &Planner{g: g, rng: rand.New(rand.NewPCG(seed, 0x706c616e)),
		src: make([]int32, m), states: make([]bool, n), edges: make([]bool, m), skip: make([]bool, m)}
	for i := range n {
		first, end := g.Out(i)
		var s specmodel.State
		if skip != nil {
			s = g.State(i)
		}
		for e := first; e < end; e++ {
			p.src[e] = int32(i)
			if st, _ := g.Edge(e); skip != nil && skip(&s, st) {
				p.skip[e] = true
			}
		}
	}
	p.condense()
	p.states[0], p.nStates = true, 1
	p.left[p.comp[0]] -= stateWeight
	for c := range int32(len(p.gain)) {
		p.gain[c] = p.left[c] + p.bestOut(c, false).gain
	}
	return p, nil
}

// condense numbers the strongly connected components of the graph
// reachable from Init without the skipped edges (Tarjan's algorithm,
// without recursion), sinks first, and lays out their rows.
func (p *Planner) condense() {
	n := p.g.Len()
	index, low := make([]int32, n), make([]int32, n)
	p.comp = make([]int32, n)
	for i := range index {
		index[i], p.comp[i] = -1, -1
	}
	onStack := make([]bool, n)
	var stack []int32
	type frame struct {
		v    int32
		next int // the next of v's edges to look at
	}
	var calls []frame
	next, nComp := int32(0), int32(0)
	visit := func(v int32) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		first, _ := p.g.Out(int(v))
		calls = append(calls, frame{v, first})
	}
	visit(0)
	for len(calls) > 0 {
		f := &calls[len(calls)-1]
		v := f.v
		if _, end := p.g.Out(int(v)); f.next < end {
			e := f.next
			f.next++
			_, w := p.g.Edge(e)
			switch {
			case p.skip[e]:
			case index[w] < 0:
				visit(int32(w))
			case onStack[w]:
				low[v] = min(low[v], index[w])
			}
			continue
		}
		calls = calls[:len(calls)-1]
		if len(calls) > 0 {
			u := calls[len(calls)-1].v
			low[u] = min(low[u], low[v])
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				p.comp[w] = nComp
				if w == v {
					break
				}
			}
			nComp++
		}
	}
	p.memOff, p.innerOff, p.outOff = make([]int32, nComp+1), make([]int32, nComp+1), make([]int32, nComp+1)
	p.left, p.gain = make([]int64, nComp), make([]int64, nComp)
	p.nReach = int(next)
	for pass := range 2 {
		for i := range n {
			c := p.comp[i]
			if c < 0 {
				continue
			}
			if pass == 0 {
				p.memOff[c+1]++
				p.left[c] += stateWeight
			} else {
				p.members[p.memOff[c]] = int32(i)
				p.memOff[c]++
			}
			first, end := p.g.Out(i)
			for e := first; e < end; e++ {
				if p.skip[e] {
					continue
				}
				_, w := p.g.Edge(e)
				switch d := p.comp[w]; {
				case pass == 0 && d == c:
					p.innerOff[c+1]++
					p.left[c]++
					p.nTakes++
				case pass == 0:
					p.outOff[c+1]++
					p.nTakes++
				case d == c:
					p.inner[p.innerOff[c]] = int32(e)
					p.innerOff[c]++
				default:
					p.outEdge[p.outOff[c]], p.outComp[p.outOff[c]] = int32(e), d
					p.outOff[c]++
				}
			}
		}
		if pass == 0 {
			for c := range nComp {
				p.memOff[c+1] += p.memOff[c]
				p.innerOff[c+1] += p.innerOff[c]
				p.outOff[c+1] += p.outOff[c]
			}
			p.members = make([]int32, p.memOff[nComp])
			p.inner = make([]int32, p.innerOff[nComp])
			p.outEdge, p.outComp = make([]int32, p.outOff[nComp]), make([]int32, p.outOff[nComp])
		}
	}
	// The second pass moved each row's start to its end: move them back.
	copy(p.memOff[1:], p.memOff[:nComp])
	copy(p.innerOff[1:], p.innerOff[:nComp])
	copy(p.outOff[1:], p.outOff[:nComp])
	p.memOff[0], p.innerOff[0], p.outOff[0] = 0, 0, 0
}

// Reachable returns the states and edges the walks can visit at all:
// every one but the skipped edges and what only they lead to.
func (p *Planner) Reachable() (states, edges int) { return p.nReach, p.nTakes }

// Planned returns the states and edges the walks so far visit.
func (p *Planner) Planned() (states, edges int) { return p.nStates, p.nEdges }

// way is a way out of a component: an edge (-1: none gains anything), and
// what taking it gains.
type way struct {
	edge int32
	gain int64
}

// bestOut returns component c's best way out by the gains as they stand,
// ties broken by a seeded draw when draw is set (and by the first
// otherwise, which leaves the draws to the walks).
func (p *Planner) bestOut(c int32, draw bool) way {
	best, ties := way{edge: -1}, 0
	for k := p.outOff[c]; k < p.outOff[c+1]; k++ {
		g := p.gain[p.outComp[k]]
		if !p.edges[p.outEdge[k]] {
			g++
		}
		switch {
		case g <= 0 || g < best.gain:
			continue
		case g == best.gain:
			// One in n for the n-th of equals.
			if ties++; !draw || p.rng.IntN(ties) != 0 {
				continue
			}
		default:
			ties = 1
		}
		best = way{p.outEdge[k], g}
	}
	return best
}

// freshOut returns component c's best way out after making sure the gain
// of the component it leads to is up to date by that one's own ways out:
// a gain that fell is recomputed, and the choice made again, until the
// best stays the best.
func (p *Planner) freshOut(c int32) int32 {
	for {
		w := p.bestOut(c, true)
		if w.edge < 0 {
			return -1
		}
		_, j := p.g.Edge(int(w.edge))
		d := p.comp[j]
		if g := p.left[d] + p.bestOut(d, false).gain; g != p.gain[d] {
			p.gain[d] = g
			continue
		}
		return w.edge
	}
}

// Next plans the next walk; false once the walks so far visit every
// state and edge they can.
func (p *Planner) Next() (Walk, bool) {
	promised := p.gain[p.comp[0]]
	if promised == 0 {
		return nil, false
	}
	walk, got := p.walk()
	if 4*got < promised {
		for c := range int32(len(p.gain)) {
			p.gain[c] = p.left[c] + p.bestOut(c, false).gain
		}
	}
	if len(walk) == 0 {
		// Init's gain was stale all the way: the walks are done if the
		// fresh gains say so.
		return p.Next()
	}
	return walk, true
}

// walk plans one walk from Init, marks what it visits, updates the gains
// of the components it passed, and returns it with what it gained.
func (p *Planner) walk() (Walk, int64) {
	var walk Walk
	var got int64
	p.path = p.path[:0]
	cur := int32(0)
	for {
		c := p.comp[cur]
		p.path = append(p.path, c)
		// Every unvisited edge inside, one from the current state first.
		for p.left[c] > 0 {
			e := p.nearestInner(c, cur)
			if e < 0 {
				break
			}
			walk, cur, got = p.by(walk, cur, e, got)
		}
		e := p.freshOut(c)
		if e < 0 {
			break
		}
		walk, cur, got = p.by(walk, cur, e, got)
	}
	for k := len(p.path) - 1; k >= 0; k-- {
		c := p.path[k]
		p.gain[c] = p.left[c] + p.bestOut(c, false).gain
	}
	return walk, got
}

// by extends the walk from state cur, in edge e's component, to e's source
// and then along e, and returns it with the state it ends in.
func (p *Planner) by(walk Walk, cur, e int32, got int64) (Walk, int32, int64) {
	walk, got = p.within(walk, cur, p.src[e], got)
	walk, got = p.take(walk, e, got)
	_, j := p.g.Edge(int(e))
	return walk, int32(j), got
}

// nearestInner returns an unvisited edge inside component c, one that
// leaves state cur if there is one, or -1.
func (p *Planner) nearestInner(c, cur int32) int32 {
	found := int32(-1)
	for _, e := range p.inner[p.innerOff[c]:p.innerOff[c+1]] {
		switch {
		case p.edges[e]:
		case p.src[e] == cur:
			return e
		case found < 0:
			found = e
		}
	}
	return found
}

// within extends the walk from state u to state v of the same component,
// along a shortest path inside it (breadth first: components are small).
func (p *Planner) within(walk Walk, u, v int32, got int64) (Walk, int64) {
	if u == v {
		return walk, got
	}
	c := p.comp[u]
	// via[k] is the edge by which the search reached at[k].
	at, via := []int32{u}, []int32{-1}
	for h := 0; h < len(at); h++ {
		for _, e := range p.inner[p.innerOff[c]:p.innerOff[c+1]] {
			_, j := p.g.Edge(int(e))
			if p.src[e] != at[h] || slices.Contains(at, int32(j)) {
				continue
			}
			at, via = append(at, int32(j)), append(via, e)
			if int32(j) != v {
				continue
			}
			var back []int32
			for k := len(at) - 1; via[k] >= 0; k = slices.Index(at, p.src[via[k]]) {
				back = append(back, via[k])
			}
			for k := len(back) - 1; k >= 0; k-- {
				walk, got = p.take(walk, back[k], got)
			}
			return walk, got
		}
	}
	panic("sim: the states of a component do not reach each other")
}

// take appends edge e's step to the walk, marks the edge and its state
// visited, and adds what that gained.
func (p *Planner) take(walk Walk, e int32, got int64) (Walk, int64) {
	st, j := p.g.Edge(int(e))
	if !p.edges[e] {
		p.edges[e] = true
		p.nEdges++
		got++
		if c := p.comp[j]; c == p.comp[p.src[e]] {
			p.left[c]--
		}
	}
	if !p.states[j] {
		p.states[j] = true
		p.nStates++
		got += stateWeight
		p.left[p.comp[j]] -= stateWeight
	}
	return append(walk, st), got
}
