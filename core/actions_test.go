package core_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/explore"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// traceSpecFile is the TLC trace spec: how a trace line is matched to a
// spec action.
const traceSpecFile = "../tla/ThreadClaimLapseTrace.tla"

// TestActionTable guards the one action table (core.ActionTable) against
// the spec and the places that read it: the specification's Next and its
// guards on pc, the TLC trace spec's read and write sets, the Go
// checker's porcupine model, the runner's steps, the trace viewer and the
// events the simulations check. Adding an action in one place only fails
// here or in TestActionPlaces.
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
	spec := readFile(t, specFile)
	checkSpecNext(t, spec, table, byName)
	checkSpecPC(t, spec, table)
	checkTraceSpecLines(t, readFile(t, traceSpecFile), table)
	checkRows(t, table, byName)
	checkReaders(t, table, byName)
}

// checkSpecNext: the spec declares the table's actions, in the table's
// order, and Next is made of exactly them.
func checkSpecNext(t *testing.T, spec string, table []core.ActionInfo, byName map[core.Action]core.ActionInfo) {
	t.Helper()
	var declared []core.Action
	for _, m := range regexp.MustCompile(`(?m)^([A-Z][A-Za-z]*)(\([a-z, ]*\))? ==`).FindAllStringSubmatch(spec, -1) {
		if _, ok := byName[core.Action(m[1])]; ok {
			declared = append(declared, core.Action(m[1]))
		}
	}
	if !slices.Equal(declared, core.Actions()) {
		t.Errorf("the spec declares the table's actions in the order %v; the table's order is %v", declared, core.Actions())
	}
	inNext := nextDisjuncts(spec)
	for a := range inNext {
		if _, ok := byName[a]; !ok {
			t.Errorf("the spec's Next has %s, which the action table lacks", a)
		}
	}
	for _, info := range table {
		if !inNext[info.Action] {
			t.Errorf("%s is in the action table but not a disjunct of the spec's Next", info.Action)
		}
	}
}

// nextDisjuncts returns the actions ProcNext(p) and Next are made of.
func nextDisjuncts(spec string) map[core.Action]bool {
	next := block(spec, "ProcNext(p) ==") + block(spec, "Next ==")
	in := map[core.Action]bool{}
	for _, m := range regexp.MustCompile(`\\/\s*(?:\\E [^:]+:\s*)?([A-Z][A-Za-z]*)`).FindAllStringSubmatch(next, -1) {
		if m[1] != "ProcNext" {
			in[core.Action(m[1])] = true
		}
	}
	return in
}

// checkSpecPC: each row's PC and NextPC are the spec's guard on pc[p] and
// its pc'[p]; a round ends exactly when pc'[p] is "idle".
func checkSpecPC(t *testing.T, spec string, table []core.ActionInfo) {
	t.Helper()
	guard := regexp.MustCompile(`pc\[p\] = "([a-z]+)"`)
	next := regexp.MustCompile(`pc' = \[pc EXCEPT !\[p\] = "([a-z]+)"\]`)
	for _, info := range table {
		def := definition(spec, info.Action)
		if def == "" {
			t.Errorf("%s: no definition in %s", info.Action, specFile)
			continue
		}
		pc, nextPC := "", ""
		if m := guard.FindStringSubmatch(def); m != nil {
			pc = m[1]
		}
		if m := next.FindStringSubmatch(def); m != nil {
			nextPC = m[1]
		}
		if info.PC != pc || info.NextPC != nextPC {
			t.Errorf("%s: the table says pc %q to %q; the spec's definition, %q to %q", info.Action, info.PC, info.NextPC, pc, nextPC)
		}
		if info.ByProcess && info.EndsRound != (info.NextPC == core.PCIdle) {
			t.Errorf("%s: EndsRound is %v, but pc'[p] is %q", info.Action, info.EndsRound, info.NextPC)
		}
	}
}

// checkTraceSpecLines: the TLC trace spec's set of read actions is the
// table's, and it singles out the one action that is a write or a read
// (Release); every other logged action is a write.
func checkTraceSpecLines(t *testing.T, traceSpec string, table []core.ActionInfo) {
	t.Helper()
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
}

// checkRows: each row is consistent in itself and with the rows it names,
// and the trace viewer names every logged action.
func checkRows(t *testing.T, table []core.ActionInfo, byName map[core.Action]core.ActionInfo) {
	t.Helper()
	for _, info := range table {
		a := info.Action
		if info.Consumes && !info.Fenced && info.PC != core.PCSteered {
			t.Errorf("%s consumes a message but is not fenced (only steering's record, which its run's abandonment refuses, may be)", a)
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
		if info.Line != core.LineNone {
			if text := explore.CellText(core.TraceEvent{Action: a, Msg: 1, Req: 1, Run: 1}, info, func(core.Holder) string { return "h1" }); !strings.HasPrefix(text, string(a)) {
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
}

// checkReaders: the runner's steps are process actions (but the agent's
// run), and the porcupine model covers exactly the process actions that
// change the lease or consume a message (and a read of the cursor).
func checkReaders(t *testing.T, table []core.ActionInfo, byName map[core.Action]core.ActionInfo) {
	t.Helper()
	for _, s := range runner.Steps() {
		info, ok := byName[core.Action(s)]
		if s == runner.StepAgent {
			continue
		}
		if !ok || !info.ByProcess {
			t.Errorf("runner step %q is not a process action of the table", s)
		}
	}
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

// definition returns the spec's definition of the action (with or without
// parameters), up to the next blank line; "" when there is none.
func definition(spec string, a core.Action) string {
	m := regexp.MustCompile(`(?m)^` + string(a) + `(\([a-z, ]*\))? ==`).FindStringIndex(spec)
	if m == nil {
		return ""
	}
	rest := spec[m[0]:]
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

// placesDoc lists every place an action lives (core/ACTIONS.md);
// TestActionPlaces checks each of its numbered places for every action.
const placesDoc = "ACTIONS.md"

// TestActionPlaces: every action of the table is in every place
// core/ACTIONS.md lists for it, and that list names exactly the places
// checked here. Removing an action from one place, or adding one to the
// table and not to a place, fails naming both.
func TestActionPlaces(t *testing.T) {
	places := actionPlaces(t)
	var checked []string
	for _, p := range places {
		checked = append(checked, p.path)
	}
	if listed := listedPlaces(t, readFile(t, placesDoc)); !slices.Equal(listed, checked) {
		t.Errorf("%s lists the places %q; TestActionPlaces checks %q", placesDoc, listed, checked)
	}
	for _, info := range core.ActionTable() {
		for _, p := range places {
			if missing := p.check(info); missing != "" {
				t.Errorf("%s: %s: %s (%s)", info.Action, p.path, missing, placesDoc)
			}
		}
	}
}

// listedPlaces returns the first path of each numbered row of the doc's
// tables, in order.
func listedPlaces(t *testing.T, doc string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| [0-9]+ \\| `([^`]+)`").FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no places", placesDoc)
	}
	return out
}

// place is one place an action lives, and what it lacks for an action
// ("" when nothing).
type place struct {
	path  string // as core/ACTIONS.md names it, from the repository's root
	check func(info core.ActionInfo) string
}

// actionPlaces returns the places core/ACTIONS.md lists, in its order,
// each with its check.
func actionPlaces(t *testing.T) []place {
	spec, traceSpec := readFile(t, specFile), readFile(t, traceSpecFile)
	next := nextDisjuncts(spec)
	actionsGo, checkGo, driveGo := readFile(t, "actions.go"), readFile(t, "../tracecheck/check.go"), readFile(t, "../internal/conform/drive.go")
	workspace, checker, model := methods(t, ".", "Workspace"), methods(t, "../tracecheck", "Checker"), methods(t, "../internal/specmodel", "Model")
	fixtures := fixtureActions(t)
	specReadme, traceDoc, tlaReadme := readFile(t, "../spec/README.md"), readFile(t, "../tracecheck/doc.go"), readFile(t, "../tla/README.md")
	do := modelDo(t)
	return []place{
		{"spec/ThreadClaimLapse.tla", func(info core.ActionInfo) string {
			switch {
			case definition(spec, info.Action) == "":
				return "no definition"
			case !next[info.Action]:
				return "not a disjunct of Next"
			}
			return ""
		}},
		{"tla/ThreadClaimLapseTrace.tla", logged(func(a string) bool { return strings.Contains(traceSpec, `a = "`+a+`"`) }, "no arm of the line's CASE")},
		{"core/actions.go", func(info core.ActionInfo) string {
			if !regexp.MustCompile(`\bAction` + string(info.Action) + `\s+Action = "` + string(info.Action) + `"`).MatchString(actionsGo) {
				return "no constant Action" + string(info.Action)
			}
			return ""
		}},
		{"core/workspace.go", func(info core.ActionInfo) string {
			if info.Line == core.LineNone || info.Refuses != "" || workspace[string(info.Action)] == "workspace.go" {
				return ""
			}
			return "no Workspace method " + string(info.Action)
		}},
		{"tracecheck/check.go", logged(func(a string) bool {
			return checker[strings.ToLower(a[:1])+a[1:]] == "check.go" && regexp.MustCompile(`case [^:]*\ba`+a+`\b`).MatchString(checkGo)
		}, "no checker method, or no case in step")},
		{"internal/specmodel/actions.go", func(info core.ActionInfo) string {
			if model[string(info.Action)] != "actions.go" {
				return "no model method " + string(info.Action)
			}
			return do(info)
		}},
		{"internal/conform/drive.go", func(info core.ActionInfo) string {
			if !regexp.MustCompile(`case [^:]*core\.Action` + string(info.Action) + `\b`).MatchString(driveGo) {
				return "no Go call for it in driver.do"
			}
			return ""
		}},
		{"tracecheck/testdata", logged(func(a string) bool { return fixtures[a] }, "no fixture has a line of it")},
		{"spec/README.md", func(info core.ActionInfo) string {
			if !regexp.MustCompile("(?m)^\\| `" + string(info.Action) + "[`(]").MatchString(specReadme) {
				return "no row in the table of actions"
			}
			return ""
		}},
		{"tracecheck/doc.go", logged(func(a string) bool { return regexp.MustCompile(`\b` + a + `\b`).MatchString(traceDoc) }, "not named in the trace's contract")},
		{"tla/README.md", logged(func(a string) bool { return strings.Contains(tlaReadme, "`"+a+"`") }, "not named")},
	}
}

// logged is a check of the actions a trace has a line of (all but Lapse).
func logged(ok func(action string) bool, missing string) func(core.ActionInfo) string {
	return func(info core.ActionInfo) string {
		if info.Line == core.LineNone || ok(string(info.Action)) {
			return ""
		}
		return missing
	}
}

// methods returns the methods of the type named recv (pointer receivers
// or not) declared in the package in dir, each with its file's name.
func methods(t *testing.T, dir, recv string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok && id.Name == recv {
				out[fn.Name.Name] = filepath.Base(f)
			}
		}
	}
	return out
}

// fixtureActions returns the actions some trace fixture has a line of.
func fixtureActions(t *testing.T) map[string]bool {
	t.Helper()
	var files []string
	for _, pattern := range []string{"../tracecheck/testdata/*.ndjson", "../tla/testdata/*.ndjson", "../tla/testdata/*/*.ndjson"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	out := map[string]bool{}
	re := regexp.MustCompile(`"action":"([A-Za-z]+)"`)
	for _, f := range files {
		for _, m := range re.FindAllStringSubmatch(readFile(t, f), -1) {
			out[m[1]] = true
		}
	}
	return out
}

// modelDo returns a check that the Go model's Do takes a step of the
// action (from the Small cfg's Init) without panicking on it as unknown.
func modelDo(t *testing.T) func(core.ActionInfo) string {
	t.Helper()
	cfg, err := specmodel.ReadConfig("../spec/ThreadClaimLapseSmall.cfg")
	if err != nil {
		t.Fatal(err)
	}
	m := specmodel.New(cfg)
	return func(info core.ActionInfo) (missing string) {
		st := specmodel.Step{Action: info.Action, P: -1}
		if info.ByProcess {
			st.P = 0
		}
		if info.Action == core.ActionAbandon {
			st.R = 1
		}
		defer func() {
			if r := recover(); r != nil {
				missing = fmt.Sprintf("the model's Do panics on it: %v", r)
			}
		}()
		s := m.Init()
		m.Do(&s, st)
		return ""
	}
}
