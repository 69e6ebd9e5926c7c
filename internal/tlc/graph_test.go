package tlc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// TestSummarize reads the recorded runs of the spec (testdata/ok.out on
// ThreadClaimLapse.cfg, testdata/invariant.out on
// ThreadClaimLapseUnfenced.cfg) into Summaries: the figures, the violated
// invariant, the counterexample's steps named as the model names them
// (Init, Claim(p1)), its length as the depth; and CompareOutcome sees a
// counterexample that takes another step.
func TestSummarize(t *testing.T) {
	ok := Summarize(parseFile(t, filepath.Join("testdata", "ok.out")))
	if ok.Violated != "" || ok.Distinct != 228049 || ok.Generated != 1044027 || ok.Depth != 30 || ok.Trace != nil {
		t.Errorf("ok.out: %+v", ok)
	}
	res := parseFile(t, filepath.Join("testdata", "invariant.out"))
	s := Summarize(res)
	if s.Violated != core.InvConsumedAtMostOnce || s.Depth != 9 || len(s.Trace) != 9 || s.Distinct != int(res.Distinct) {
		t.Fatalf("invariant.out: %+v", s)
	}
	if s.Trace[0] != "Init" || s.Trace[1] != "Post" || s.Trace[2] != "Claim(p1)" {
		t.Errorf("invariant.out's first steps: %q", s.Trace[:3])
	}
	for _, name := range s.Trace {
		if strings.ContainsAny(name, "\" ") {
			t.Errorf("step %q keeps a quote or a space", name)
		}
	}
	c, err := specmodel.ReadConfig("../../spec/ThreadClaimLapseUnfenced.cfg")
	if err != nil {
		t.Fatal(err)
	}
	g := specmodel.New(c).Explore()
	if v := g.Result().Violation; v == nil || v.Invariant != s.Violated || v.Depth != s.Depth {
		t.Fatalf("the model's violation %+v, TLC's %s at depth %d", v, s.Violated, s.Depth)
	}
	model := make([]string, 0, s.Depth)
	for _, ts := range g.Result().Violation.Trace[1:] {
		model = append(model, actionLabel(g.Model().Describe(ts.Step)))
	}
	other := s
	other.Trace = append([]string{"Init"}, model...)
	if d := CompareOutcome(g, other); len(d) != 0 {
		t.Errorf("the model's own counterexample: %q", d)
	}
	other.Trace = append([]string{"Init", "Post", "Claim(p2)"}, model[2:]...)
	if d := CompareOutcome(g, other); len(d) != 1 || !strings.Contains(d[0], "counterexample step 3: TLC Claim(p2)") {
		t.Errorf("a counterexample with another step 3: %q", d)
	}
	other.Trace, other.Violated = nil, core.InvOneActiveRun
	if d := CompareOutcome(g, other); len(d) != 1 || !strings.Contains(d[0], "I3_OneActiveRun") {
		t.Errorf("another invariant: %q", d)
	}
	if res.Outcome = Failed; Summarize(res).Violated != "" {
		t.Error("a failed run summarised as a violation")
	}
}

// TestCompareDumpCatchesDifference: a dump that lacks one of the model's
// states, or has one more, is reported with the state.
func TestCompareDumpCatchesDifference(t *testing.T) {
	c, err := specmodel.ReadConfig("../../spec/ThreadClaimLapseLiveness.cfg")
	if err != nil {
		t.Fatal(err)
	}
	c.MaxClaims, c.MaxMsgs = 2, 2
	g := specmodel.New(c).Explore()
	var dump strings.Builder
	for i := 0; i < g.Len(); i++ {
		s := g.State(i)
		dump.WriteString("State " + strconv.Itoa(i+1) + ":\n" + s.TLA(c.Procs) + "\n")
	}
	cmp, err := CompareDump(g, strings.NewReader(dump.String()))
	if err != nil || !cmp.Equal() || cmp.TLCStates != g.Len() {
		t.Fatalf("the model's own states: %+v, %v", cmp, err)
	}
	// Drop the last state: the model has one TLC lacks.
	cut := dump.String()[:strings.LastIndex(dump.String(), "State ")]
	cmp, err = CompareDump(g, strings.NewReader(cut))
	if err != nil || cmp.OnlyModel != 1 || !strings.Contains(cmp.FirstDiff, "not in TLC's dump") {
		t.Errorf("a state missing from the dump: %+v, %v", cmp, err)
	}
	// A state the model does not reach: taken past msgs.
	bogus := strings.Replace(dump.String(), "State 1:\n/\\ msgs = 0\n/\\ taken = 0", "State 1:\n/\\ msgs = 0\n/\\ taken = 2", 1)
	cmp, err = CompareDump(g, strings.NewReader(bogus))
	if err != nil || cmp.OnlyTLC != 1 || !strings.Contains(cmp.FirstDiff, "taken = 2") {
		t.Errorf("a state the model does not reach: %+v, %v", cmp, err)
	}
	if _, err := CompareDump(g, strings.NewReader("State 1:\n/\\ msgs = <<\n")); !errors.Is(err, ErrDump) {
		t.Errorf("a malformed dump: %v", err)
	}
}

// TestCompareDumpBounded: for a graph explored to a depth D (a cfg whose
// violation stops TLC at D), every model state of depth below D must be in
// TLC's dump, and those of depth D need not: a dump without the states of
// depth D compares equal, one that also lacks a state of depth D-1 does
// not. (Written against a mutant of the seventeenth pass that skipped
// every state of a bounded graph.)
func TestCompareDumpBounded(t *testing.T) {
	c, err := specmodel.ReadConfig("../../spec/ThreadClaimLapseUnfenced.cfg")
	if err != nil {
		t.Fatal(err)
	}
	const depth = 5
	g := specmodel.New(c).ExploreWith(specmodel.Options{Continue: true, MaxDepth: depth})
	var below []string
	for i := 0; i < g.Len(); i++ {
		if g.Depth(i) < depth {
			s := g.State(i)
			below = append(below, "State "+strconv.Itoa(len(below)+1)+":\n"+s.TLA(c.Procs))
		}
	}
	if len(below) == g.Len() {
		t.Fatalf("no state of depth %d", depth)
	}
	cmp, err := CompareDump(g, strings.NewReader(strings.Join(below, "")))
	if err != nil || !cmp.Equal() {
		t.Fatalf("the states below depth %d: %+v, %v", depth, cmp, err)
	}
	cmp, err = CompareDump(g, strings.NewReader(strings.Join(below[:len(below)-1], "")))
	if err != nil || cmp.OnlyModel != 1 || !strings.Contains(cmp.FirstDiff, "not in TLC's dump") {
		t.Errorf("a state of depth %d missing: %+v, %v", depth-1, cmp, err)
	}
}

// specCfgs are the cfgs in spec/.
func specCfgs(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("../../spec/*.cfg")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cfg in ../../spec: %v", err)
	}
	return files
}

// TestTLCStateForState runs TLC on every cfg in spec/ and compares its
// state graph with the model's: for a cfg with no violation, every state
// and every transition (-dump dot,actionlabels); for one with a
// violation, the outcome and the states up to its depth (-dump). It needs
// TLA2TOOLS_JAR and java; without them it skips, unless REQUIRE_TLC=1
// (`tracecheck tlc spec`, which finds the jars itself, makes the same
// comparison in scripts/test).
func TestTLCStateForState(t *testing.T) {
	jar := os.Getenv(EnvJar)
	if jar == "" {
		if os.Getenv("REQUIRE_TLC") == "1" {
			t.Fatal("REQUIRE_TLC=1 but TLA2TOOLS_JAR is not set")
		}
		t.Skip("TLA2TOOLS_JAR not set: TLC's state graph is not compared (set it, and REQUIRE_TLC=1 to make this an error)")
	}
	if testing.Short() {
		t.Skip("-short: TLC takes a minute")
	}
	if raceEnabled {
		t.Skip("-race: the Go model's 228,049 states take ten times as long under the race detector; scripts/test runs this test without it")
	}
	env := Env{Jar: jar} // java on the PATH
	for _, f := range specCfgs(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			// Each cfg's comparison is one core's work (the model, then
			// TLC with one worker), in directories of its own: two at
			// once (go test's -parallel) halve the step's longest pole.
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmp, err := env.CompareGraph(ctx, f)
			if err != nil {
				t.Fatalf("running TLC (deadline 10 min): %v", err)
			}
			for _, d := range cmp.OutcomeDiffs {
				t.Error(d)
			}
			t.Logf("TLC %d states, %d edges; model %d, %d", cmp.TLCStates, cmp.TLCEdges, cmp.ModelStates, cmp.ModelEdges)
			if !cmp.Equal() {
				t.Errorf("TLC has %d states and %d edges the model lacks, the model %d and %d TLC lacks; first:\n%s",
					cmp.OnlyTLC, cmp.OnlyTLCEdges, cmp.OnlyModel, cmp.OnlyModelEdges, cmp.FirstDiff)
			}
		})
	}
}

// TestCompareGraphRefusesBadRun: a cfg TLC cannot check is an error, not
// a comparison; a cfg that cannot be read is one before TLC starts.
func TestCompareGraphRefusesBadRun(t *testing.T) {
	if _, err := (Env{Java: "/nonexistent/java"}).CompareGraph(context.Background(), "no-such.cfg"); err == nil {
		t.Error("a missing cfg compared")
	}
	jar := os.Getenv(EnvJar)
	if jar == "" || testing.Short() {
		t.Skip("TLA2TOOLS_JAR not set (or -short): TLC's refusal is not run")
	}
	dir := t.TempDir()
	if err := CopySpecs("../..", dir); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "spec", specmodel.Module+".tla")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	// A module SANY rejects (a definition without a body before its
	// end): TLC reports a parse error, which is no outcome to compare.
	end := strings.LastIndex(string(b), "\n====")
	if end < 0 {
		t.Fatalf("%s has no end of module", spec)
	}
	broken := string(b[:end]) + "\nBroken ==\n" + string(b[end:])
	if err := os.WriteFile(spec, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = Env{Jar: jar}.CompareGraph(ctx, filepath.Join(dir, "spec", "ThreadClaimLapseSmall.cfg"))
	if err == nil || !strings.Contains(err.Error(), "parse error") {
		t.Errorf("a spec SANY rejects (deadline 5 min): %v, want TLC's parse error", err)
	}
}

// BenchmarkTLCFenced runs TLC (one worker, no dump) on
// spec/ThreadClaimLapse.cfg, beside specmodel's BenchmarkExploreFenced for
// a ratio in one run: go test ./internal/specmodel ./internal/tlc -run '^$'
// -bench 'ExploreFenced|TLCFenced' -benchtime 3x with TLA2TOOLS_JAR set.
func BenchmarkTLCFenced(b *testing.B) {
	jar := os.Getenv(EnvJar)
	if jar == "" {
		b.Skip("TLA2TOOLS_JAR not set")
	}
	env := Env{Jar: jar}
	for b.Loop() {
		if _, _, err := env.runModel(context.Background(), "../../spec/ThreadClaimLapse.cfg", b.TempDir(), dumpNone); err != nil {
			b.Fatal(err)
		}
	}
}

// actionLabel drops quotes and spaces, and only those: TLC's label and
// the model's Describe then read alike.
func TestActionLabel(t *testing.T) {
	for in, want := range map[string]string{
		`Claim("p1")`:         `Claim(p1)`,
		`Abandon("p2", 1)`:    `Abandon(p2,1)`,
		`Post`:                `Post`,
		`Initial predicate`:   `Initialpredicate`,
		`SteerRecord( "p1" )`: `SteerRecord(p1)`,
		"Reply(\"p\u00e9\")":  "Reply(p\u00e9)",
	} {
		if got := actionLabel(in); got != want {
			t.Errorf("actionLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
