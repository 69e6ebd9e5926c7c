package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/internal/fleet"
	"github.com/threadclaim/threadclaim/internal/report"
)

// readJUnit reads a -junit file and checks it against the JUnit schema.
func readJUnit(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the -junit file")
	require.NoError(t, report.CheckJUnit(b), "%s", b)
	return string(b)
}

// TestRunJUnit: run -junit writes valid JUnit XML with a case per
// execution's invariants, trace and history; with the fences off the
// failing trace's case carries its story (the rejected line, guard and
// state, and the shrunk timeline), and -summary tells it too.
func TestRunJUnit(t *testing.T) {
	dir := t.TempDir()
	junit, summary := filepath.Join(dir, "run.xml"), filepath.Join(dir, "summary.md")
	code, out, errs := runCLI("run", "-seeds", "3", "-concurrent", "1", "-junit", junit, "-summary", summary, "-shrink-dir", dir)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	x := readJUnit(t, junit)
	require.Contains(t, x, `failures="0"`)
	for _, want := range []string{`name="run: invariants" tests="4"`, `name="run: traces" tests="4"`, `name="run: histories" tests="1"`, `<testcase name="concurrent-0"`} {
		require.Contains(t, x, want)
	}

	junit = filepath.Join(dir, "unfenced.xml")
	code, out, errs = runCLI("run", "-seeds", "10", "-concurrent", "0", "-unfenced", "-junit", junit, "-summary", summary, "-shrink-dir", dir)
	require.Equal(t, exitFailed, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	x = readJUnit(t, junit)
	require.Regexp(t, `<failure message="seed-\d+:\d+: \w+ by p\d: guard Fence(d|Abandon) =&gt; HasLease\(p\) fails`, x, "the message names the rejected line and its guard")
	require.Contains(t, x, "state: thread", "the failure holds the spec's state")
	require.Contains(t, x, "✗ REJECTED", "the failure holds the shrunk timeline")
	require.Contains(t, x, `<testcase name="run (FENCES OFF (the mutant))"`)
	md, err := os.ReadFile(summary)
	require.NoError(t, err)
	require.Contains(t, string(md), "## tracecheck run: PASS", "the summary is appended to, as $GITHUB_STEP_SUMMARY")
	require.Contains(t, string(md), "## tracecheck run: FAIL")
	require.Contains(t, string(md), "✗ REJECTED")
}

// TestReportFlagsRefuseADirectory: -junit or -summary naming a directory
// is bad usage, found before anything runs.
func TestReportFlagsRefuseADirectory(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"run", "-seeds", "1", "-junit", dir}, {"validate", "-summary", dir, "../../tracecheck/testdata/ok-abandon-fenced.ndjson"},
		{"conform", "-junit", dir}, {"fleet", "-junit", dir}, {"tlc", "-summary", dir},
	} {
		code, out, errs := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v: stdout:\n%s\nstderr:\n%s", args, out, errs)
		require.Contains(t, errs, "is a directory", "%v", args)
		require.Empty(t, out, "%v", args)
	}
}

// TestValidateJUnit: one case per file: accepted passes, rejected fails
// with the checker's story, malformed is an error.
func TestValidateJUnit(t *testing.T) {
	dir := t.TempDir()
	junit := filepath.Join(dir, "v.xml")
	malformed := filepath.Join(dir, "m.ndjson")
	require.NoError(t, os.WriteFile(malformed, []byte("{not json\n"), 0o644))
	fx := "../../tracecheck/testdata/"
	code, _, errs := runCLI("validate", "-junit", junit, fx+"ok-abandon-fenced.ndjson", fx+"bad-consumed-twice.ndjson", malformed)
	require.Equal(t, exitUsage, code, errs)
	x := readJUnit(t, junit)
	require.Contains(t, x, `<testsuite name="validate: files" tests="3" failures="1" errors="1" skipped="0"`)
	require.Regexp(t, `<failure message="[^"]*bad-consumed-twice.ndjson:8: RunStart`, x)
	require.Contains(t, x, "state: thread")
}

// TestConformJUnit: conform's edges and verdict as cases; with the fences
// off, each divergence kept is a failing case whose story is its path.
func TestConformJUnit(t *testing.T) {
	dir := t.TempDir()
	junit := filepath.Join(dir, "c.xml")
	code, out, errs := runCLI("conform", "-cfg", "../../spec/ThreadClaimLapse.cfg", "-sample", "40", "-unfenced", "-junit", junit)
	require.Equal(t, exitFailed, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	x := readJUnit(t, junit)
	require.Contains(t, x, `<testsuite name="conform: divergences"`)
	require.Contains(t, x, "path: ")
	require.True(t, strings.Count(x, "<failure") >= 2, "a divergence and the verdict fail:\n%s", x)
}

// TestFleetVerdicts: fleet's report as verdicts: a check that found a
// problem fails with it (the rejected trace's case carries the printed
// story), a porcupine timeout is skipped, the sample TLC did not run is
// skipped with why; the XML is valid.
func TestFleetVerdicts(t *testing.T) {
	rep := &fleet.Report{
		Fences: "all on", TraceFile: "trace.ndjson", TraceError: "trace.ndjson:7: RunStart by p1: guard Fenced => HasLease(p) fails",
		Inconclusive: true, LinResult: "timed out after 1m", TLC: "not run (no -tlc-sample)",
		Problems: []string{"I1_ConsumedAtMostOnce: 1 messages consumed more than once", "trace.ndjson:7: RunStart by p1: guard Fenced => HasLease(p) fails"},
	}
	r := fleetVerdicts(rep, "the story: ✗ REJECTED at line 7", failure{exitFailed, "FAIL"})
	var b strings.Builder
	require.NoError(t, r.WriteJUnit(&b))
	require.NoError(t, report.CheckJUnit([]byte(b.String())), b.String())
	byName := map[string]report.Verdict{}
	for _, v := range r.Verdicts {
		byName[v.Name] = v
	}
	require.Equal(t, report.Failed, byName["I1_ConsumedAtMostOnce"].Status)
	require.Equal(t, report.Passed, byName["NoLiveAbandon"].Status)
	tr := byName["trace (the Go trace checker)"]
	require.Equal(t, report.Failed, tr.Status)
	require.Contains(t, tr.Story, "✗ REJECTED at line 7")
	require.Equal(t, report.Skipped, byName["history (porcupine)"].Status)
	require.Equal(t, report.Skipped, byName["TLC trace validation (-tlc-sample)"].Status)
	require.Equal(t, report.Failed, byName["fleet (fences all on)"].Status)
}
