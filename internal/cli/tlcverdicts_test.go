//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/threadclaim/threadclaim/internal/report"
)

// The tests of this file came from the fifth mutation pass (7 Dec 2026):
// each fails with a mutant of the tlc command that no test caught.

// TestTLCTraceLowestLineFirstThread: a file's rejection is the lowest
// line over its threads also when that thread comes first in the file
// and a later thread is rejected further on.
func TestTLCTraceLowestLineFirstThread(t *testing.T) {
	root, _ := tlcRepo(t, nil)
	dir := filepath.Join(root, "fixtures")
	writeTraces(t, dir, map[string]string{
		"bad-first.ndjson": lowestFirst(),
		"expected-lines":   "bad-first.ndjson 3\n",
	})
	code, out := runTLCCmd(t, root, "trace", dir)
	want := "PASS  fixtures/bad-first.ndjson: expected rejected, got rejected at line 3 of 5 (Post), as the Go checker does (2 threads, each checked on its own)"
	if code != exitOK || !strings.Contains(out, want) {
		t.Errorf("exit %d, want 0 with %q:\n%s", code, want, out)
	}
}

// TestTLCMutantsSurvivorFails: tlc mutants reports a spec mutant that
// its check does not catch as a failure, by name (exit 1), and one it
// catches as a pass.
func TestTLCMutantsSurvivorFails(t *testing.T) {
	root, _ := tlcRepo(t, map[string]string{"M.cfg": "\\* expect: ok\n\\* fake: ok\n"})
	writeTraces(t, filepath.Join(root, "tla", "testdata"), map[string]string{"ok-a.ndjson": line(1, "t1", "a") + "\n"})
	writeTraces(t, filepath.Join(root, "spec", "mutants"), map[string]string{
		// The fake TLC reports what the cfg's second line says: this
		// edit makes it report a violation, which M.cfg does not expect.
		"caught.mutant": "# caught\nfile: spec/M.cfg\ncaught-by: spec/M.cfg\n--- replace\n\\* fake: ok\n--- with\n\\* fake: violation Inv\n",
		// An edit of the module the fake does not read: M.cfg still
		// reports ok.
		"survivor.mutant": "# survives\nfile: spec/M.tla\ncaught-by: spec/M.cfg\n--- replace\n====\n--- with\n=====\n",
	})
	code, out := runTLCCmd(t, root, "mutants")
	if code != exitFailed {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	wantAll(t, out,
		"PASS  mutant caught: caught by spec/M.cfg: expected ok, got violation Inv",
		"FAIL  mutant survivor: SURVIVED spec/M.cfg (survives)",
		"tlc: spec mutants: 1 of 2 caught",
	)
}

// TestTLCBatchExpectations: in batch mode a bad-* trace TLC accepts
// fails, as does an ok-* trace it rejects (exit 1); a file of several
// threads is rejected at the lowest line over them.
func TestTLCBatchExpectations(t *testing.T) {
	root, _ := tlcRepo(t, nil)
	dir := filepath.Join(root, "fx")
	writeTraces(t, dir, map[string]string{
		"bad-accepted.ndjson": line(1, "t1", "a") + "\n",
		"bad-rejected.ndjson": line(1, "t1", "a") + "\n" + line(2, "t1", "px") + "\n",
		"ok-accepted.ndjson":  line(1, "t1", "a") + "\n",
		"bad-two.ndjson":      lowestFirst(),
		"ok-rejected.ndjson":  line(1, "t1", "px") + "\n",
	})
	code, out := runTLCCmd(t, root, "batch", dir)
	if code != exitFailed {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	wantAll(t, out,
		"FAIL  fx/bad-accepted.ndjson: expected rejected, got accepted",
		"PASS  fx/bad-rejected.ndjson: expected rejected, got rejected at line 2",
		"PASS  fx/ok-accepted.ndjson: expected accepted, got accepted",
		"PASS  fx/bad-two.ndjson: expected rejected, got rejected at line 3\n",
		"FAIL  fx/ok-rejected.ndjson: expected accepted, got rejected at line 1",
		"tlc: 2 of 5 checks unexpected",
	)
}

// TestTLCGraphErrorFails: a state graph that cannot be compared (here:
// TLC wrote no dump) is a failed check, exit 1, not a run that did not
// finish (exit 4): only a cancelled run is that.
func TestTLCGraphErrorFails(t *testing.T) {
	b, err := os.ReadFile("../../spec/ThreadClaimLapseSmall.cfg")
	if err != nil {
		t.Fatal(err)
	}
	// Its expect and fires lines give way to the fake's: the fake TLC
	// reports no coverage.
	_, rest, _ := strings.Cut(string(b), "\n\\* fires: all\n")
	root, _ := tlcRepo(t, map[string]string{
		"ThreadClaimLapse.tla":      "---- MODULE ThreadClaimLapse ----\n====\n",
		"ThreadClaimLapseSmall.cfg": "\\* expect: ok\n\\* fake: ok\n" + rest,
	})
	code, out := runTLCCmd(t, root, "spec")
	wantAll(t, out,
		"PASS  spec/ThreadClaimLapseSmall.cfg: expected ok, got ok",
		"FAIL  graph spec/ThreadClaimLapseSmall.cfg: TLC's state graph against the Go model:",
	)
	if code != exitFailed || strings.Contains(out, "TLC did not finish") {
		t.Errorf("exit %d, want 1, and no run that did not finish:\n%s", code, out)
	}
}

// TestVerdictOfSurvivor: a mutant that survived (exit 5) is a failed
// verdict in -junit, -summary and -json, as a failed check is; not an
// error of a check that could not run.
func TestVerdictOfSurvivor(t *testing.T) {
	for _, c := range []struct {
		code int
		want report.Status
	}{
		{exitFailed, report.Failed},
		{exitSurvived, report.Failed},
		{exitInconclusive, report.Skipped},
		{exitCouldNotRun, report.Errored},
		{exitUsage, report.Errored},
	} {
		if got, _ := verdictOf(failure{c.code, "x"}); got != c.want {
			t.Errorf("exit %d: verdict %v, want %v", c.code, got, c.want)
		}
	}
	if got, _ := verdictOf(nil); got != report.Passed {
		t.Errorf("no error: verdict %v, want %v", got, report.Passed)
	}
}

// wantAll fails the test for each of wants that out lacks, showing out.
func wantAll(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("want %q in\n%s", w, out)
		}
	}
}

// lowestFirst is a trace of two threads, their lines interleaved: t1's
// second line (file line 3) is rejected, and t2's third (file line 5).
// The file is rejected at line 3, in the thread that comes first.
func lowestFirst() string {
	return strings.Join([]string{
		line(1, "t1", "a"), line(1, "t2", "a"), line(2, "t1", "px"), line(2, "t2", "a"), line(3, "t2", "px"),
	}, "\n") + "\n"
}
