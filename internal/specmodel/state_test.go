package specmodel

import (
	"strings"
	"testing"

	"github.com/threadclaim/threadclaim/core"
)

// TestParseStateReadsTLCsState: a state as TLC prints it reads back as
// the model's, the pairs of steered in either order (TLC prints a set in
// an order of its own; the model keeps it sorted, and two orders are one
// state); a state that is not one of the model's is an error, not a state
// with a part dropped: a variable the module lacks, consumed or given
// with another length than MaxMsgs. Written against mutants of the
// seventeenth pass that dropped the sorting and each of those checks.
func TestParseStateReadsTLCsState(t *testing.T) {
	m := fencedModel(t)
	c := m.Config()
	s := walk(t, m, Step{core.ActionPost, -1, 0}, Step{core.ActionClaim, 0, 0}, Step{core.ActionPlan, 0, 0})
	s.Steered = []Pair{{Run: 1, Msg: 2}, {Run: 2, Msg: 1}}
	text := s.TLA(c.Procs)
	back, err := ParseState(text, c)
	if err != nil || back.Key() != s.Key() {
		t.Fatalf("the state's own text: %v\n%s", err, back.String())
	}
	swapped := strings.Replace(text, "{<<1, 2>>, <<2, 1>>}", "{<<2, 1>>, <<1, 2>>}", 1)
	if swapped == text {
		t.Fatalf("no steered pairs to swap in\n%s", text)
	}
	if back, err := ParseState(swapped, c); err != nil || back.Key() != s.Key() {
		t.Errorf("steered printed in another order: %v, %s", err, back.String())
	}
	for name, bad := range map[string]string{
		"a variable more":   text + "/\\ extra = 1\n",
		"consumed longer":   strings.Replace(text, "/\\ consumed = <<", "/\\ consumed = <<0, ", 1),
		"given longer":      strings.Replace(text, "/\\ given = <<", "/\\ given = <<0, ", 1),
		"a variable less":   strings.Replace(text, "/\\ liveAbandoned = FALSE\n", "", 1),
		"a pair not a pair": strings.Replace(text, "<<1, 2>>", "<<1, 2, 3>>", 1),
	} {
		if bad == text {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if _, err := ParseState(bad, c); err == nil {
			t.Errorf("%s: read as a state", name)
		}
	}
}

// TestTypeOKRefuses: TypeOK is false in a state that breaks one of its
// conjuncts, none of which a reachable state breaks (so the cfgs' runs
// cannot show one dropped). Written against a mutant of the seventeenth
// pass that dropped taken <= msgs.
func TestTypeOKRefuses(t *testing.T) {
	m := fencedModel(t)
	c := m.Config()
	if !m.TypeOK(ptr(m.Init())) {
		t.Fatal("TypeOK is false in Init")
	}
	for name, edit := range map[string]func(s *State){
		"taken past msgs":      func(s *State) { s.Msgs, s.Taken = 1, 2 },
		"msgs past MaxMsgs":    func(s *State) { s.Msgs = uint8(c.MaxMsgs + 1) },
		"nextHolder 0":         func(s *State) { s.NextHolder = 0 },
		"nextHolder too far":   func(s *State) { s.NextHolder = uint8(c.MaxClaims + 2) },
		"a lease's holder":     func(s *State) { s.Lease.Holder = uint8(c.MaxClaims + 1) },
		"a run of no holder":   func(s *State) { s.Runs = []Run{{Holder: 0, Prompt: 1}} },
		"a request of no run":  func(s *State) { s.Reqs = []Req{{Run: 0}} },
		"a steered message 0":  func(s *State) { s.Steered = []Pair{{Run: 1, Msg: 0}} },
		"consumed of a length": func(s *State) { s.Consumed = s.Consumed[:0] },
	} {
		s := m.Init()
		edit(&s)
		if m.TypeOK(&s) {
			t.Errorf("%s: TypeOK holds in %s", name, s.String())
		}
		if m.Invariant(core.InvTypeOK, &s) {
			t.Errorf("%s: Invariant(TypeOK) holds", name)
		}
	}
	if m.Invariant("NoSuchInvariant", ptr(m.Init())) {
		t.Error("an invariant the model does not know holds")
	}
}

func ptr(s State) *State { return &s }

// TestLiveAbandonedStays: liveAbandoned records whether a live run was
// ever abandoned, as the spec's Abandon has it (liveAbandoned' =
// liveAbandoned \/ lease.holder = runs[r].holder): a later Abandon of a
// run whose claim no longer holds the lease leaves it set. No cfg in
// spec/ reaches a second Abandon after a live one, so only this step
// shows it. Written against a mutant of the seventeenth pass that set it
// from the last Abandon alone.
func TestLiveAbandonedStays(t *testing.T) {
	m := fencedModel(t)
	s := m.Init()
	s.Msgs, s.Taken, s.NextHolder = 1, 1, 3
	s.Consumed[0], s.Given[0] = 1, 1
	s.LiveAbandoned = true
	s.Lease = Lease{Holder: 2}
	s.Runs = []Run{{Holder: 1, Prompt: 1, State: Active}}
	s.Procs[0] = Proc{PC: Claimed, Hold: 2}
	out := m.Abandon(&s, 0, 1)
	if !out.Enabled {
		t.Fatalf("Abandon(p1, 1) not enabled: %s", out.Failed)
	}
	if !out.Next.LiveAbandoned {
		t.Errorf("an Abandon of a lapsed claim's run cleared liveAbandoned: %s", out.Next.String())
	}
	s.LiveAbandoned = false
	if out := m.Abandon(&s, 0, 1); out.Next.LiveAbandoned {
		t.Errorf("an Abandon of a lapsed claim's run set liveAbandoned: %s", out.Next.String())
	}
}

// TestAbandonStepsEveryRun: Next has Abandon(p, r) for every process and
// every r in 1..MaxRuns (MaxClaims * MaxMsgs), in order, after each
// process's other actions that come before it. Written against a mutant
// of the seventeenth pass whose MaxRuns was one short, which no cfg in
// spec/ reaches (its last run would need every claim to start a run of
// every message).
func TestAbandonStepsEveryRun(t *testing.T) {
	m := fencedModel(t)
	c := m.Config()
	if c.MaxRuns() != c.MaxClaims*c.MaxMsgs {
		t.Errorf("MaxRuns %d, want MaxClaims * MaxMsgs = %d", c.MaxRuns(), c.MaxClaims*c.MaxMsgs)
	}
	runs := map[int][]int{}
	for _, st := range m.Steps() {
		if st.Action == core.ActionAbandon {
			runs[st.P] = append(runs[st.P], st.R)
		}
	}
	for p := range c.Procs {
		if len(runs[p]) != c.MaxRuns() || runs[p][0] != 1 || runs[p][len(runs[p])-1] != c.MaxRuns() {
			t.Errorf("process %d's Abandon steps have runs %v, want 1..%d", p, runs[p], c.MaxRuns())
		}
	}
}
