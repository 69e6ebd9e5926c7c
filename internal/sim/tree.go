package sim

import (
	"context"
	"errors"
	"fmt"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Tree drives the real runner along every edge of a cfg's state graph
// that a plan can steer it along (all but RunnerSkips'), forking the execution at each
// state instead of walking to it from Init again: a depth-first pass over
// a spanning tree of the graph (breadth first from Init, so each state's
// path is a shortest one), in which a state's execution is kept while its
// edges are driven, each on a fork of it (Seeded.fork: storage, clocks,
// workspaces, runners and turns copied), and the fork that took a tree
// edge goes on to the state it leads to. Each edge then costs one step of
// the real code, where walks from Init cost the whole path to it.
//
// One exception: an agent's call after an earlier one of the same run (an
// Ask or a Steer after a Steer or an Ask) cannot go on from a fork, for
// the runner's agent decides how many messages it takes as steering and
// how many questions it asks when it starts. Such an edge is driven from
// the fork of the state before the run's first call, with an agent that
// makes one more, along the same path (the scheduler pauses the agent
// between its calls for the other processes' steps).
//
// Each fork's trace is checked by the Go trace checker as it grows (a
// clone of the checker of the state it forked from, tracecheck.Checker.Clone),
// the invariants in storage after every operation, and each trace line
// against the step the plan expects there; what a fork did that failed is
// kept as an operation log (Seeded.Log) that replays it from Init.
type Tree struct {
	g      *specmodel.Graph
	m      *specmodel.Model
	steps  map[specmodel.Step]int
	skip   []bool  // per edge: no fork takes it (Skip)
	parent []int32 // per state: the tree edge into it; -1 for Init and states the tree does not reach
	up     []int32 // per state: the state that edge leaves
	depth  []int32
	order  []int32 // the states the tree reaches, breadth first
	reach  int     // edges the tree's states leave by that are not skipped
}

// NewTree builds the spanning tree of g, leaving out the edges skip names
// (nil for none).
func NewTree(g *specmodel.Graph, skip Skip) (*Tree, error) {
	if !g.HasEdges() {
		return nil, ErrNoEdges
	}
	t := &Tree{g: g, m: g.Model(), steps: map[specmodel.Step]int{}, skip: make([]bool, g.NumEdges()),
		parent: make([]int32, g.Len()), up: make([]int32, g.Len()), depth: make([]int32, g.Len())}
	for i, st := range t.m.Steps() {
		t.steps[st] = i
	}
	for i := range t.parent {
		t.parent[i] = -1
	}
	seen := make([]bool, g.Len())
	seen[0] = true
	t.order = append(t.order, 0)
	for h := 0; h < len(t.order); h++ {
		u := int(t.order[h])
		var from specmodel.State
		if skip != nil {
			from = g.State(u)
		}
		first, end := g.Out(u)
		for e := first; e < end; e++ {
			st, v := g.Edge(e)
			if skip != nil && skip(&from, st) {
				t.skip[e] = true
				continue
			}
			t.reach++
			if !seen[v] {
				seen[v] = true
				t.parent[v], t.up[v], t.depth[v] = int32(e), int32(u), t.depth[u]+1
				t.order = append(t.order, int32(v))
			}
		}
	}
	return t, nil
}

// Reachable returns the states the tree reaches and the edges out of them
// that no skip leaves out: what the forks drive.
func (t *Tree) Reachable() (states, edges int) { return len(t.order), t.reach }

// Part is a piece of the tree that one job drives: the edges out of the
// states of Root's subtree, or, for the top part (Top), the edges out of
// the states above the cut.
type Part struct {
	Root int32
	Top  bool
	cut  int32
}

// Parts splits the tree for jobs: the top part, with the states less than
// cut deep, then one part for each state cut deep, in depth-first order.
// A cut below 1 is 1.
func (t *Tree) Parts(cut int) []Part {
	cut = max(cut, 1)
	parts := []Part{{Root: 0, Top: true, cut: int32(cut)}}
	var visit func(u int32)
	visit = func(u int32) {
		if t.depth[u] == int32(cut) {
			parts = append(parts, Part{Root: u, cut: int32(cut)})
			return
		}
		first, end := t.g.Out(int(u))
		for e := first; e < end; e++ {
			if _, v := t.g.Edge(e); t.parent[v] == int32(e) {
				visit(int32(v))
			}
		}
	}
	visit(0)
	return parts
}

// TreeConfig configures the executions a Tree drives.
type TreeConfig struct {
	Seed       uint64      // names the holders
	Unfenced   core.Fences // the fences switched off; default none
	Interleave bool        // must be true: a run's questions pause for others' steps
	Mutants    Mutants
	// Keep is how many failing forks a part keeps (TreeResult.Failed);
	// default 1.
	Keep int

	hook treeHook
}

// TreeResult is what driving a part found.
type TreeResult struct {
	Edges    int // edges driven and taken as planned
	Diverged int // edges whose trace left the plan
	Forks    int
	Lines    int // trace lines the forks wrote, each once
	// PerAction counts those lines by action; Lapses the lapses the forks
	// saw (Stats.Lapses).
	PerAction       map[core.Action]int
	Lapses          int
	InvariantChecks int
	Broken          int // forks that broke an invariant in storage
	Rejected        int // forks whose trace the checker rejected
	Visits          *Visits
	// Failed are the first failing forks, as logs that replay them from
	// Init (NoQuiesce), with what failed.
	Failed []TreeFailure
}

// treeHook, when set in a test, sees every fork that took its edge as
// planned, before it goes on or is done with.
type treeHook func(f *Seeded)

// TreeFailure is a fork that failed: its log, and the edge it drove.
type TreeFailure struct {
	Log       Log
	Edge      string
	Invariant *InvariantError
	Violation *tracecheck.Violation
	Diverged  bool
}

// node is a state on the depth-first path, with its execution, which no
// operation changes once kept: edges are driven on forks of it.
type node struct {
	state int32
	s     *Seeded
	check *tracecheck.Checker
	spec  specmodel.State
}

type treeRun struct {
	t     *Tree
	cfg   TreeConfig
	ctx   context.Context
	res   *TreeResult
	path  Walk // the steps from Init to the deepest node
	stack []node
}

// Drive drives every edge of the part, on forks.
func (t *Tree) Drive(ctx context.Context, p Part, cfg TreeConfig) (*TreeResult, error) {
	if !cfg.Interleave {
		return nil, errors.New("sim: a tree's forks need Interleave (a run's questions pause for others' steps)")
	}
	if cfg.Keep == 0 {
		cfg.Keep = 1
	}
	s, err := NewSeeded(ctx, Config{
		Seed: cfg.Seed, Walks: []Walk{{}}, Spec: t.m, Unfenced: cfg.Unfenced, Interleave: true, Mutants: cfg.Mutants,
	})
	if err != nil {
		return nil, err
	}
	r := &treeRun{t: t, cfg: cfg, ctx: ctx, res: &TreeResult{PerAction: map[core.Action]int{}, Visits: &Visits{}}}
	if p.Top {
		r.res.Visits.states = append(r.res.Visits.states, 0) // Init
	}
	root := node{state: 0, s: s, check: tracecheck.NewChecker(tracecheck.WithFile("fork")), spec: t.m.Init()}
	r.stack = append(r.stack, root)
	// The path to the part's root, driven as one walk on the root's
	// execution (what it visits is the parts above's to count).
	var steps []int32
	for v := p.Root; t.parent[v] >= 0; v = t.up[v] {
		steps = append(steps, t.parent[v])
	}
	for k := len(steps) - 1; k >= 0; k-- {
		st, v := t.g.Edge(int(steps[k]))
		n, ok, err := r.drive(st, int32(v), false, true)
		if err != nil || !ok {
			r.release()
			return r.res, err
		}
		r.push(n, st)
	}
	err = r.visit(p)
	r.release()
	return r.res, err
}

// push makes n, reached by st, the deepest node.
func (r *treeRun) push(n node, st specmodel.Step) {
	r.stack = append(r.stack, n)
	r.path = append(r.path, st)
}

func (r *treeRun) pop() {
	n := r.stack[len(r.stack)-1]
	n.s.endPausedSteps()
	r.stack, r.path = r.stack[:len(r.stack)-1], r.path[:len(r.path)-1]
}

func (r *treeRun) release() {
	for len(r.stack) > 1 {
		r.pop()
	}
	r.stack[0].s.endPausedSteps()
}

// visit drives the edges out of the deepest node and, depth first, out
// of the tree's states below it that the part holds.
func (r *treeRun) visit(p Part) error {
	top := r.stack[len(r.stack)-1]
	t := r.t
	first, end := t.g.Out(int(top.state))
	last := end - 1
	for last >= first && t.skip[last] {
		last--
	}
	for e := first; e < end; e++ {
		if t.skip[e] {
			continue
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
		st, v := t.g.Edge(e)
		tree := t.parent[v] == int32(e) && (!p.Top || t.depth[v] < p.cut)
		n, ok, err := r.drive(st, int32(v), true, e == last)
		if err != nil {
			return err
		}
		if !ok {
			continue // its subtree is not driven
		}
		r.res.Visits.states = append(r.res.Visits.states, int32(v))
		r.res.Visits.edges = append(r.res.Visits.edges, uint64(top.state)<<16|uint64(t.steps[st]))
		r.res.Edges++
		if !tree {
			n.s.endPausedSteps()
			continue
		}
		r.push(n, st)
		err = r.visit(p)
		r.pop()
		if err != nil {
			return err
		}
	}
	return nil
}

// drive takes step st from the deepest node, on a fork, to state v, and
// returns v's node; false when the fork failed (counted, and kept in
// Failed). count says whether its lines are counted: the path to a part's
// root is the parts above's. last says that no other edge is driven from
// the deepest node after this one: the step then takes the node's own
// execution on, unforked, unless it is an Ask (the node may be the one
// before a run's first question, from which a later second question is
// driven).
func (r *treeRun) drive(st specmodel.Step, v int32, count, last bool) (node, bool, error) {
	// The node to fork: the deepest, or, for a process's second question
	// in a run, the one before the run's first question.
	from := len(r.stack) - 1
	if agentCall(st.Action) {
		if a := r.firstAgentCall(st.P); a >= 0 {
			from = a
		}
	}
	base := r.stack[from]
	// A fork of the deepest node grows its trace in place: the node takes
	// no operation itself, and each fork of it is done with (or is the
	// deepest node) before the next. One of a node higher up copies it.
	own := last && from == len(r.stack)-1 && !agentCall(st.Action)
	f := base.s
	if !own {
		var err error
		if f, err = base.s.fork(r.ctx, from == len(r.stack)-1); err != nil {
			return node{}, false, err
		}
		r.res.Forks++
	}
	// The walk is the path and the step: r.path grows by st if the fork
	// goes on, and is cut back before any other step takes its place.
	walk := append(r.path, st)
	d := f.dir
	d.walks, d.k, d.i, d.begun = []Walk{walk}, 0, from, true
	d.state = base.spec // Do builds successors; it changes no state it is given
	d.fedLines, d.fedLapses, d.tries, d.yielded, d.walked, d.diverged = len(f.rec.lines), len(f.lapses), 0, false, 0, 0
	lines0 := len(f.rec.lines)
	var inv *InvariantError
	for i := len(f.log); ; i++ {
		op, ok := f.nextDirected()
		if !ok {
			break
		}
		f.log = append(f.log, op)
		if err := f.Apply(r.ctx, op); err != nil {
			f.endPausedSteps()
			return node{}, false, err
		}
		if err := f.Check(r.ctx, i); err != nil {
			if !errors.As(err, &inv) {
				f.endPausedSteps()
				return node{}, false, err
			}
			break
		}
	}
	fresh := f.rec.lines[lines0:]
	if count {
		r.res.Lines += len(fresh)
		for _, l := range fresh {
			r.res.PerAction[l.Action]++
		}
		r.res.Lapses += f.stats.Lapses
		r.res.InvariantChecks += f.stats.InvariantChecks
	}
	check := base.check
	if !own {
		check = check.Clone()
	}
	check, violation := r.checkLines(check, f, lines0)
	diverged := inv == nil && d.diverged > 0
	if inv != nil || violation != nil || diverged {
		switch {
		case inv != nil:
			r.res.Broken++
		case diverged:
			r.res.Diverged++
		}
		if violation != nil {
			r.res.Rejected++
		}
		if len(r.res.Failed) < r.cfg.Keep {
			r.res.Failed = append(r.res.Failed, TreeFailure{
				Log: f.Log(), Edge: fmt.Sprintf("%s from state %d", r.t.m.Describe(st), r.stack[len(r.stack)-1].state),
				Invariant: inv, Violation: violation, Diverged: diverged,
			})
		}
		f.endPausedSteps()
		return node{}, false, nil
	}
	if r.cfg.hook != nil {
		r.cfg.hook(f)
	}
	return node{state: v, s: f, check: check, spec: d.state}, true, nil
}

// agentCall reports whether a is a call of the run's agent: its
// questions (Ask) and its steering (Steer).
func agentCall(a core.Action) bool { return a == core.ActionAsk || a == core.ActionSteer }

// firstAgentCall returns the depth of the node before process p's first
// call of its agent in the run the path ends in (the first of the Steer,
// SteerRecord and Ask steps p took last, others' steps between them
// aside), or -1 when the path does not end in such calls of p.
func (r *treeRun) firstAgentCall(p int) int {
	first := -1
	for k := len(r.path) - 1; k >= 0; k-- {
		st := r.path[k]
		if st.P != p || st.Action == core.ActionRenew {
			continue
		}
		if !agentCall(st.Action) && st.Action != core.ActionSteerRecord {
			break
		}
		first = k
	}
	return first
}

// checkLines checks the fork's lines since lines0 on c, a clone of the
// checker that checked those before (or that checker, when the fork is
// the node's own execution); when a line is out of the checker's
// order (a Crash traced after others' writes carries the version its
// process saw last, and belongs before them: tracecheck.Sort), the whole
// trace is sorted and checked again.
func (r *treeRun) checkLines(c *tracecheck.Checker, f *Seeded, lines0 int) (*tracecheck.Checker, *tracecheck.Violation) {
	ok := true
	for i := lines0; i < len(f.rec.lines); i++ {
		if c.Step(i+1, &f.rec.lines[i]) != nil {
			ok = false
			break
		}
	}
	if ok {
		return c, nil
	}
	lines := f.TraceLines()
	c = tracecheck.NewChecker(tracecheck.WithFile("fork"))
	for i := range lines {
		if err := c.Step(i+1, &lines[i]); err != nil {
			var v *tracecheck.Violation
			errors.As(err, &v)
			return nil, v
		}
	}
	return c, nil
}
