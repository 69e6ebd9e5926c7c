package specmodel

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/threadclaim/threadclaim/core"
)

// tlcFigures are TLC's figures for the cfgs in spec/, measured with
// `java tlc2.TLC -workers 1` (spec/README.md's table). Generated and the
// distinct count of a violating cfg depend on TLC's order of successors;
// the model's order is the spec's, and gives the same.
var tlcFigures = map[string]struct {
	distinct, generated, depth int
	violation                  string
}{
	"ThreadClaimLapse.cfg":                {417999, 1873491, 32, ""},
	"ThreadClaimLapseLiveness.cfg":        {158347, 703501, 29, ""},
	"ThreadClaimLapseAbandonUnfenced.cfg": {281, 0, 8, core.InvNoLiveAbandon},
	// the cfgs that come with one switch per fence (FenceStart,
	// FenceReply), measured the same way
	"ThreadClaimLapseReplyUnfenced.cfg": {6527, 0, 20, ""},
	"ThreadClaimLapseSmall.cfg":         {6459, 27730, 20, ""},
	"ThreadClaimLapseLivenessSmall.cfg": {6459, 27730, 20, ""}, // the small cfg's graph under LiveSpec
	// EveryPostConsumed violated with no fairness: TLC finds it on the whole
	// graph, which is the small cfg's; the model checks no liveness
	"ThreadClaimLapseNoFairness.cfg":      {6459, 27730, 20, ""},
	"ThreadClaimLapseUnfenced.cfg":        {411, 0, 9, core.InvConsumedAtMostOnce},
	"ThreadClaimLapseStartUnfencedI3.cfg": {411, 0, 9, core.InvOneActiveRun},
	// the steering cfgs (FenceSteer, RefuseSteerAbandoned)
	"ThreadClaimLapseSteerFenced.cfg":        {103052, 458134, 28, ""},
	"ThreadClaimLapseSteerUnguarded.cfg":     {3319, 0, 13, core.InvConsumedAtMostOnce},
	"ThreadClaimLapseGivenTwice.cfg":         {2020, 0, 12, InvGivenAtMostOnce},
	"ThreadClaimLapseSteerStartUnfenced.cfg": {3130, 0, 13, core.InvSteeringException},
	// the whole graphs of two unfenced models, and the liveness property
	// with one message and no fairness (the model checks no liveness)
	"ThreadClaimLapseAbandonUnfencedGraph.cfg": {7763, 31324, 20, ""},
	"ThreadClaimLapseStartUnfencedGraph.cfg":   {1598, 6254, 17, ""},
	"ThreadClaimLapseNoFairnessOneMsg.cfg":     {189, 733, 11, ""},
	// EveryPostConsumedButClaim violated with one claim (TLC -workers 1)
	"ThreadClaimLapseNoClaimFairness.cfg": {33, 91, 8, ""},
	// EveryLeaseEnds violated under LiveSpec (TLC -workers 1)
	"ThreadClaimLapseLeaseKept.cfg": {189, 733, 11, ""},
	// Claim's guard dropped (ClaimTakesLive): NoLiveTakeover violated, and
	// the small cfg's states with more edges when it is not checked
	"ThreadClaimLapseClaimTakesLive.cfg":      {11, 0, 3, core.PropNoLiveTakeover},
	"ThreadClaimLapseClaimTakesLiveGraph.cfg": {6459, 28274, 18, ""},
}

func specCfgs(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("../../spec/*.cfg")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cfg in ../spec: %v", err)
	}
	return files
}

// TestSpecCfgs explores every cfg in spec/ and requires TLC's figures where
// they are known, and the cfg's declared outcome (its `\* expect:` line)
// for every cfg, so that a new cfg is covered too.
func TestSpecCfgs(t *testing.T) {
	if raceIn {
		t.Skip("-race: the model runs in one goroutine; the ordinary run explores every cfg")
	}
	for _, f := range specCfgs(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := ReadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			m := New(c)
			r := m.Explore().Result()
			v := r.Violation
			switch {
			case len(c.Expect) == 0:
				t.Errorf("the cfg declares no outcome (`\\* expect: ok` or `\\* expect: violation INV...`)")
			case (c.Expect[0] == "ok" || c.ExpectsUnchecked()) && v != nil:
				t.Errorf("expected no violation; %s violated at depth %d:\n%s", v.Invariant, v.Depth, m.FormatTrace(v.Trace))
			case c.Expect[0] == "violation" && !c.ExpectsUnchecked() && (v == nil || !slices.Contains(c.Expect[1:], v.Invariant)):
				t.Errorf("expected a violation of one of %v, got %+v", c.Expect[1:], v)
			}
			for _, a := range c.Fires {
				if r.Transitions[core.Action(a)] == 0 && v == nil {
					t.Errorf("the cfg's fires line names %s, which takes no step", a)
				}
			}
			want, ok := tlcFigures[filepath.Base(f)]
			if !ok {
				t.Errorf("no TLC figures for %s in tlcFigures (the model found %d distinct states, %d generated, depth %d): measure them with TLC and add them", f, r.Distinct, r.Generated, r.Depth)
				return
			}
			if r.Distinct != want.distinct || r.Depth != want.depth {
				t.Errorf("%d distinct states, depth %d; TLC: %d, depth %d", r.Distinct, r.Depth, want.distinct, want.depth)
			}
			if want.generated != 0 && r.Generated != want.generated {
				t.Errorf("%d states generated; TLC: %d", r.Generated, want.generated)
			}
			if want.violation == "" {
				return
			}
			if v == nil || v.Invariant != want.violation || v.Depth != want.depth {
				t.Fatalf("violation %+v; TLC: %s at depth %d", v, want.violation, want.depth)
			}
			// The counterexample is a path of the spec: each step enabled in
			// the state before it, giving the state after it.
			for i := 1; i < len(v.Trace); i++ {
				prev := v.Trace[i-1].State
				out := m.Do(&prev, v.Trace[i].Step)
				if !out.Enabled || out.Next.Key() != v.Trace[i].State.Key() {
					t.Fatalf("step %d (%s) of the counterexample is not a step of the spec", i+1, m.Describe(v.Trace[i].Step))
				}
			}
			last := v.Trace[len(v.Trace)-1].State
			if m.Invariant(v.Invariant, &last) {
				t.Errorf("%s holds in the counterexample's last state", v.Invariant)
			}
		})
	}
}

// TestExploreAllGoesOn: past a violation, Continue keeps the first one and
// still enumerates every reachable state.
func TestExploreAllGoesOn(t *testing.T) {
	c, err := ReadConfig("../../spec/ThreadClaimLapseUnfenced.cfg")
	if err != nil {
		t.Fatal(err)
	}
	first := New(c).Explore().Result()
	all := New(c).ExploreWith(Options{Continue: true, MaxDepth: first.Violation.Depth + 2}).Result()
	if all.Violation == nil || all.Violation.Invariant != first.Violation.Invariant || all.Violation.Depth != first.Violation.Depth {
		t.Fatalf("ExploreAll's violation %+v, Explore's %+v", all.Violation, first.Violation)
	}
	if all.Distinct <= first.Distinct {
		t.Errorf("ExploreAll found %d states, no more than Explore's %d", all.Distinct, first.Distinct)
	}
}

// TestExploreStopsAtMaxDepth: with MaxDepth, the exploration finds every
// state of that depth and expands none of them: it finds exactly the
// states of the whole graph up to that depth. Written against a mutant
// of the seventeenth pass that expanded them too.
func TestExploreStopsAtMaxDepth(t *testing.T) {
	c, err := ReadConfig("../../spec/ThreadClaimLapseSmall.cfg")
	if err != nil {
		t.Fatal(err)
	}
	full := New(c).Explore()
	const depth = 6
	want := 0
	for i := range full.Len() {
		if full.Depth(i) <= depth {
			want++
		}
	}
	g := New(c).ExploreWith(Options{MaxDepth: depth})
	if g.Len() != want || g.Depth(g.Len()-1) != depth || g.MaxDepth() != depth {
		t.Errorf("to depth %d: %d states, the last of depth %d; the whole graph has %d up to it", depth, g.Len(), g.Depth(g.Len()-1), want)
	}
}

func fencedModel(t testing.TB) *Model {
	c, err := ReadConfig("../../spec/ThreadClaimLapse.cfg")
	if err != nil {
		t.Fatal(err)
	}
	return New(c)
}

// walk takes the steps from Init, failing when one is not enabled.
func walk(t *testing.T, m *Model, steps ...Step) State {
	t.Helper()
	s := m.Init()
	for _, st := range steps {
		out := m.Do(&s, st)
		if !out.Enabled {
			t.Fatalf("%s not enabled: %s is false in %s", m.Describe(st), out.Failed, s.String())
		}
		s = out.Next
	}
	return s
}

// TestRefusalNamesConjunct: a step that is not enabled names the first
// false conjunct of its action, in the spec's words.
func TestRefusalNamesConjunct(t *testing.T) {
	m := fencedModel(t)
	const p1, p2 = 0, 1
	st := func(a core.Action, p int) Step { return Step{Action: a, P: p} }
	// p1 plans, its lease lapses and p2 claims: p1's start is fenced.
	s := walk(t, m, st(core.ActionPost, -1), st(core.ActionClaim, p1), st(core.ActionPlan, p1),
		st(core.ActionLapse, -1), st(core.ActionClaim, p2))
	cases := []struct {
		step Step
		want string
	}{
		{st(core.ActionRunStart, p1), `FenceStart => HasLease(p)`},
		{st(core.ActionReply, p1), `plan[p].kind = "reply"`},
		{st(core.ActionClaim, p1), `pc[p] = "idle"`},
		{st(core.ActionLapse, -1), ""},
		{st(core.ActionRenew, p1), `HasLease(p)`},
		{st(core.ActionRunEnd, p2), `pc[p] = "running"`},
		{Step{core.ActionAbandon, p2, 1}, `r \in RunIds`},
		{st(core.ActionAbandonFenced, p2), `~HasLease(p)`},
		{st(core.ActionStartFenced, p2), `pc[p] = "planned"`},
		{st(core.ActionPost, -1), ""},
		{st(core.ActionStartFenced, p1), ""},
	}
	for _, c := range cases {
		out := m.Do(&s, c.step)
		if out.Enabled != (c.want == "") || out.Failed != c.want {
			t.Errorf("%s: enabled %v, failed %q; want failed %q", m.Describe(c.step), out.Enabled, out.Failed, c.want)
		}
	}
	// StartFenced ends p1's round and writes nothing.
	out := m.Do(&s, st(core.ActionStartFenced, p1))
	if n := out.Next; n.Procs[p1] != (Proc{}) || n.Msgs != s.Msgs || n.Taken != s.Taken || n.Lease != s.Lease {
		t.Errorf("StartFenced: %s", n.String())
	}
}

// TestUnfencedStartsStale: with FenceStart = FALSE the same stale start is
// a RunStart, and StartFenced is not enabled because `FenceStart` is false.
func TestUnfencedStartsStale(t *testing.T) {
	c, err := ReadConfig("../../spec/ThreadClaimLapseUnfenced.cfg")
	if err != nil {
		t.Fatal(err)
	}
	m := New(c)
	s := walk(t, m, Step{core.ActionPost, -1, 0}, Step{core.ActionClaim, 0, 0}, Step{core.ActionPlan, 0, 0},
		Step{core.ActionLapse, -1, 0}, Step{core.ActionClaim, 1, 0}, Step{core.ActionRunStart, 0, 0})
	if s.Taken != 1 || len(s.Runs) != 1 || s.Runs[0].Holder != 1 {
		t.Errorf("unfenced stale start: %s", s.String())
	}
	if out := m.Do(&s, Step{core.ActionStartFenced, 0, 0}); out.Failed != `pc[p] = "planned"` {
		t.Errorf("StartFenced after the start: %q", out.Failed)
	}
}

// TestRenewUnexpires: a Renew of a lease that lapsed under its live holder
// (nobody took it) makes it live again. The states are the same either
// way (Lapse then Renew comes back to a state reachable without them), so
// only this step, and TLC's graph edge for edge, say so.
func TestRenewUnexpires(t *testing.T) {
	c, err := ReadConfig("../../spec/ThreadClaimLapseSmall.cfg")
	if err != nil {
		t.Fatal(err)
	}
	m := New(c)
	s := walk(t, m, Step{core.ActionPost, -1, 0}, Step{core.ActionClaim, 0, 0}, Step{core.ActionLapse, -1, 0})
	if !s.Lease.Expired {
		t.Fatalf("after Lapse: %s", s.String())
	}
	out := m.Do(&s, Step{core.ActionRenew, 0, 0})
	if !out.Enabled || out.Next.Lease.Expired || out.Next.Lease.Holder != s.Lease.Holder {
		t.Errorf("Renew of the lapsed lease: %+v, from %s", out, s.String())
	}
}

// TestKeyRoundTrip: every reachable state's key decodes to the state, and
// distinct states have distinct keys (the graph's count would be off
// otherwise; here checked on the render).
func TestKeyRoundTrip(t *testing.T) {
	if raceIn {
		t.Skip("-race: the model runs in one goroutine")
	}
	c, err := ReadConfig("../../spec/ThreadClaimLapseUnfenced.cfg")
	if err != nil {
		t.Fatal(err)
	}
	g := New(c).ExploreWith(Options{Continue: true, MaxDepth: 12})
	renders := map[string]bool{}
	for i := 0; i < g.Len(); i++ {
		s := g.State(i)
		if s.Key() != g.Key(i) {
			t.Fatalf("state %d: key does not round-trip", i)
		}
		r := s.TLA(c.Procs)
		if renders[r] {
			t.Fatalf("two states render as\n%s", r)
		}
		renders[r] = true
	}
}

func TestParseConfigErrors(t *testing.T) {
	base := "SPECIFICATION Spec\nCONSTANTS\n Procs = {\"p1\"}\n MaxMsgs = 1\n MaxClaims = 1\n MaxAsks = 0\n Fenced = TRUE\n FenceAbandon = TRUE\nINVARIANTS TypeOK\n"
	if _, err := ParseConfig("ok.cfg", base); err != nil {
		t.Fatalf("a good cfg: %v", err)
	}
	for name, text := range map[string]string{
		"unknown constant":  base + "CONSTANT Foo = 1\n",
		"unknown invariant": base + "INVARIANT Bogus\n",
		"symmetry":          base + "SYMMETRY Perms\n",
		"bad number":        strings.Replace(base, "MaxMsgs = 1", "MaxMsgs = x", 1),
		"missing constant":  strings.Replace(base, " MaxAsks = 0\n", "", 1),
		"twice":             base + "CONSTANT MaxAsks = 1\n",
		"no spec":           strings.Replace(base, "SPECIFICATION Spec\n", "", 1),
		"bad bool":          strings.Replace(base, "Fenced = TRUE", "Fenced = yes", 1),
		"empty procs":       strings.Replace(base, `{"p1"}`, "{}", 1),
		"open comment":      base + "(* never closed\n",
	} {
		if _, err := ParseConfig("bad.cfg", text); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
}

// BenchmarkExploreFenced explores spec/ThreadClaimLapse.cfg (417,999
// states): go test ./internal/specmodel -run '^$' -bench Explore -benchtime 5x
func BenchmarkExploreFenced(b *testing.B) {
	m := fencedModel(b)
	for b.Loop() {
		if r := m.Explore().Result(); r.Distinct != 417999 {
			b.Fatalf("%d states", r.Distinct)
		}
	}
	b.ReportMetric(417999, "states/op")
}

// TestEdgesAreSuccessors: the edges Options.Edges keeps are, state by
// state, the successors Successors computes, and as many as the
// transitions counted; a graph cut short keeps none.
func TestEdgesAreSuccessors(t *testing.T) {
	c, err := ReadConfig("../../spec/ThreadClaimLapseSmall.cfg")
	if err != nil {
		t.Fatal(err)
	}
	g := New(c).ExploreWith(Options{Edges: true})
	if !g.HasEdges() {
		t.Fatal("no edges kept")
	}
	total := 0
	for _, n := range g.Result().Transitions {
		total += n
	}
	if g.NumEdges() != total {
		t.Errorf("%d edges kept, %d transitions counted", g.NumEdges(), total)
	}
	for i := range g.Len() {
		e, end := g.Out(i)
		g.Successors(i, func(st Step, j int) {
			if e >= end {
				t.Fatalf("state %d: fewer edges than successors", i)
			}
			if est, ej := g.Edge(e); est != st || ej != j {
				t.Fatalf("state %d: edge %d is %v to %d, successor %v to %d", i, e, est, ej, st, j)
			}
			e++
		})
		if e != end {
			t.Fatalf("state %d: more edges than successors", i)
		}
	}
	if New(c).ExploreWith(Options{Edges: true, MaxDepth: 3}).HasEdges() {
		t.Error("a graph cut short at depth 3 kept its edges")
	}
	u, err := ReadConfig("../../spec/ThreadClaimLapseUnfenced.cfg")
	if err != nil {
		t.Fatal(err)
	}
	if New(u).ExploreWith(Options{Edges: true}).HasEdges() {
		t.Error("a graph that stopped at a violation kept its edges")
	}
}
