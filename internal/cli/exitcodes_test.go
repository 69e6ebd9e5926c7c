package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/fleet"
)

// The exit codes and -json objects the CI gate reads, where no other test
// pinned them: each test names the fourteenth mutation pass's mutant it
// catches (cmd/tracecheck/README.md, "What the checks catch").

const okTrace = "../../tracecheck/testdata/ok-run-ask-reply.ndjson"

// jsonOf decodes a command's -json object from its stdout.
func jsonOf(t *testing.T, out string) jsonSummary {
	t.Helper()
	var s jsonSummary
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	return s
}

// Catches mutant 07 (everyFenceOff.Set takes a value it cannot parse as false).
func TestFenceFlagRefusesABadValue(t *testing.T) {
	code, out, errs := runCLI("validate", "-unfenced-spec=maybe", okTrace)
	require.Equal(t, exitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Empty(t, out, "nothing checked for bad usage")
	require.Contains(t, errs, "unfenced-spec")
}

// Catches mutant 10 (writeReports drops the error writing -junit): a
// report that cannot be written is not a pass.
func TestReportWriteErrorIsNotAPass(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "no", "such", "dir", "j.xml")
	code, out, errs := runCLI("validate", "-junit", junit, okTrace)
	require.Equal(t, exitCouldNotRun, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, errs, "-junit")
	require.NoFileExists(t, junit)
}

// Catches mutant 12 (exitCode maps bad usage to 1): -json's exit and
// verdict for bad input are the process's, 2 and usage.
func TestJSONBadInputIsUsage(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.ops.ndjson")
	require.NoError(t, os.WriteFile(bad, []byte(`{"seed":1,"procs":2,"threads":1,"messages":1,"ttl":"10s"}`+"\n"+`{"op":"step","proc":"p3","thread":"t1"}`+"\n"), 0o644))
	code, out, errs := runCLI("replay", "-json", bad)
	require.Equal(t, exitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	s := jsonOf(t, out)
	require.Equal(t, exitUsage, s.Exit)
	require.Equal(t, "usage", s.Verdict)
	require.Equal(t, "replay", s.Command)
	require.Contains(t, s.Message, `proc "p3"`)
	require.Contains(t, errs, `proc "p3"`, "the message on stderr too, stdout being the object")
}

// Catches mutant 13 (-json drops the failure's message): a rejection's
// object says what failed.
func TestJSONCarriesTheMessage(t *testing.T) {
	code, out, errs := runCLI("validate", "-json", "../../tracecheck/testdata/bad-consumed-twice.ndjson")
	require.Equal(t, exitFailed, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	s := jsonOf(t, out)
	require.Equal(t, "fail", s.Verdict)
	require.Equal(t, exitFailed, s.Exit)
	require.Equal(t, "1 of 1 traces rejected", s.Message)
}

// Catches mutant 15 (-json names exit 5 "fail"): a surviving mutant's
// object says survived, with exit 5.
func TestJSONSurvivedVerdict(t *testing.T) {
	code, out, errs := runCLI("run", "-json", "-seeds", "2", "-steps", "1", "-concurrent", "0", "-unfenced")
	require.Equal(t, exitSurvived, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	s := jsonOf(t, out)
	require.Equal(t, "survived", s.Verdict)
	require.Equal(t, exitSurvived, s.Exit)
	require.Contains(t, s.Message, "SURVIVED")
}

// Catches mutant 24 (sort counts the lines left in place as moved) and
// mutant 25 (sort takes a second file, and ignores it).
func TestSortMovedAndOneFile(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(okTrace)
	require.NoError(t, err)
	lines := strings.SplitAfter(strings.TrimSuffix(string(good), "\n"), "\n")
	lines[2], lines[3] = lines[3], lines[2]
	p := filepath.Join(dir, "swapped.ndjson")
	require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644))
	code, out, errs := runCLI("sort", "-json", "-o", filepath.Join(dir, "sorted.ndjson"), p)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	var s struct{ Figures sortFigures }
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	require.Equal(t, len(lines), s.Figures.Lines)
	require.Equal(t, 2, s.Figures.Moved, "the two lines swapped, no others")

	never := filepath.Join(dir, "never.ndjson")
	code, out, errs = runCLI("sort", "-o", never, okTrace, p)
	require.Equal(t, exitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, errs, "want exactly one trace file")
	require.NoFileExists(t, never)
}

// Catches mutant 30 (replay prints FAIL for a passing replay): the
// verdict line of a passing replay is PASS.
func TestReplayPassPrintsPASS(t *testing.T) {
	dir := t.TempDir()
	ops := filepath.Join(dir, "seed.ops.ndjson")
	code, out, errs := runCLI("run", "-seeds", "1", "-seed", "57", "-concurrent", "0", "-ops-out", ops)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	code, out, errs = runCLI("replay", ops)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, out, "\nPASS\n")
	require.NotContains(t, out, "FAIL")
}

// Catches mutant 32 (export without -itf goes on, failing only at the
// write) and mutant 33 (export ignores the write's error and reports the
// states written).
func TestExportOutputRefused(t *testing.T) {
	code, out, errs := runCLI("export", okTrace)
	require.Equal(t, exitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, errs, "-itf OUT is required")

	unwritable := filepath.Join(t.TempDir(), "no", "such", "dir", "t.itf.json")
	code, out, errs = runCLI("export", "-itf", unwritable, okTrace)
	require.Equal(t, exitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Empty(t, out, "no states reported written")
	require.Contains(t, errs, unwritable)
}

// Catches mutant 34 (mutate -n 0 accepted), mutant 35 (a -dir holding a
// single mutant reused) and mutant 36 (mutate's bad input exits 1).
func TestMutateRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mut")
	code, out, errs := runCLI("mutate", "-n", "0", "-dir", dir, okTrace)
	require.Equal(t, exitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, errs, "-n 0")
	require.NoDirExists(t, dir, "nothing written for bad usage")

	empty := filepath.Join(t.TempDir(), "empty.ndjson")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	code, out, errs = runCLI("mutate", "-n", "1", "-dir", dir, empty)
	require.Equal(t, exitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, errs, "empty trace")
	require.NoDirExists(t, dir, "nothing written for bad input")

	code, out, errs = runCLI("mutate", "-n", "1", "-dir", dir, okTrace)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	code, out, errs = runCLI("mutate", "-n", "1", "-dir", dir, okTrace)
	require.Equal(t, exitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, errs, "already holds mutants (mut-0001.ndjson)")
}

// Catches mutant 38 (version takes an argument) and mutant 39 (a -root
// with no spec exits 4, not 2).
func TestVersionBadUsage(t *testing.T) {
	code, out, errs := runCLI("version", "extra")
	require.Equal(t, exitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, errs, `unexpected argument "extra"`)
	require.Empty(t, out)

	code, out, errs = runCLI("version", "-root", t.TempDir())
	require.Equal(t, exitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, errs, "no spec/*.tla")
	require.Empty(t, out)
}

// Catches mutant 41 (one history porcupine timed out on counted as a
// pass) and mutant 42 (a history that is not linearizable not counted as
// a failure, nor as the mutant caught): the verdict on a tally with one
// such history.
func TestRunVerdictOnHistories(t *testing.T) {
	var out strings.Builder
	unknown := &tally{lin: linTally{histories: 1, unknown: 1}}
	err := unknown.verdict("", 0, &out)
	require.Equal(t, exitInconclusive, exitCode(err), "%v", err)
	require.Contains(t, err.Error(), "INCONCLUSIVE: porcupine timed out on 1 histories")
	require.NotContains(t, out.String(), "PASS")

	illegal := &tally{lin: linTally{histories: 1, illegal: 1, first: "history h"}}
	err = illegal.verdict("", 0, &out)
	require.Equal(t, exitFailed, exitCode(err), "%v", err)
	require.Contains(t, err.Error(), "first non-linearizable history: history h")
	err = illegal.verdict("unfenced", 0, &out)
	require.Equal(t, exitFailed, exitCode(err), "%v", err)
	require.Contains(t, err.Error(), "the mutant was caught")
	require.NotContains(t, out.String(), "PASS")
}

// Catches mutant 43 (-faults above 1 accepted), mutant 44 (-min-actions
// below -1 accepted) and mutant 45 (-ops-out with no seeded execution
// accepted): bad usage, nothing run.
func TestRunFlagRanges(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"-faults", "1.5"}, "-faults 1.5 must be a probability"},
		{[]string{"-min-actions", "-2"}, "-min-actions -2 must not be negative"},
		{[]string{"-seeds", "0", "-concurrent", "1", "-ops-out", filepath.Join(t.TempDir(), "x.ops.ndjson")}, "-ops-out needs a seeded execution"},
	} {
		args := append([]string{"run", "-seeds", "1", "-steps", "5", "-concurrent", "0"}, tc.args...)
		code, out, errs := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v\nstdout:\n%s\nstderr:\n%s", args, out, errs)
		require.Contains(t, errs, tc.says, "%v", args)
		require.Empty(t, out, "%v: nothing run", args)
	}
}

// Catches mutant 46 (a fleet mutant not caught while porcupine timed out
// called survived, 5, not inconclusive, 3) and mutant 47 (a fleet run
// whose only trouble is porcupine's timeout passes): fleetVerdict's
// exit for each report.
func TestFleetVerdictExits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rep    fleet.Report
		mutant bool
		code   int
	}{
		{"pass", fleet.Report{}, false, exitOK},
		{"timed out", fleet.Report{Inconclusive: true, LinResult: "timed out"}, false, exitInconclusive},
		{"failed", fleet.Report{Problems: []string{"I1"}, Inconclusive: true}, false, exitFailed},
		{"mutant caught", fleet.Report{Problems: []string{"I1"}, Inconclusive: true}, true, exitFailed},
		{"mutant timed out", fleet.Report{Inconclusive: true, LinResult: "timed out"}, true, exitInconclusive},
		{"mutant survived", fleet.Report{}, true, exitSurvived},
	} {
		rep := tc.rep
		require.Equal(t, tc.code, exitCode(fleetVerdict(&rep, tc.mutant)), tc.name)
	}
	// A survivor's verdict says whether the run made an unfenced write.
	rep := fleet.Report{Fences: "off: abandon", UnfencedWrites: map[core.Action]int{core.ActionAbandon: 0}}
	require.ErrorContains(t, fleetVerdict(&rep, true), "could not show the mutant")
}

// Catches mutant 49 (conform's surviving mutant exits 1, as if caught):
// one sampled edge with the fences off shows no divergence, exit 5.
func TestConformMutantSurvivedExits5(t *testing.T) {
	code, out, errs := runCLI("conform", "-cfg", smallCfg(t, "ok", true), "-unfenced", "-sample", "1", "-seed", "1")
	require.Equal(t, exitSurvived, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, out, "\n0 divergences")
	require.Contains(t, out, "conform found no divergence")
}

// Catches mutant 52 (givenTwice counts a message again at each give past
// the second): a message given three times is one message given twice.
func TestGivenThriceCountsOnce(t *testing.T) {
	lines := []core.TraceEvent{
		{Action: core.ActionRunStart, Thread: "t", Msg: 1},
		{Action: core.ActionRunStart, Thread: "t", Msg: 1},
		{Action: core.ActionRunStart, Thread: "t", Msg: 1},
	}
	twice, again := givenTwice(lines)
	require.Equal(t, 1, twice)
	require.Equal(t, 0, again)
}

// Catches mutant 48 (fleet -json - prints a failure's message on stdout
// after the report): stdout is the report alone, the verdict on stderr.
func TestFleetJSONStdoutIsTheReport(t *testing.T) {
	bin := buildSelf(t)
	code, out, errs := runCLI("fleet", "-bin", bin, "-json", "-", "-unfenced", "-procs", "1", "-nemesis", "none", "-threads", "1", "-messages", "3")
	require.Equal(t, exitSurvived, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	var rep fleetReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), "stdout is one JSON object:\n%s", out)
	require.Equal(t, 3, rep.Posted)
	require.NotContains(t, out, "SURVIVED")
	require.Contains(t, errs, "SURVIVED")
}
