package tlc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// The tests of this file came from the fifth mutation pass (7 Dec 2026),
// over the harness that runs TLC and holds its verdicts to the Go
// checker's and to the cfgs' declared outcomes: each fails with a mutant
// that no test caught before.

// fakeMsg is a shell function for fakeJava's scripts: msg CODE:SEVERITY
// TEXT prints one of TLC's messages as TLC does.
const fakeMsg = `msg() { echo "@!@!@STARTMSG $1 @!@!@"; echo "$2"; echo "@!@!@ENDMSG ${1%%:*} @!@!@"; }
`

// TestFixtureProblem: a fixture's verdict is held to its name and to
// its expected-lines line: a bad-* fixture rejected at another line than
// the Go checker's is a problem, not only one accepted.
func TestFixtureProblem(t *testing.T) {
	for _, c := range []struct {
		name string
		fx   Fixture
		at   int
		want string // "" no problem; else a part of it
	}{
		{"ok accepted", Fixture{Accept: true}, 0, ""},
		{"ok rejected", Fixture{Accept: true}, 3, "expected accepted, got rejected at line 3"},
		{"bad accepted", Fixture{}, 0, "expected rejected, got accepted"},
		{"bad, any line", Fixture{}, 4, ""},
		{"bad at its line", Fixture{ExpectLine: 4}, 4, ""},
		{"bad at another line", Fixture{ExpectLine: 4}, 5, "expected rejected at line 4 (the Go checker's), got line 5"},
		{"bad at an earlier line", Fixture{ExpectLine: 4}, 2, "got line 2"},
		{"bad, by the reader", Fixture{ReaderErr: errors.New("malformed")}, -1, ""},
	} {
		got := c.fx.Problem(FixtureVerdict{RejectedAt: c.at})
		if (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: Problem(%d) = %q, want %q", c.name, c.at, got, c.want)
		}
	}
}

// TestDiffResultAgree: the differential's checkers agree only on the
// same verdict at the same line; both rejecting, at different lines, is
// a disagreement.
func TestDiffResultAgree(t *testing.T) {
	for _, c := range []struct {
		goLine, tlcLine int
		want            bool
	}{
		{0, 0, true}, {5, 5, true}, {5, 7, false}, {7, 5, false}, {0, 3, false}, {3, 0, false},
	} {
		if got := (DiffResult{Go: c.goLine, TLC: c.tlcLine}).Agree(); got != c.want {
			t.Errorf("Go %d, TLC %d: Agree() = %v, want %v", c.goLine, c.tlcLine, got, c.want)
		}
	}
}

// TestMutantAppliesOnlyOnce: a mutant whose text occurs twice in its
// file is stale as one that does not occur: which one it means is not
// known.
func TestMutantAppliesOnlyOnce(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec", "M.tla")
	if err := os.MkdirAll(filepath.Dir(spec), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, []byte("A == TRUE\nB == TRUE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := Mutant{Name: "twice", File: "spec/M.tla", CaughtBy: FixturesCheck, Replace: "TRUE", With: "FALSE"}
	if err := m.Apply(dir); !errors.Is(err, ErrMutantStale) {
		t.Errorf("a mutant whose text occurs twice: %v, want ErrMutantStale", err)
	}
	if b, _ := os.ReadFile(spec); string(b) != "A == TRUE\nB == TRUE\n" {
		t.Errorf("the file was edited: %q", b)
	}
}

// TestCompareOutcomeDepth: TLC's depth is compared with the model's, for
// a cfg with a violation (the counterexample's length) and for one
// without (the complete search's depth); and a graph comparison with an
// outcome difference is not equal whatever its states and edges.
func TestCompareOutcomeDepth(t *testing.T) {
	c, err := specmodel.ReadConfig("../../spec/ThreadClaimLapseUnfenced.cfg")
	if err != nil {
		t.Fatal(err)
	}
	g := specmodel.New(c).Explore()
	v := g.Result().Violation
	if v == nil {
		t.Fatal("ThreadClaimLapseUnfenced.cfg: the model finds no violation")
	}
	sum := Summary{Violated: v.Invariant, Depth: v.Depth}
	if d := CompareOutcome(g, sum); len(d) != 0 {
		t.Fatalf("the model's own violation and depth: %q", d)
	}
	sum.Depth++
	if d := CompareOutcome(g, sum); len(d) != 1 || !strings.Contains(d[0], "depth") {
		t.Errorf("the violation one step deeper: %q, want a depth difference", d)
	}

	c, err = specmodel.ReadConfig("../../spec/ThreadClaimLapseSmall.cfg")
	if err != nil {
		t.Fatal(err)
	}
	g = specmodel.New(c).Explore()
	r := g.Result()
	if r.Violation != nil {
		t.Fatalf("ThreadClaimLapseSmall.cfg: the model finds %+v", r.Violation)
	}
	sum = Summary{Distinct: r.Distinct, Depth: r.Depth}
	if d := CompareOutcome(g, sum); len(d) != 0 {
		t.Fatalf("the model's own figures: %q", d)
	}
	sum.Depth++
	if d := CompareOutcome(g, sum); len(d) != 1 || !strings.Contains(d[0], "depth") {
		t.Errorf("a search one level deeper: %q, want a depth difference", d)
	}

	if (GraphComparison{OutcomeDiffs: []string{"TLC: 1 distinct states"}}).Equal() {
		t.Error("a graph comparison with an outcome difference is equal")
	}
}

// TestFixturesLowestLine: a fixture of several threads is rejected at
// the lowest file line over its threads, whichever thread comes first.
func TestFixturesLowestLine(t *testing.T) {
	env := realTLC(t)
	lines, err := tracecheck.ReadFile(filepath.Join("../..", "tla", "testdata", "bad-start-under-other-lease.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	other := make([]core.TraceEvent, len(lines))
	for i, ev := range lines {
		ev.Thread = "other-" + ev.Thread
		other[i] = ev
	}
	// The first thread's lines are the file's even lines 2 to 10, the
	// second's lines 11 to 15: each is rejected at its fifth line, the
	// file at line 10.
	fx := Fixture{Path: "two-threads", Fences: core.AllFences(), Threads: []Thread{
		{ID: lines[0].Thread, Lines: lines, N: []int{2, 4, 6, 8, 10}},
		{ID: other[0].Thread, Lines: other, N: []int{11, 12, 13, 14, 15}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	vs, err := env.CheckFixtures(ctx, testBatch(scratch(t)), []Fixture{fx})
	if err != nil {
		t.Fatalf("TLC (deadline 5 min): %v", err)
	}
	if vs[0].RejectedAt != 10 {
		t.Errorf("rejected at line %d, want 10 (the least over the threads)", vs[0].RejectedAt)
	}
}

// TestParseNotVerdicts: TLC's 2146 says an invariant is not a state
// predicate (an error in the cfg, not a violation), and a message of
// TLC's bug severity is an error: neither reads as a verdict.
func TestParseNotVerdicts(t *testing.T) {
	for _, c := range []struct{ name, in string }{
		{"2146", "@!@!@STARTMSG 2146:1 @!@!@\nThe invariant Inv is not a state predicate (one with no primes or temporal operators).\n@!@!@ENDMSG 2146 @!@!@\n"},
		{"bug severity", "@!@!@STARTMSG 1000:2 @!@!@\nThis is a TLC bug: boom\n@!@!@ENDMSG 1000 @!@!@\n"},
	} {
		res, err := Parse(strings.NewReader(c.in + "@!@!@STARTMSG 2186:0 @!@!@\nFinished in 1ms\n@!@!@ENDMSG 2186 @!@!@\n"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != Failed {
			t.Errorf("%s: %v %q, want %v", c.name, res.Outcome, res.Name, Failed)
		}
	}
}

// TestExpectationCheckName: "expect: violation NAME" is met by NAME
// violated only, not by another invariant or property violated.
func TestExpectationCheckName(t *testing.T) {
	e := Expectation{Violation: "Inv"}
	for _, c := range []struct {
		res  Result
		pass bool
	}{
		{Result{Outcome: InvariantViolated, Name: "Inv"}, true},
		{Result{Outcome: PropertyViolated, Name: "Inv"}, true},
		{Result{Outcome: InvariantViolated, Name: "Other"}, false},
		{Result{Outcome: PropertyViolated, Name: ""}, false},
		{Result{Outcome: NoError}, false},
		{Result{Outcome: Deadlock}, false},
	} {
		if got := e.Check(&c.res); (got == "") != c.pass {
			t.Errorf("%v %q: Check = %q, want pass %v", c.res.Outcome, c.res.Name, got, c.pass)
		}
	}
}

// TestMutantRunVerdicts: a trace-spec mutant that leaves every
// fixture's verdict but moves the line a bad-* fixture is rejected at is
// caught (the fixtures' verdicts are compared line for line); one that
// makes the trace spec, or a model cfg's run, fail to finish catches
// nothing: its check did not run.
func TestMutantRunVerdicts(t *testing.T) {
	// A stand-in for TLC: a model run reports no error, unless the
	// module says CRASH (then it stops without an outcome); a batch
	// matches as many lines of the one trace as the trace spec's MATCH
	// says, and fails on a trace spec that says BROKEN.
	env := fakeJava(t, fakeMsg+`if [ -z "$TRACE_BATCH" ]; then
	grep -q CRASH M.tla && exit 1
	msg 2193:0 "Model checking completed. No error has been found."
	msg 2186:0 "Finished in 1ms"
	exit 0
fi
if grep -q BROKEN ThreadClaimLapseTrace.tla; then msg 3002:1 "Parsing or semantic analysis failed."; exit 1; fi
sed -n 's/^MATCH == \([0-9]*\)$/[\1]/p' ThreadClaimLapseTrace.tla > "$TRACE_RESULT"
msg 2193:0 "Model checking completed. No error has been found."
msg 2186:0 "Finished in 1ms"
`)
	root := t.TempDir()
	post := func(tick int) string {
		return fmt.Sprintf(`{"tick":%d,"read":false,"action":"Post","thread":"t1","proc":"a","holder":"","msg":%d,"req":0,"run":0,"taken":0,"lease":""}`, tick, tick)
	}
	for path, body := range map[string]string{
		"spec/ThreadClaimLapse.tla":        "",
		"spec/M.tla":                       "OK\n",
		"spec/M.cfg":                       "\\* expect: ok\n",
		"spec/mutants/model-crash.mutant":  "# stops TLC\nfile: spec/M.tla\ncaught-by: spec/M.cfg\n--- replace\nOK\n--- with\nCRASH\n",
		"tla/ThreadClaimLapseTrace.tla":    "MATCH == 2\n",
		"tla/testdata/bad-three.ndjson":    post(1) + "\n" + post(2) + "\n" + post(3) + "\n",
		"spec/mutants/line-shift.mutant":   "# moves the rejection\nfile: tla/ThreadClaimLapseTrace.tla\ncaught-by: trace fixtures\n--- replace\nMATCH == 2\n--- with\nMATCH == 1\n",
		"spec/mutants/trace-broken.mutant": "# breaks the trace spec\nfile: tla/ThreadClaimLapseTrace.tla\ncaught-by: trace fixtures\n--- replace\nMATCH == 2\n--- with\nBROKEN\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := LoadMutants(filepath.Join(root, "spec", "mutants"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := MutantRun{Env: env, Root: root, Job: Job{Timeout: 30 * time.Second}}.Run(ctx, ms)
	if err != nil {
		t.Fatalf("the fake TLC's runs (deadline 1 min): %v", err)
	}
	got := map[string]MutantResult{}
	for _, r := range rs {
		got[r.Mutant.Name] = r
	}
	if r := got["line-shift"]; !r.Caught || r.Err != nil || !strings.Contains(r.How, "rejected at line 2 instead of rejected at line 3") {
		t.Errorf("a mutant that moves a rejection: %+v, want caught", r)
	}
	for _, name := range []string{"trace-broken", "model-crash"} {
		if r := got[name]; r.Mutant.Name != name || r.Caught || r.Err == nil {
			t.Errorf("%s, whose check does not finish: %+v, want not caught, an error", name, r)
		}
	}
}

// TestValidateBatchRefusalsSayWhy: a batch with a trace of two threads,
// or an empty trace, is refused before TLC runs, saying why (the Env
// here could not run TLC at all: any error would do otherwise).
func TestValidateBatchRefusalsSayWhy(t *testing.T) {
	b := Batch{Dir: "x", SpecDir: "y"}
	for _, c := range []struct {
		name   string
		traces [][]core.TraceEvent
		want   string
	}{
		{"two threads", [][]core.TraceEvent{{{Thread: "t1"}, {Thread: "t2"}}}, `mixes threads "t1" and "t2"`},
		{"empty", [][]core.TraceEvent{{{Thread: "t1"}}, {}}, "trace 2 of the batch is empty"},
	} {
		_, _, err := Env{}.ValidateBatch(context.Background(), b, c.traces)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestReadExpectedLinesMalformed: an expected-lines file is "FILE LINE"
// lines, LINE from 1, and # comments; anything else is an error naming
// its line.
func TestReadExpectedLinesMalformed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "expected-lines")
	write := func(body string) {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("# the Go checker's lines\nbad-a.ndjson 3\n\nbad-b.ndjson 1\n")
	m, err := ReadExpectedLines(path)
	if err != nil || len(m) != 2 || m["bad-a.ndjson"] != 3 || m["bad-b.ndjson"] != 1 {
		t.Errorf("a well-formed file: %v, %v", m, err)
	}
	for _, body := range []string{"bad-a.ndjson 0\n", "bad-a.ndjson -2\n", "bad-a.ndjson x\n", "bad-a.ndjson\n", "bad-a.ndjson 3 4\n"} {
		write("bad-b.ndjson 1\n" + body)
		if _, err := ReadExpectedLines(path); err == nil || !strings.Contains(err.Error(), ":2:") {
			t.Errorf("%q: %v, want an error at line 2", body, err)
		}
	}
}

// TestValidateBatchDistrustsResult: a batch's verdicts are TLC's only
// when TLC reported no error and its result names a count of matched
// lines, within the trace, for every trace; anything else is ErrBatch.
func TestValidateBatchDistrustsResult(t *testing.T) {
	const ok = `msg 2193:0 "Model checking completed. No error has been found."`
	for _, c := range []struct{ name, result, outcome string }{
		{"an error with a result", "[1]", `msg 2110:1 "Invariant Inv is violated."`},
		{"more lines than the trace", "[2]", ok},
		{"fewer than none", "[-1]", ok},
		{"a result too many", "[1,1]", ok},
		{"no result", "", ok},
	} {
		script := fakeMsg + `[ -n "` + c.result + `" ] && echo '` + c.result + `' > "$TRACE_RESULT"
` + c.outcome + `
msg 2186:0 "Finished in 1ms"
`
		env := fakeJava(t, script)
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, _, err := env.ValidateBatch(ctx, Batch{Dir: dir, SpecDir: dir}, [][]core.TraceEvent{{{Thread: "t1"}}})
		cancel()
		if !errors.Is(err, ErrBatch) {
			t.Errorf("%s: %v, want ErrBatch", c.name, err)
		}
	}
}
