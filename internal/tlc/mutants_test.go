package tlc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// Every spec mutant in spec/mutants is caught by the check it names, on
// a copy of the spec; the unmutated spec passes each of those checks.
func TestSpecMutantsCaught(t *testing.T) {
	env := realTLC(t)
	if testing.Short() {
		t.Skip("TLC NOT RUN: -short skips the spec mutants (about 2 minutes); run without -short, or tracecheck tlc mutants")
	}
	if raceEnabled {
		// The work is TLC's, in java: the race detector has nothing of
		// it to watch. scripts/test's TLC step (scripts/tlc) runs every
		// mutant, and a go test without -race runs this test.
		t.Skip("-race: the spec mutants are TLC's work, not Go's; scripts/tlc (scripts/test's TLC step) and go test without -race run them")
	}
	ms, err := LoadMutants(filepath.Join("../..", "spec", "mutants"))
	if err != nil {
		t.Fatal(err)
	}
	// The test's own deadline: go test's, less a margin to report in.
	deadline := time.Now().Add(9 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	rs, err := MutantRun{Env: env, Root: "../..", Parallel: 2, Job: Job{Timeout: 5 * time.Minute}}.Run(ctx, ms)
	if rs == nil {
		t.Fatalf("the unmutated spec's checks: %v", err)
	}
	if err != nil {
		t.Errorf("spec mutants did not all finish by the test's deadline (%v): %v", deadline.Format(time.TimeOnly), err)
	}
	for _, r := range rs {
		switch {
		case r.Err != nil:
			t.Errorf("mutant %s: not checked (%s did not run): %v", r.Mutant.Name, r.Mutant.CaughtBy, r.Err)
		case !r.Caught:
			t.Errorf("mutant %s survived %s", r.Mutant.Name, r.Mutant.CaughtBy)
		default:
			t.Logf("mutant %s caught by %s: %s", r.Mutant.Name, r.Mutant.CaughtBy, r.How)
		}
	}
}

func TestMutantFilesReadAndApplyOnce(t *testing.T) {
	ms, err := LoadMutants(filepath.Join("../..", "spec", "mutants"))
	if err != nil {
		t.Fatal(err)
	}
	dir := scratch(t)
	for _, m := range ms {
		if m.Doc == "" {
			t.Errorf("mutant %s: no comment saying what it breaks", m.Name)
		}
		if m.CaughtBy != FixturesCheck {
			if _, err := os.Stat(filepath.Join("../..", strings.TrimPrefix(m.CaughtBy, GraphCheck))); err != nil {
				t.Errorf("mutant %s: caught-by %s: %v", m.Name, m.CaughtBy, err)
			}
		}
		d := filepath.Join(dir, m.Name)
		if err := CopySpecs("../..", d); err != nil {
			t.Fatal(err)
		}
		if err := m.Apply(d); err != nil {
			t.Errorf("mutant %s: %v", m.Name, err)
		}
	}
}

func TestMutantStaleAndMalformed(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := "# doc\nfile: spec/ThreadClaimLapse.tla\ncaught-by: trace fixtures\n--- replace\nnot in the spec\n--- with\nx\n"
	m, err := ReadMutant(write("stale.mutant", good))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(scratch(t)); !errors.Is(err, ErrMutantStale) {
		t.Errorf("a mutant whose text is not in the file: %v, want ErrMutantStale", err)
	}
	for name, body := range map[string]string{
		"no-with":       "file: spec/X.tla\ncaught-by: trace fixtures\n--- replace\nx\n",
		"no-file":       "caught-by: trace fixtures\n--- replace\nx\n--- with\ny\n",
		"bad-check":     "file: spec/X.tla\ncaught-by: a hunch\n--- replace\nx\n--- with\ny\n",
		"bad-graph":     "file: spec/X.tla\ncaught-by: graph of the spec\n--- replace\nx\n--- with\ny\n",
		"outside":       "file: core/x.go\ncaught-by: trace fixtures\n--- replace\nx\n--- with\ny\n",
		"unknown-key":   "file: spec/X.tla\nwho: me\ncaught-by: trace fixtures\n--- replace\nx\n--- with\ny\n",
		"empty-replace": "file: spec/X.tla\ncaught-by: trace fixtures\n--- replace\n--- with\ny\n",
	} {
		if _, err := ReadMutant(write(name+".mutant", body)); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
}

func TestReadExpectation(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for _, a := range core.Actions() {
		names = append(names, string(a))
	}
	allActions := strings.Join(names, " ")
	for body, want := range map[string]string{
		"\\* expect: ok\n\\* fires: Post Claim\nSPECIFICATION Spec\n": "ok [Post Claim]",
		"\\* expect: ok\n\\* fires: all\n":                            "ok [" + allActions + "]",
		"\\* expect: violation I1\nSPECIFICATION Spec\n":              "violation I1 []",
		"\\* expect: violation I1 I3\n":                               "error",
		"SPECIFICATION Spec\n":                                        "error",
		"\\* expect: ok\n\\* fires:\n":                                "error",
	} {
		p := filepath.Join(dir, "x.cfg")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		e, err := ReadExpectation(p)
		got := "error"
		if err == nil {
			got = e.String() + " [" + strings.Join(e.Fires, " ") + "]"
		}
		if got != want {
			t.Errorf("%q: got %s, want %s", body, got, want)
		}
	}
}

// The coverage check reads TLC's -coverage messages (recorded from a run
// of ThreadClaimLapseSmall.cfg, cut down): an action with no step fails it.
func TestExpectationFires(t *testing.T) {
	res := &Result{Outcome: NoError, Messages: []Message{
		{Code: codeCoverageNext, Body: "<Post line 98, col 1 to line 98, col 4 of module ThreadClaimLapse>: 2:950"},
		{Code: codeCoverageNext, Body: "<StartFenced line 188, col 1 to line 188, col 14 of module ThreadClaimLapse>: 0:1370"},
		{Code: codeCoverageNext, Body: "<Crash line 252, col 1 to line 252, col 8 of module ThreadClaimLapse>: 1638:6194"},
	}}
	if got := (Expectation{OK: true, Fires: []string{"Post", "StartFenced", "Crash"}}).Check(res); got != "" {
		t.Errorf("all fired: %s", got)
	}
	got := (Expectation{OK: true, Fires: []string{"Post", "ReplyFenced"}}).Check(res)
	if !strings.Contains(got, "ReplyFenced") {
		t.Errorf("ReplyFenced never fired, but Check says %q", got)
	}
	if got := (Expectation{Violation: "I1"}).Check(res); got == "" {
		t.Error("an expected violation that did not happen passed")
	}
}

func TestReadExpectationEmptyFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "empty.cfg")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadExpectation(p); err == nil {
		t.Error("an empty cfg declared an expectation")
	}
}

// rootWithAWrongCfg copies the repository's spec/ and tla/ (the trace
// fixtures linked) into a temporary root, and makes one cfg there, wrong,
// expect the opposite of what it gives: an unmutated check that fails.
func rootWithAWrongCfg(t *testing.T) (root, wrong string) {
	t.Helper()
	root, wrong = t.TempDir(), "spec/ThreadClaimLapseUnfenced.cfg"
	if err := CopySpecs("../..", root); err != nil {
		t.Fatal(err)
	}
	fixtures, err := filepath.Abs(filepath.Join("../..", "tla", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fixtures, filepath.Join(root, "tla", "testdata")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(root, filepath.FromSlash(wrong))
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Its violation is expected: say it holds instead.
	b = []byte(strings.Replace(string(b), `\* expect: violation I1_ConsumedAtMostOnce`, `\* expect: ok`, 1))
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return root, wrong
}

// A check a mutant names that fails on the unmutated spec makes Run an
// error naming it, with no mutant's result: a mutant caught by a check
// that fails anyway shows nothing. The baseline's checks run at once
// (Parallel); the one that passes beside it does not hide it.
func TestMutantBaselineFailureIsAnError(t *testing.T) {
	env := realTLC(t)
	root, wrong := rootWithAWrongCfg(t)
	ms := []Mutant{
		{Name: "named-by-the-wrong-cfg", File: "spec/ThreadClaimLapse.tla", CaughtBy: wrong},
		{Name: "named-by-a-right-cfg", File: "spec/ThreadClaimLapse.tla", CaughtBy: "spec/ThreadClaimLapseNoFairnessOneMsg.cfg"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs, err := MutantRun{Env: env, Root: root, Parallel: 2, Job: Job{Timeout: 4 * time.Minute}}.Run(ctx, ms)
	if err == nil || rs != nil {
		t.Fatalf("Run = %d results, %v; want no result and the unmutated check's failure", len(rs), err)
	}
	if !strings.Contains(err.Error(), wrong+", unmutated") || strings.Contains(err.Error(), "NoFairnessOneMsg") {
		t.Errorf("the error %q does not name %s (and only it) failing unmutated", err, wrong)
	}
}

// A check the caller has verified (MutantRun.Verified) is not run again
// as the baseline: the cfg made wrong above, whose baseline would fail,
// fails nothing when it is named verified, and the mutant goes on to its
// own check (here, its empty text to replace is stale: no TLC runs).
func TestMutantBaselineSkipsVerified(t *testing.T) {
	root, wrong := rootWithAWrongCfg(t)
	ms := []Mutant{{Name: "stale", File: "spec/ThreadClaimLapse.tla", CaughtBy: wrong, Replace: "no such text in the spec"}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// No java is needed: nothing may run TLC.
	env := Env{Java: filepath.Join(t.TempDir(), "no-java"), Jar: filepath.Join(t.TempDir(), "no.jar")}
	rs, err := MutantRun{Env: env, Root: root, Verified: map[string]bool{wrong: true}}.Run(ctx, ms)
	if err != nil {
		t.Fatalf("Run: %v; want the verified check's baseline not run", err)
	}
	if len(rs) != 1 || !errors.Is(rs[0].Err, ErrMutantStale) || rs[0].Caught {
		t.Fatalf("Run = %+v; want the one mutant stale, not caught", rs)
	}
	// Not verified, the same baseline is run and fails (as
	// TestMutantBaselineFailureIsAnError shows with a real TLC): here it
	// cannot run at all, which is an error too.
	if _, err := (MutantRun{Env: env, Root: root}).Run(ctx, ms); err == nil {
		t.Fatal("Run with nothing verified ran no baseline")
	}
}

// A mutant that changes no verdict survives: every run of the trace
// fixtures is made (with each set of fences), and none is read as a
// change. Beside it, one that changes a verdict is caught.
func TestHarmlessTraceMutantSurvives(t *testing.T) {
	env := realTLC(t)
	const trace = "tla/ThreadClaimLapseTrace.tla"
	b, err := os.ReadFile(filepath.Join("../..", filepath.FromSlash(trace)))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	ms := []Mutant{
		{Name: "a-comment", File: trace, CaughtBy: FixturesCheck, Replace: first + "\n", With: first + "\n\\* a comment changes no verdict\n"},
	}
	real, err := LoadMutants(filepath.Join("../..", "spec", "mutants"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range real {
		if m.Name == "trace-claim-holder-reuse" {
			ms = append(ms, m)
		}
	}
	if len(ms) != 2 {
		t.Fatal("spec/mutants has no trace-claim-holder-reuse")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs, err := MutantRun{Env: env, Root: "../..", Parallel: 2, Job: Job{Timeout: 4 * time.Minute}}.Run(ctx, ms)
	if err != nil || len(rs) != 2 {
		t.Fatalf("Run (deadline 5 min): %d results, %v", len(rs), err)
	}
	if r := rs[0]; r.Caught || r.Err != nil || r.How != "" {
		t.Errorf("a comment in the trace spec: %+v, want survived with nothing changed", r)
	}
	if r := rs[1]; !r.Caught || r.Err != nil {
		t.Errorf("%s: %+v, want caught", r.Mutant.Name, r)
	}
}
