package conform

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/store/memory"
)

// Options configure Run.
type Options struct {
	// NewStorage returns the storage a path runs on. Each path gets its own
	// thread (named after the state it reaches), so one storage may serve
	// every path; default a fresh store/memory per path.
	NewStorage func(ctx context.Context) (core.Storage, error)
	// Unfenced are the fences the Workspaces run with off
	// (core.WithFencesForTesting): a mutant, which must diverge from the
	// fenced spec. Default none.
	Unfenced core.Fences
	// Sample, when positive, drives that many edges drawn at random (with
	// Seed) instead of every edge; each is reached by replaying its
	// state's shortest path on a fresh thread and then committed.
	Sample int
	Seed   uint64
	// Keep is how many divergences the Report describes in full (default
	// 10); all are counted.
	Keep int
}

// Report is what Run found.
type Report struct {
	States   int // states of the graph
	Edges    int // edges of the graph (an edge per enabled action instance)
	Driven   int // edges driven through the Go code (all of them, unless sampling)
	Refusals int // writes the spec does not enable, asked of Go (each must be refused)
	// Divergences counts the edges Go did not take as the spec does, the
	// refusals it did not make, and the states it could not be brought to.
	Divergences int
	First       []Divergence // the first Keep of them
	Elapsed     time.Duration
}

// Divergence is one place where Go and the spec part.
type Divergence struct {
	Path   string // the shortest path to the state, as the spec writes it
	Step   string // the edge driven, or the write that should be refused
	Detail string // what the spec says and what Go did
}

func (d Divergence) String() string {
	return fmt.Sprintf("%s: %s\n  path: %s", d.Step, d.Detail, d.Path)
}

// Run drives the Go code along g's edges (g explored from a cfg with no
// violation) and checks that (a) every edge the spec enables is taken by
// Go as the spec says: the call succeeds, or is refused as the spec's
// refusal action (StartFenced, ReplyFenced, AbandonFenced, EndRefused);
// (b) every write the spec does not enable, where a runner could make it,
// is refused and writes nothing; (c) Go's state after each edge, abstracted
// (Abstract), is the spec's successor.
//
// Each state is reached by replaying its shortest path on a fresh thread;
// every edge from it is then driven as a probe (the write runs in its
// transaction, the state it made is read there, and the transaction is
// rolled back), so that the next edge starts from the same storage state.
// With Options.Sample, sampled edges are committed instead.
func Run(ctx context.Context, g *specmodel.Graph, o Options) (Report, error) {
	if g.Result().Violation != nil {
		return Report{}, fmt.Errorf("conform: the cfg's spec violates %s: drive the fenced cfg", g.Result().Violation.Invariant)
	}
	if o.NewStorage == nil {
		o.NewStorage = func(context.Context) (core.Storage, error) { return memory.New(memory.WithCopiedReads()), nil }
	}
	if o.Keep == 0 {
		o.Keep = 10
	}
	r := &runner{g: g, m: g.Model(), o: o, rep: Report{States: g.Len(), Edges: g.Result().Generated - 1}}
	r.fences = core.AllFences().Without(o.Unfenced)
	start := time.Now()
	var err error
	if o.Sample > 0 {
		err = r.sample(ctx)
	} else {
		err = r.all(ctx)
	}
	r.rep.Elapsed = time.Since(start)
	return r.rep, err
}

type runner struct {
	g      *specmodel.Graph
	m      *specmodel.Model
	o      Options
	fences core.Fences
	rep    Report
	path   int // paths replayed, for thread names
}

func (r *runner) diverge(state int, step, format string, args ...any) {
	r.rep.Divergences++
	if len(r.rep.First) < r.o.Keep {
		r.rep.First = append(r.rep.First, Divergence{Path: r.pathString(state), Step: step, Detail: fmt.Sprintf(format, args...)})
	}
}

func (r *runner) pathString(i int) string {
	var parts []string
	for _, ts := range r.g.Path(i)[1:] {
		parts = append(parts, r.m.Describe(ts.Step))
	}
	if len(parts) == 0 {
		return "Init"
	}
	return strings.Join(parts, ", ")
}

// reach brings a fresh thread to state i along its shortest path.
func (r *runner) reach(ctx context.Context, i int) (*driver, bool, error) {
	s, err := r.o.NewStorage(ctx)
	if err != nil {
		return nil, false, err
	}
	r.path++
	d, err := newDriver(ctx, r.m.Config(), s, core.ThreadID(fmt.Sprintf("c%d-%d", i, r.path)), r.fences)
	if err != nil {
		return nil, false, err
	}
	for _, st := range r.g.PathSteps(i) {
		out := d.do(ctx, st)
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if out.action != st.Action {
			// The edge from the state before diverged; it is reported there.
			return d, false, nil
		}
	}
	got, err := d.observe(ctx)
	if err != nil || got.Key() != r.g.Key(i) {
		// Reported at the edge into this state.
		return d, false, nil
	}
	return d, true, nil
}

// all drives every edge of every state, and asks for every refusal. It
// walks the tree of shortest paths depth first: a state's first child is
// reached by committing its edge on the parent's thread, the others by
// replaying the parent's path on a fresh one.
func (r *runner) all(ctx context.Context) error {
	children := make([][]int32, r.g.Len())
	for i := 1; i < r.g.Len(); i++ {
		p, _ := r.g.Parent(i)
		children[p] = append(children[p], int32(i))
	}
	d, ok, err := r.reach(ctx, 0)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("conform: Go's initial state is not the spec's Init")
	}
	return r.visit(ctx, d, 0, children)
}

func (r *runner) visit(ctx context.Context, d *driver, i int, children [][]int32) error {
	if err := r.state(ctx, d, i); err != nil {
		return err
	}
	for k, c := range children[i] {
		if k > 0 {
			var ok bool
			var err error
			if d, ok, err = r.reach(ctx, i); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("conform: state %d, reached before, could not be reached again", i)
			}
		}
		_, st := r.g.Parent(int(c))
		s := r.g.State(i)
		before := r.rep.Divergences
		if err := r.commit(ctx, d, i, st, r.m.Do(&s, st).Next); err != nil {
			return err
		}
		if r.rep.Divergences > before {
			continue // reported as the edge's divergence; its subtree is not driven
		}
		if err := r.visit(ctx, d, int(c), children); err != nil {
			return err
		}
	}
	return nil
}

// state drives every edge from state i and asks Go for the writes the spec
// refuses there, all as probes.
func (r *runner) state(ctx context.Context, d *driver, i int) error {
	s := r.g.State(i)
	for _, st := range r.m.Steps() {
		out := r.m.Do(&s, st)
		switch {
		case out.Enabled:
			if err := r.edge(ctx, d, i, st, out.Next, true); err != nil {
				return err
			}
		case askable(st, &s, out.Failed):
			if err := r.refusal(ctx, d, i, st, out.Failed); err != nil {
				return err
			}
		}
	}
	return nil
}

// commit takes a tree edge for good, checking it again as committed (it
// was driven as a probe already, and counted then).
func (r *runner) commit(ctx context.Context, d *driver, i int, st specmodel.Step, want specmodel.State) error {
	err := r.edge(ctx, d, i, st, want, false)
	r.rep.Driven--
	return err
}

// edge drives one enabled step and checks (a) and (c): as a probe, on a
// copy of d (probing), or committed, on d. A committed edge that diverges
// leaves d where Go took it: nothing is driven from d after it (its
// subtree is not visited; a sampled edge's driver is dropped).
func (r *runner) edge(ctx context.Context, d *driver, i int, st specmodel.Step, want specmodel.State, probe bool) error {
	x := d
	if probe {
		x = d.probing(st)
	}
	d.store.probe, d.store.seen = probe, false
	out := x.do(ctx, st)
	d.store.probe = false
	if err := ctx.Err(); err != nil {
		return err
	}
	r.rep.Driven++
	name := r.m.Describe(st)
	if out.action != st.Action {
		got := "refused"
		if out.action != "" {
			got = "taken as " + string(out.action)
		}
		r.diverge(i, name, "the spec enables %s; Go: %s (%v)", name, got, out.err)
		return nil
	}
	var after specmodel.State
	var err error
	if d.store.seen {
		after, err = x.abstract(d.store.after, d.store.lease)
	} else {
		after, err = x.observe(ctx)
	}
	if err != nil {
		r.diverge(i, name, "Go's state after it: %v", err)
	} else if after.Key() != want.Key() {
		r.diverge(i, name, "Go's state after it is not the spec's successor:\n    spec: %s\n    Go:   %s", want.String(), after.String())
	}
	return nil
}

// refusal asks Go for a write the spec does not enable, as a probe on a
// copy of d, and requires a refusal that writes nothing.
func (r *runner) refusal(ctx context.Context, d *driver, i int, st specmodel.Step, failed string) error {
	d.store.probe, d.store.seen = true, false
	out := d.probing(st).do(ctx, st)
	d.store.probe = false
	if err := ctx.Err(); err != nil {
		return err
	}
	r.rep.Refusals++
	if out.action == st.Action || d.store.seen {
		name := r.m.Describe(st)
		r.diverge(i, name, "the spec does not enable %s (%s is false); Go made the write", name, failed)
	}
	return nil
}

// askable reports whether a runner process could ask Go for the step the
// spec does not enable, given the conjunct that failed: the process is in
// the round the call belongs to, and the conjunct is about storage, not a
// bound of the model (MaxMsgs, MaxClaims, MaxAsks) or the process's own pc.
func askable(st specmodel.Step, s *specmodel.State, failed string) bool {
	switch st.Action {
	case core.ActionClaim:
		return failed == `~ClaimTakesLive => (lease.holder = 0 \/ lease.expired)`
	case core.ActionRenew:
		return failed == `HasLease(p)`
	case core.ActionAbandon:
		switch failed {
		case `r \in RunIds`:
			return st.R == len(s.Runs)+1 // one run id past the last is enough
		case `runs[r].state = "active"`, `runs[r].holder # hold[p]`, `FenceAbandon => HasLease(p)`:
			return true
		}
	case core.ActionPlan:
		return failed == `ActiveRuns = {}` || failed == `taken < msgs`
	case core.ActionReply:
		return failed == `reqs[plan[p].req].state = "open"`
	case core.ActionAsk:
		return failed == `runs[run[p]].state = "active"`
	}
	return false
}

// sample drives o.Sample edges drawn at random, each committed on a thread
// of its own brought to the edge's state.
func (r *runner) sample(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(r.o.Seed, 0x5eed))
	type edge struct {
		i  int
		st specmodel.Step
	}
	for k := 0; k < r.o.Sample; k++ {
		// Draw a state, then one of its edges: every state has at least
		// Crash or Post or Claim unless it is terminal; redraw those.
		var e edge
		for tries := 0; ; tries++ {
			i := rng.IntN(r.g.Len())
			var steps []specmodel.Step
			r.g.Successors(i, func(st specmodel.Step, _ int) { steps = append(steps, st) })
			if len(steps) > 0 {
				e = edge{i, steps[rng.IntN(len(steps))]}
				break
			}
			if tries > 1000 {
				return fmt.Errorf("conform: no state with an edge")
			}
		}
		d, ok, err := r.reach(ctx, e.i)
		if err != nil {
			return err
		}
		if !ok {
			r.diverge(e.i, "(replay)", "Go could not be brought to this state along its shortest path")
			continue
		}
		s := r.g.State(e.i)
		out := r.m.Do(&s, e.st)
		if err := r.edge(ctx, d, e.i, e.st, out.Next, false); err != nil {
			return err
		}
	}
	return nil
}
