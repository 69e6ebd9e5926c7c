package specmodel_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// crossCheck compares the Go trace checker with the model on every state
// of g and every step there: the trace of the state's shortest path plus
// the step's line must be accepted by tracecheck.Check exactly when the
// spec enables the step and its successor keeps the invariants. A Claim is
// also accepted where the spec enables it after a Lapse, since Lapse is
// never traced and the checker infers it before a Claim. It returns the
// disagreements, each as the path and the line.
//
// The model's bounds (MaxMsgs, MaxClaims, MaxAsks) are not the spec's
// protocol but TLC's limits, and a trace of the unbounded Go code may
// exceed them: a step refused only by a bound is judged with the bound
// raised. TypeOK, which bounds values the same way, is not asked of the
// checker either.
func crossCheck(t *testing.T, g *specmodel.Graph, fences core.Fences, keep int) (checked int, bad []string) {
	m := g.Model()
	rc := m.Config()
	rc.MaxClaims++
	rc.MaxAsks++
	relaxed := specmodel.New(rc)
states:
	for i := 0; i < g.Len(); i++ {
		path := g.Path(i)
		for _, ts := range path {
			if !keeps(m, &ts.State) {
				continue states // the checker rightly stops at a violation
			}
		}
		lines := m.TraceLines(path)
		var version uint64
		for _, l := range lines {
			if !l.Read {
				version = l.Tick
			}
		}
		s := g.State(i)
		for _, st := range m.Steps() {
			if st.Action == core.ActionLapse || (st.Action == core.ActionAbandon && st.R > len(s.Runs)+1) {
				continue
			}
			want := legal(relaxed, &s, st)
			lapsed := false
			if !want && st.Action == core.ActionClaim {
				if l := m.Lapse(&s); l.Enabled {
					want, lapsed = legal(relaxed, &l.Next, st), true
				}
			}
			line := m.TraceLine(&s, st, version)
			_, err := tracecheck.Check(append(lines[:len(lines):len(lines)], line), tracecheck.WithFences(fences))
			checked++
			// A step the spec refuses must be refused for the spec's
			// reason: the conjunct that fails is among the checker's.
			if out := relaxed.Do(&s, st); err != nil && !want && !lapsed && !out.Enabled && st.Action != core.ActionPost {
				// The checker names RunStart's and Reply's fences with
				// the spec's older single constant, Fenced.
				why := strings.NewReplacer("FenceStart", "Fenced", "FenceReply", "Fenced").Replace(out.Failed)
				var v *tracecheck.Violation
				if !errors.As(err, &v) || v.Kind != tracecheck.ErrGuard || !slices.Contains(v.Failed, why) {
					if len(bad) >= keep {
						bad = append(bad, "")
						continue
					}
					bad = append(bad, fmt.Sprintf("%s after [%s]: the spec refuses it for %s, the checker for another reason\n\tline: %+v\n\tchecker: %v",
						m.Describe(st), describePath(m, path), out.Failed, line, err))
					continue
				}
			}
			if (err == nil) != want {
				if len(bad) < keep {
					out := m.Do(&s, st)
					bad = append(bad, fmt.Sprintf("%s after [%s]: the spec %s (%s), the checker %s\n\tline: %+v\n\tchecker: %v",
						m.Describe(st), describePath(m, path), map[bool]string{true: "allows it", false: "does not"}[want],
						out.Failed, map[bool]string{true: "accepts it", false: "rejects it"}[err == nil], line, err))
				} else {
					bad = append(bad, "")
				}
			}
		}
	}
	return checked, bad
}

// legal reports whether the spec (with m's bounds, MaxMsgs aside) takes
// the step and keeps the invariants the checker evaluates.
func legal(m *specmodel.Model, s *specmodel.State, st specmodel.Step) bool {
	if st.Action == core.ActionPost {
		return true // its one conjunct is the bound msgs < MaxMsgs
	}
	out := m.Do(s, st)
	return out.Enabled && keeps(m, &out.Next)
}

// keeps reports whether s keeps the invariants the checker evaluates.
func keeps(m *specmodel.Model, s *specmodel.State) bool {
	for _, inv := range []string{core.InvConsumedAtMostOnce, core.InvOneActiveRun, core.InvNoLiveAbandon, core.InvSteeringException} {
		if !m.Invariant(inv, s) {
			return false
		}
	}
	return true
}

// TestCrossCheckCatchesWrongChecker: the cross-check is not vacuous. A
// checker told the fences are off, or told FenceAbandon is off, disagrees
// with the fenced spec, and a spec with the fences off disagrees with the
// fenced checker.
func TestCrossCheckCatchesWrongChecker(t *testing.T) {
	c, err := specmodel.ReadConfig("../../spec/ThreadClaimLapse.cfg")
	if err != nil {
		t.Fatal(err)
	}
	c.MaxClaims, c.MaxMsgs, c.MaxAsks = 3, 1, 1
	g := specmodel.New(c).Explore()
	for _, wrong := range []core.Fences{{Abandon: true}, {Start: true, Reply: true}} {
		if _, bad := crossCheck(t, g, wrong, 1); len(bad) == 0 {
			t.Errorf("checker with %+v agrees with the fenced spec everywhere", wrong)
		}
	}
	c.Fences.Start, c.Fences.Reply = false, false
	g = specmodel.New(c).ExploreWith(specmodel.Options{Continue: true, MaxDepth: 10})
	if _, bad := crossCheck(t, g, core.AllFences(), 1); len(bad) == 0 {
		t.Errorf("the fenced checker agrees with the unfenced spec everywhere")
	}
}

func describePath(m *specmodel.Model, path []specmodel.TraceStep) string {
	var parts []string
	for _, ts := range path[1:] {
		parts = append(parts, m.Describe(ts.Step))
	}
	return strings.Join(parts, ", ")
}

func smallCfg(t *testing.T, file string) specmodel.Config {
	c, err := specmodel.ReadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	// Every action and refusal appears with three claims and two messages
	// (7,316 states fenced); the full cfg with CROSSCHECK_FULL=1.
	switch {
	case os.Getenv("CROSSCHECK_FULL") == "1":
	case raceEnabled:
		c.MaxClaims, c.MaxMsgs = 2, 1
	default:
		c.MaxClaims, c.MaxMsgs = 3, 2
	}
	return c
}

// TestCheckerIsTheSpec: the Go trace checker accepts a step exactly where
// the spec enables it, in every reachable state, fenced and unfenced.
func TestCheckerIsTheSpec(t *testing.T) {
	// The checker is held to the cfg's own fences.
	for _, tc := range []struct {
		cfg    string
		fences core.Fences // the cfg's
	}{
		{"../../spec/ThreadClaimLapse.cfg", core.AllFences()},
		{"../../spec/ThreadClaimLapseUnfenced.cfg", core.Fences{Abandon: true}},
		{"../../spec/ThreadClaimLapseAbandonUnfenced.cfg", core.Fences{Start: true, Reply: true}},
		{"../../spec/ThreadClaimLapseStartUnfencedI3.cfg", core.Fences{Reply: true, Abandon: true}},
		{"../../spec/ThreadClaimLapseReplyUnfenced.cfg", core.Fences{Start: true, Abandon: true}},
		// steering, as the Go code guards its record (FenceSteer FALSE,
		// RefuseSteerAbandoned TRUE), with one ask; and with RunStart
		// unfenced, where SteeringException breaks
		{"../../spec/ThreadClaimLapseGivenTwice.cfg", core.AllFences()},
		{"../../spec/ThreadClaimLapseSteerStartUnfenced.cfg", core.Fences{Reply: true, Abandon: true}},
	} {
		t.Run(tc.cfg[strings.LastIndex(tc.cfg, "/")+1:], func(t *testing.T) {
			c := smallCfg(t, tc.cfg)
			if c.Fences != tc.fences {
				t.Fatalf("%s sets the fences %v, want %v", tc.cfg, c.Fences, tc.fences)
			}
			m := specmodel.New(c)
			g := m.Explore()
			if v := g.Result().Violation; v != nil {
				// The unfenced specs' state spaces are not finite: check
				// every state up to the violation's depth.
				g = m.ExploreWith(specmodel.Options{Continue: true, MaxDepth: v.Depth})
			}
			checked, bad := crossCheck(t, g, c.Fences, 10)
			t.Logf("%d states, %d (state, step) pairs checked, %d disagreements", g.Len(), checked, len(bad))
			for _, b := range bad {
				if b != "" {
					t.Error(b)
				}
			}
		})
	}
}

// A random walk is a path of the spec: each step is enabled in the state
// before it and leads to the state after it, and its trace is one the Go
// trace checker accepts (as TLC's trace spec does: tlc differential).
func TestRandomWalkIsASpecPath(t *testing.T) {
	c, err := specmodel.ReadConfig("../../spec/ThreadClaimLapse.cfg")
	if err != nil {
		t.Fatal(err)
	}
	m := specmodel.New(c)
	rng := rand.New(rand.NewPCG(3, 5))
	long := 0
	for range 300 {
		path := m.RandomWalk(rng, 40)
		for k := 1; k < len(path); k++ {
			s := path[k-1].State
			o := m.Do(&s, path[k].Step)
			if !o.Enabled || o.Next.Key() != path[k].State.Key() {
				t.Fatalf("step %d (%s) is not the spec's: enabled %v, failed %q", k, m.Describe(path[k].Step), o.Enabled, o.Failed)
			}
		}
		if len(path) > 20 {
			long++
		}
		if _, err := tracecheck.Check(m.TraceLines(path)); err != nil {
			t.Fatalf("a walk's trace is rejected: %v", err)
		}
	}
	if long == 0 {
		t.Error("no walk went past 20 steps")
	}
}
