package sim

import (
	"errors"
	"math/rand/v2"

	"github.com/threadclaim/threadclaim/specmodel"
)

// Walk is one planned path through a cfg's state graph, from Init: the
// spec steps a directed execution drives one thread's processes through
// (Config.Walks).
type Walk []specmodel.Step

// Planner plans walks that together visit a cfg's whole state graph,
// seeking what earlier walks left unvisited (model-checking-guided
// testing): first every state, deepest first, then every edge. Each walk
// reaches its target along a shortest path that passes as many unvisited
// states and edges as it can, and then goes on while some step leads to
// one. The plan depends on the graph and the seed only, not on what the
// executions did, so that seed k's walks are the same whoever runs them
// and in whatever order.
type Planner struct {
	g   *specmodel.Graph
	rng *rand.Rand
	// pred lists, for each state, the edges that reach it from one depth
	// less (the edges of its shortest paths): predOff/pred in compressed
	// rows.
	predOff []int32
	pred    []int32
	src     []int32 // each edge's source state
	states  []bool  // planned to be visited
	edges   []bool
	// skip marks the edges no walk takes (the Skip function's); reach the
	// states a walk can plan a way to.
	skip, reach []bool
	// The targets, deepest first: states, then edges; next is the first
	// not yet tried.
	stateOrder, edgeOrder []int32
	nextState, nextEdge   int
	nStates, nEdges       int // planned to be visited
	back                  []int32
}

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
		predOff: make([]int32, n+1), src: make([]int32, m), states: make([]bool, n), edges: make([]bool, m),
		skip: make([]bool, m)}
	for i := range n {
		first, end := g.Out(i)
		var s specmodel.State
		if skip != nil {
			s = g.State(i)
		}
		for e := first; e < end; e++ {
			p.src[e] = int32(i)
			st, j := g.Edge(e)
			if skip != nil && skip(&s, st) {
				p.skip[e] = true
				continue
			}
			if g.Depth(j) == g.Depth(i)+1 {
				p.predOff[j+1]++
			}
		}
	}
	for i := range n {
		p.predOff[i+1] += p.predOff[i]
	}
	p.pred = make([]int32, p.predOff[n])
	fill := append([]int32(nil), p.predOff[:n]...)
	for e := range m {
		if _, j := g.Edge(e); !p.skip[e] && g.Depth(j) == g.Depth(int(p.src[e]))+1 {
			p.pred[fill[j]] = int32(e)
			fill[j]++
		}
	}
	// A state a walk can reach along shortest paths of edges it may
	// take: the states are numbered breadth first, so its predecessors
	// are decided before it.
	p.reach = make([]bool, n)
	p.reach[0] = true
	for j := 1; j < n; j++ {
		for k := p.predOff[j]; k < p.predOff[j+1]; k++ {
			if p.reach[p.src[p.pred[k]]] {
				p.reach[j] = true
				break
			}
		}
	}
	// Deepest first, in a seeded order within a depth: the deep states
	// are the most numerous, and a walk to one passes others on the way.
	maxDepth := g.Result().Depth
	stateBuckets := make([][]int32, maxDepth+1)
	for i := range n {
		if p.reach[i] {
			stateBuckets[g.Depth(i)] = append(stateBuckets[g.Depth(i)], int32(i))
		}
	}
	edgeBuckets := make([][]int32, maxDepth+1)
	for e := range m {
		if !p.skip[e] && p.reach[p.src[e]] {
			d := g.Depth(int(p.src[e]))
			edgeBuckets[d] = append(edgeBuckets[d], int32(e))
		}
	}
	for d := maxDepth; d >= 1; d-- {
		p.rng.Shuffle(len(stateBuckets[d]), func(a, b int) { stateBuckets[d][a], stateBuckets[d][b] = stateBuckets[d][b], stateBuckets[d][a] })
		p.stateOrder = append(p.stateOrder, stateBuckets[d]...)
		p.rng.Shuffle(len(edgeBuckets[d]), func(a, b int) { edgeBuckets[d][a], edgeBuckets[d][b] = edgeBuckets[d][b], edgeBuckets[d][a] })
		p.edgeOrder = append(p.edgeOrder, edgeBuckets[d]...)
	}
	p.states[0], p.nStates = true, 1
	return p, nil
}

// Reachable returns the states and edges the walks can visit at all:
// every one but the skipped edges and what only they lead to.
func (p *Planner) Reachable() (states, edges int) { return len(p.stateOrder), len(p.edgeOrder) }

// Planned returns the states and edges the walks so far visit.
func (p *Planner) Planned() (states, edges int) { return p.nStates, p.nEdges }

// Next plans the next walk; false once the walks so far visit every
// state and edge.
func (p *Planner) Next() (Walk, bool) {
	for p.nextState < len(p.stateOrder) {
		v := p.stateOrder[p.nextState]
		p.nextState++
		if !p.states[v] {
			return p.walk(v, -1), true
		}
	}
	for p.nextEdge < len(p.edgeOrder) {
		e := p.edgeOrder[p.nextEdge]
		p.nextEdge++
		if !p.edges[e] {
			return p.walk(p.src[e], e), true
		}
	}
	return nil, false
}

// walk plans a path from Init to state u, then edge e (unless -1), then on
// while a step reaches something unvisited, and marks what it visits.
func (p *Planner) walk(u, e int32) Walk {
	// Back from u to Init along edges of shortest paths, each time through
	// the predecessor that adds the most: an unvisited state counts more
	// than an unvisited edge; ties go to the seeded draw.
	p.back = p.back[:0]
	for w := u; w != 0; {
		best, bestScore := int32(-1), -1
		for k := p.predOff[w]; k < p.predOff[w+1]; k++ {
			pe := p.pred[k]
			if !p.reach[p.src[pe]] {
				continue
			}
			score := 0
			if !p.states[p.src[pe]] {
				score += 3
			}
			if !p.edges[pe] {
				score += 2
			}
			if score = score<<8 | p.rng.IntN(256); score > bestScore {
				best, bestScore = pe, score
			}
		}
		p.back = append(p.back, best)
		w = p.src[best]
	}
	walk := make(Walk, 0, len(p.back)+8)
	for k := len(p.back) - 1; k >= 0; k-- {
		walk = p.take(walk, p.back[k])
	}
	cur := int(u)
	if e >= 0 {
		walk = p.take(walk, e)
		_, cur = p.g.Edge(int(e))
	}
	for {
		first, end := p.g.Out(cur)
		best, bestScore := -1, 0
		for f := first; f < end; f++ {
			_, j := p.g.Edge(f)
			if p.skip[f] {
				continue
			}
			score := 0
			if !p.states[j] {
				score += 3
			}
			if !p.edges[f] {
				score += 2
			}
			if score == 0 {
				continue
			}
			if score = score<<8 | p.rng.IntN(256); score > bestScore {
				best, bestScore = f, score
			}
		}
		if best < 0 {
			return walk
		}
		walk = p.take(walk, int32(best))
		_, cur = p.g.Edge(best)
	}
}

// take appends edge e's step to the walk and marks the edge and its state.
func (p *Planner) take(walk Walk, e int32) Walk {
	st, j := p.g.Edge(int(e))
	if !p.edges[e] {
		p.edges[e] = true
		p.nEdges++
	}
	if !p.states[j] {
		p.states[j] = true
		p.nStates++
	}
	return append(walk, st)
}
