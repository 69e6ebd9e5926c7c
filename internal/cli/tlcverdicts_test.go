//go:build unix

package cli

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/report"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/internal/tlc"
	"github.com/threadclaim/threadclaim/tracecheck"
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
// threads is rejected at the lowest line over them; and every file's
// verdict must be the Go checker's, at the same line, whatever its name.
// (The fake TLC rejects a thread at its first line by "px"; the Go
// checker rejects a Post whose msg is not the next one, as line's second
// Post of a thread is.)
func TestTLCBatchExpectations(t *testing.T) {
	root, _ := tlcRepo(t, nil)
	dir := filepath.Join(root, "fx")
	post := func(tick, msg int, proc string) string {
		return strings.Replace(line(tick, "t1", proc), `"msg":1`, `"msg":`+strconv.Itoa(msg), 1)
	}
	writeTraces(t, dir, map[string]string{
		"bad-accepted.ndjson":      line(1, "t1", "a") + "\n",
		"bad-rejected.ndjson":      line(1, "t1", "a") + "\n" + line(2, "t1", "px") + "\n",
		"ok-accepted.ndjson":       line(1, "t1", "a") + "\n",
		"bad-two.ndjson":           lowestFirst(),
		"ok-rejected.ndjson":       line(1, "t1", "px") + "\n",
		"bad-go-accepts.ndjson":    post(1, 1, "a") + "\n" + post(2, 2, "px") + "\n",
		"bad-lines-differ.ndjson":  post(1, 1, "a") + "\n" + post(2, 1, "a") + "\n" + post(3, 2, "px") + "\n",
		"other-agree.ndjson":       line(1, "t1", "a") + "\n" + line(2, "t1", "px") + "\n",
		"other-disagree.ndjson":    post(1, 1, "px") + "\n",
		"ok-go-rejects-too.ndjson": post(1, 2, "px") + "\n",
	})
	code, out := runTLCCmd(t, root, "batch", dir)
	if code != exitFailed {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	wantAll(t, out,
		"FAIL  fx/bad-accepted.ndjson: expected rejected, got accepted\n",
		"PASS  fx/bad-rejected.ndjson: expected rejected, got rejected at line 2, as the Go checker does\n",
		"PASS  fx/ok-accepted.ndjson: expected accepted, got accepted\n",
		"PASS  fx/bad-two.ndjson: expected rejected, got rejected at line 3, as the Go checker does\n",
		"FAIL  fx/ok-rejected.ndjson: expected accepted, got rejected at line 1; the Go checker accepts it\n",
		"FAIL  fx/bad-go-accepts.ndjson: expected rejected, got rejected at line 2; the Go checker accepts it\n",
		"FAIL  fx/bad-lines-differ.ndjson: expected rejected, got rejected at line 3; the Go checker rejects it at line 2\n",
		"PASS  fx/other-agree.ndjson: rejected at line 2, as the Go checker does\n",
		"FAIL  fx/other-disagree.ndjson: rejected at line 1; the Go checker accepts it\n",
		"FAIL  fx/ok-go-rejects-too.ndjson: expected accepted, got rejected at line 1, as the Go checker does\n",
		"tlc: 6 of 10 checks unexpected",
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

// TestDifferentialSummaryNeedsEveryCase: the differential's summary
// passes only when the Go checker and TLC agree on every case; one case
// on which they disagree in the line alone fails by itself and fails the
// summary, which counts the cases, rejections and lines.
func TestDifferentialSummaryNeedsEveryCase(t *testing.T) {
	two := make([]core.TraceEvent, 2)
	for _, c := range []struct {
		name       string
		rs         []tlc.DiffResult
		failed     int
		want, fail string
	}{
		{"all agree", []tlc.DiffResult{
			{Case: tlc.DiffCase{From: "ok-1", Desc: "d1", Lines: two}, Go: 2, TLC: 2, GoErr: "x.ndjson:2: RunStart by p1: invariant I1_ConsumedAtMostOnce violated"},
			{Case: tlc.DiffCase{From: "ok-2", Desc: "d2", Lines: two}},
		}, 0, "PASS  differential: 2 mutated traces (f), 1 rejected by the Go checker (1 through an invariant), 4 lines: the Go checker and TLC agree on 2 of 2", ""},
		{"a line apart", []tlc.DiffResult{
			{Case: tlc.DiffCase{From: "ok-1", Desc: "d1", Lines: two}, Go: 2, TLC: 2},
			{Case: tlc.DiffCase{From: "ok-2", Desc: "d2", Lines: two}, Go: 1, TLC: 2, GoErr: "why\nmore"},
		}, 2, "FAIL  differential: 2 mutated traces (f), 2 rejected by the Go checker (0 through an invariant), 4 lines: the Go checker and TLC agree on 1 of 2",
			"FAIL  differential: ok-2: d2: the Go checker: rejected at line 1; TLC: rejected at line 2\n      Go's reason: why\n"},
		{"a verdict apart", []tlc.DiffResult{
			{Case: tlc.DiffCase{From: "ok-3", Desc: "d3", Lines: two}, Go: 0, TLC: 1},
		}, 2, "FAIL  differential: 1 mutated traces (f), 0 rejected by the Go checker (0 through an invariant), 2 lines: the Go checker and TLC agree on 0 of 1",
			"FAIL  differential: ok-3: d3: the Go checker: accepted; TLC: rejected at line 1"},
	} {
		var out bytes.Buffer
		r := &tlcRun{out: &out}
		r.reportDifferential("differential", c.rs, "f", time.Second)
		if r.failed != c.failed || r.checked != c.failed/2+1 {
			t.Errorf("%s: %d failed of %d checked, want %d of %d:\n%s", c.name, r.failed, r.checked, c.failed, c.failed/2+1, out.String())
		}
		wantAll(t, out.String(), c.want, c.fail)
	}
}

// TestUnfencedCaught: the generated traces' unfenced run caught the
// mutant only when it exited 1 having written bad-* traces: not when it
// passed, nor when it failed to run (usage, could not finish), nor when
// it exited 1 with no trace for TLC to reject.
func TestUnfencedCaught(t *testing.T) {
	for _, c := range []struct {
		rc, bad int
		want    bool
	}{
		{exitFailed, 3, true},
		{exitFailed, 1, true},
		{exitFailed, 0, false},
		{exitOK, 3, false},
		{exitUsage, 3, false},
		{exitCouldNotRun, 3, false},
		{-1, 3, false},
	} {
		if got := unfencedCaught(c.rc, c.bad); got != c.want {
			t.Errorf("unfencedCaught(exit %d, %d bad) = %v, want %v", c.rc, c.bad, got, c.want)
		}
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

// TestBrokenWalksBreakAnInvariant: the walks the differential adds with
// every fence off each end at the first state where an invariant the
// trace spec checks is false, and the Go checker, held to no fence,
// rejects each one's trace at its last line through an invariant (so the
// fences-off run compares the checks behind the fences). With every
// fence on, no walk breaks one.
func TestBrokenWalksBreakAnInvariant(t *testing.T) {
	cfg, err := specmodel.ReadConfig("../../spec/ThreadClaimLapse.cfg")
	if err != nil {
		t.Fatal(err)
	}
	if got := brokenWalks(specmodel.New(cfg), rand.New(rand.NewPCG(1, 2)), 5); len(got) != 0 {
		t.Fatalf("with every fence on, %d walks broke an invariant", len(got))
	}
	cfg.Fences = core.Fences{}
	m := specmodel.New(cfg)
	walks := brokenWalks(m, rand.New(rand.NewPCG(1, 2)), 20)
	if len(walks) != 20 {
		t.Fatalf("%d walks of 20 broke an invariant with every fence off", len(walks))
	}
	invariants := []string{core.InvTypeOK, core.InvConsumedAtMostOnce, core.InvOneActiveRun, core.InvNoLiveAbandon, core.InvSteeringException}
	broken := map[string]int{}
	for i, path := range walks {
		holds := func(k int) bool {
			return !slices.ContainsFunc(invariants, func(inv string) bool { return !m.Invariant(inv, &path[k].State) })
		}
		for k := range len(path) - 1 {
			if !holds(k) {
				t.Fatalf("walk %d: an invariant is false at step %d of %d: not cut at the first", i, k+1, len(path))
			}
		}
		if holds(len(path) - 1) {
			t.Fatalf("walk %d: every invariant holds at its end", i)
		}
		lines := m.TraceLines(path)
		_, err := tracecheck.Check(lines, tracecheck.WithFences(core.Fences{}))
		var v *tracecheck.Violation
		if !errors.As(err, &v) || v.Kind != tracecheck.ErrInvariant || v.Line != len(lines) {
			t.Fatalf("walk %d (%d lines): the Go checker with no fence: %v; want an invariant broken at its last line", i, len(lines), err)
		}
		broken[v.Rule]++
	}
	if broken[core.InvConsumedAtMostOnce] == 0 || broken[core.InvNoLiveAbandon] == 0 {
		t.Errorf("invariants the walks broke first: %v; want I1 and NoLiveAbandon among them", broken)
	}
}
