package cli

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// TestActionTable guards the one action table (core.ActionTable) against
// every place an action lives: the specification's Next, the TLC trace
// spec's read and write sets, the Go checker, the runner's steps, the
// porcupine model, the trace viewer and the events the simulations check.
// Adding an action in one place only fails here.
func TestActionTable(t *testing.T) {
	table := core.ActionTable()
	byName := map[core.Action]core.ActionInfo{}
	for _, info := range table {
		if _, dup := byName[info.Action]; dup {
			t.Errorf("%s has two rows", info.Action)
		}
		byName[info.Action] = info
	}
	if got := core.Actions(); len(got) != len(table) {
		t.Errorf("Actions() has %d names, the table %d rows", len(got), len(table))
	}

	// The specification: the actions Next is made of, in declaration order.
	specText := readFile(t, "../../spec/ThreadClaimLapse.tla")
	var declared []core.Action
	for _, m := range regexp.MustCompile(`(?m)^([A-Z][A-Za-z]*)(\([a-z, ]*\))? ==`).FindAllStringSubmatch(specText, -1) {
		if _, ok := byName[core.Action(m[1])]; ok {
			declared = append(declared, core.Action(m[1]))
		}
	}
	if !slices.Equal(declared, core.Actions()) {
		t.Errorf("the spec declares the table's actions in the order %v; the table's order is %v", declared, core.Actions())
	}
	next := block(specText, "ProcNext(p) ==") + block(specText, "Next ==")
	inNext := map[core.Action]bool{}
	for _, m := range regexp.MustCompile(`\\/\s*(?:\\E [^:]+:\s*)?([A-Z][A-Za-z]*)`).FindAllStringSubmatch(next, -1) {
		if m[1] == "ProcNext" {
			continue
		}
		a := core.Action(m[1])
		if _, ok := byName[a]; !ok {
			t.Errorf("the spec's Next has %s, which the action table lacks", a)
		}
		inNext[a] = true
	}
	for _, info := range table {
		if !inNext[info.Action] {
			t.Errorf("%s is in the action table but not a disjunct of the spec's Next", info.Action)
		}
	}

	// The TLC trace spec's set of read actions (every other logged action
	// is a write, but Release, which it names as both).
	traceSpec := readFile(t, "../../tla/ThreadClaimLapseTrace.tla")
	for _, info := range table {
		if info.Line == core.LineWriteOrRead && !strings.Contains(traceSpec, `line.action = "`+string(info.Action)+`"`) {
			t.Errorf("%s is a write or a read; the trace spec does not single it out", info.Action)
		}
	}
	for set, kind := range map[string]core.LineKind{"ReadActions": core.LineRead} {
		var want []string
		for _, info := range table {
			if info.Line == kind {
				want = append(want, string(info.Action))
			}
		}
		got := tlaStringSet(t, traceSpec, set)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("tla trace spec's %s = %v; the action table's %v lines are %v", set, got, kind, want)
		}
	}

	for _, info := range table {
		a := info.Action
		// Consistency of the row itself.
		if info.Consumes && !info.Fenced {
			t.Errorf("%s consumes a message but is not fenced", a)
		}
		if info.Refuses != "" {
			r, ok := byName[info.Refuses]
			if !ok || r.Line != core.LineWrite || info.Line != core.LineRead || !info.EndsRound {
				t.Errorf("%s refuses %s: a refusal is a read that ends the round, of a write", a, info.Refuses)
			}
		}
		if info.Event != "" && (core.Event{Kind: info.Event}).Consumes() != info.Consumes {
			t.Errorf("%s appends %s, whose Consumes() disagrees with the table", a, info.Event)
		}
		// The trace viewer names every logged action.
		if info.Line != core.LineNone {
			if text := cellText(core.TraceEvent{Action: a, Msg: 1, Req: 1, Run: 1}, info, func(core.Holder) string { return "h1" }); !strings.HasPrefix(text, string(a)) {
				t.Errorf("show describes %s as %q", a, text)
			}
		}
	}
	// Every fenced write has its refusal.
	for _, info := range table {
		if !info.Fenced {
			continue
		}
		found := false
		for _, r := range table {
			found = found || r.Refuses == info.Action
		}
		if !found {
			t.Errorf("%s is fenced but no action refuses it", info.Action)
		}
	}

	// The runner's steps are actions (but the agent's run).
	for _, s := range runner.Steps() {
		info, ok := byName[core.Action(s)]
		if s == runner.StepAgent {
			continue
		}
		if !ok || !info.ByProcess {
			t.Errorf("runner step %q is not a process action of the table", s)
		}
	}

	// The porcupine model covers exactly the process actions that change
	// the lease or consume a message (and a read of the cursor).
	lin := map[core.Action]bool{}
	for _, k := range tracecheck.LinKinds() {
		if k == tracecheck.LinTaken {
			continue
		}
		info, ok := byName[core.Action(k.String())]
		if !ok || !(info.WritesLease || info.Consumes) {
			t.Errorf("porcupine operation %s is not a lease write or a consuming write of the table", k)
		}
		lin[core.Action(k.String())] = true
	}
	for _, info := range table {
		if info.ByProcess && (info.WritesLease || info.Consumes) && info.Line != core.LineNone && !lin[info.Action] {
			t.Errorf("%s changes the lease or consumes, but the porcupine model has no operation for it", info.Action)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// block returns the definition that starts with head, up to the next blank
// line.
func block(text, head string) string {
	i := strings.Index(text, "\n"+head)
	if i < 0 {
		return ""
	}
	rest := text[i+1:]
	if j := strings.Index(rest, "\n\n"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// tlaStringSet parses `name == {"a", "b", ...}` and returns the strings,
// sorted.
func tlaStringSet(t *testing.T, text, name string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?s)\b` + name + `\s*==\s*\{([^}]*)\}`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s == {...} in the trace spec", name)
	}
	var out []string
	for _, s := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(m[1], -1) {
		out = append(out, s[1])
	}
	slices.Sort(out)
	return out
}
