//go:build unix

package cli

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// fakeTLC is a stand-in for java running TLC -tool. For a batch of traces
// (TRACE_BATCH set: the trace spec's batch mode) it matches each trace's
// lines up to the first whose proc is "px" and writes those counts to
// TRACE_RESULT (none if a line's proc is "pnoresult"; a line whose proc
// is "pcrash" crashes it); it logs one line per run to $FAKE_LOG ("batch N traces,
// fences F") and then one line per trace (its thread and length). For a
// model it reports what the cfg's second line asks for ("\* fake: ok",
// "\* fake: violation NAME", "\* fake: crash"; "\* fake: slow" is ok
// after half a second).
const fakeTLC = `#!/bin/sh
msg() { echo "@!@!@STARTMSG $1 @!@!@"; echo "$2"; echo "@!@!@ENDMSG ${1%%:*} @!@!@"; }
msg 2262:0 "TLC2 Version fake"
for a in "$@"; do case $a in -version) exit 1 ;; esac; done
cfg=""
prev=""
for a in "$@"; do
	[ "$prev" = "-config" ] && cfg=$a
	prev=$a
done
if [ -n "$TRACE_BATCH" ]; then
	# json.Marshal's [[{...},{...}],[{...}]]: no nested arrays or objects.
	grep -q '"proc":"pcrash"' "$TRACE_BATCH" && { echo "java.lang.OutOfMemoryError" >&2; exit 1; }
	awk -v logf="$FAKE_LOG" -v fences="${TRACE_FENCES-all}" '
		{ s = s $0 }
		END {
			s = substr(s, 3, length(s) - 4)
			n = split(s, ts, /\],\[/)
			print "batch " n " traces, fences " fences >> logf
			out = "["
			for (i = 1; i <= n; i++) {
				m = split(ts[i], ls, /\},\{/)
				got = m
				for (j = 1; j <= m; j++) if (ls[j] ~ /"proc":"px"/) { got = j - 1; break }
				th = ls[1]; sub(/.*"thread":"/, "", th); sub(/".*/, "", th)
				print "  trace " th " " m " lines" >> logf
				out = out (i > 1 ? "," : "") got
			}
			if (s !~ /"proc":"pnoresult"/) print out "]" > ENVIRON["TRACE_RESULT"]
		}' "$TRACE_BATCH"
	msg 2193:0 "Model checking completed. No error has been found."
else
	want=$(sed -n '2s/^\\\* fake: //p' "$cfg")
	case $want in
	ok) msg 2193:0 "Model checking completed. No error has been found." ;;
	slow) sleep 0.5; msg 2193:0 "Model checking completed. No error has been found." ;;
	"violation "*) msg 2110:1 "Invariant ${want#violation } is violated." ;;
	crash) echo "java.lang.OutOfMemoryError" >&2; exit 1 ;;
	esac
fi
msg 2199:0 "10 states generated, 7 distinct states found, 0 states left on queue."
msg 2194:0 "The depth of the complete state graph search is 3."
msg 2186:0 "Finished in 1ms at (2026-01-01 00:00:00)"
`

// tlcRepo makes a repository root with spec/ (the given cfgs, and a
// module) and tla/, a PATH holding the fake java, and jars for Find.
func tlcRepo(t *testing.T, cfgs map[string]string) (root, log string) {
	t.Helper()
	root = t.TempDir()
	bin := t.TempDir()
	mk := func(path, body string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	mk(filepath.Join(bin, "java"), fakeTLC, 0o755)
	mk(filepath.Join(root, "spec", "M.tla"), "---- MODULE M ----\n====\n", 0o644)
	for name, body := range cfgs {
		mk(filepath.Join(root, "spec", name), body, 0o644)
	}
	mk(filepath.Join(root, "tla", "ThreadClaimLapseTrace.tla"), "", 0o644)
	mk(filepath.Join(root, "tla", "ThreadClaimLapseTrace.cfg"), "", 0o644)
	jar := filepath.Join(bin, "tla2tools.jar")
	cm := filepath.Join(bin, "cm.jar")
	mk(jar, "jar", 0o644)
	mk(cm, "cm", 0o644)
	log = filepath.Join(t.TempDir(), "fake.log")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("TLA2TOOLS_JAR", jar)
	t.Setenv("COMMUNITY_MODULES_JAR", cm)
	t.Setenv("TLA2TOOLS_SHA256", "")
	t.Setenv("COMMUNITY_MODULES_SHA256", "")
	t.Setenv("TLC_CACHE_DIR", t.TempDir())
	t.Setenv("TLC_OFFLINE", "1")
	t.Setenv("TLC_KEEP_LOGS", "")
	t.Setenv("TRACE_DIR", "")
	t.Setenv("FAKE_LOG", log)
	return root, log
}

// line is a well-formed trace line of thread th by proc with tick.
func line(tick int, th, proc string) string {
	return `{"tick":` + strconv.Itoa(tick) + `,"read":false,"action":"Post","thread":"` + th + `","proc":"` + proc + `","holder":"","msg":1,"req":0,"run":0,"taken":0,"lease":""}`
}

func runTLCCmd(t *testing.T, root string, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := Main(context.Background(), append([]string{"tlc", "-root", root}, args...), &out, &out)
	return code, out.String()
}

func TestTLCModels(t *testing.T) {
	root, _ := tlcRepo(t, map[string]string{
		"M.cfg":       "\\* expect: ok\n\\* fake: ok\n",
		"MBad.cfg":    "\\* expect: violation Inv\n\\* fake: violation Inv\n",
		"MOther.cfg":  "\\* expect: violation Inv\n\\* fake: violation Other\n",
		"MPass.cfg":   "\\* expect: violation Inv\n\\* fake: ok\n",
		"MTwo.cfg":    "\\* expect: violation Inv Other\n\\* fake: violation Inv\n",
		"MNone.cfg":   "\\* fake: ok\n",
		"MCrash.cfg":  "\\* expect: ok\n\\* fake: crash\n",
		"MOkBad.cfg":  "\\* expect: ok\n\\* fake: violation Inv\n",
		"XNoMod.cfg":  "\\* expect: ok\n\\* fake: ok\n",
		"MEmpty.cfg":  "",
		"MBlank.cfg":  "\\* expect: violation\n\\* fake: violation Inv\n",
		"MSpace.cfg":  "\\* expect: violation Inv extra\n\\* fake: violation Inv\n",
		"MOkName.cfg": "\\* expect: ok Inv\n\\* fake: ok\n",
	})
	code, out := runTLCCmd(t, root, "spec")
	if code != exitFailed {
		t.Errorf("exit %d, want 1\n%s", code, out)
	}
	want := map[string]string{
		"M.cfg":       "PASS  spec/M.cfg: expected ok, got ok; 7 distinct states, depth 3",
		"MBad.cfg":    "PASS  spec/MBad.cfg: expected violation Inv, got violation Inv",
		"MOther.cfg":  "FAIL  spec/MOther.cfg: expected violation Inv, got violation Other",
		"MPass.cfg":   "FAIL  spec/MPass.cfg: expected violation Inv, got ok",
		"MTwo.cfg":    "FAIL  spec/MTwo.cfg: spec/MTwo.cfg:1: the first line must be",
		"MNone.cfg":   "FAIL  spec/MNone.cfg: spec/MNone.cfg:1: the first line must be",
		"MCrash.cfg":  "FAIL  spec/MCrash.cfg: TLC did not finish",
		"MOkBad.cfg":  "FAIL  spec/MOkBad.cfg: expected ok, got violation Inv",
		"XNoMod.cfg":  "FAIL  spec/XNoMod.cfg: no spec/*.tla module",
		"MEmpty.cfg":  "FAIL  spec/MEmpty.cfg: spec/MEmpty.cfg:1: the first line must be",
		"MBlank.cfg":  "FAIL  spec/MBlank.cfg: spec/MBlank.cfg:1: the first line must be",
		"MSpace.cfg":  "FAIL  spec/MSpace.cfg: spec/MSpace.cfg:1: the first line must be",
		"MOkName.cfg": "FAIL  spec/MOkName.cfg: spec/MOkName.cfg:1: the first line must be",
	}
	for cfg, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: want %q in\n%s", cfg, w, out)
		}
	}
	if !strings.Contains(out, "tlc: 10 of 13 checks unexpected, 1 did not finish") {
		t.Errorf("summary missing or wrong:\n%s", out)
	}

	// Only the passing ones, and a run that cannot finish: exit 4.
	root, _ = tlcRepo(t, map[string]string{
		"M.cfg":      "\\* expect: ok\n\\* fake: ok\n",
		"MCrash.cfg": "\\* expect: ok\n\\* fake: crash\n",
	})
	if code, out := runTLCCmd(t, root, "spec"); code != exitCouldNotRun {
		t.Errorf("a crashed TLC: exit %d, want 4\n%s", code, out)
	}
	if code, out := runTLCCmd(t, root, "-skip", "MCrash.cfg", "spec"); code != exitOK || !strings.Contains(out, "SKIP  spec/MCrash.cfg") {
		t.Errorf("-skip: exit %d, want 0\n%s", code, out)
	}
	if code, out := runTLCCmd(t, root, "-skip", "Nope.cfg", "spec"); code != exitUsage {
		t.Errorf("-skip of a missing cfg: exit %d, want 2\n%s", code, out)
	}
}

// The cfgs are checked -parallel at once and reported in their order:
// a slow first cfg's line comes before the quicker ones after it.
func TestTLCModelsReportedInOrder(t *testing.T) {
	root, _ := tlcRepo(t, map[string]string{
		"MA.cfg": "\\* expect: ok\n\\* fake: slow\n",
		"MB.cfg": "\\* expect: ok\n\\* fake: ok\n",
		"MC.cfg": "\\* expect: violation Inv\n\\* fake: violation Inv\n",
	})
	code, out := runTLCCmd(t, root, "-parallel", "3", "spec")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s", code, out)
	}
	a, b, c := strings.Index(out, "PASS  spec/MA.cfg"), strings.Index(out, "PASS  spec/MB.cfg"), strings.Index(out, "PASS  spec/MC.cfg")
	if a < 0 || b < a || c < b {
		t.Errorf("the cfgs' lines are not in the cfgs' order (MA, MB, MC):\n%s", out)
	}
}

// writeTraces writes files into dir.
func writeTraces(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTLCTraceThreads: a file of two interleaved threads is split by
// thread, each thread goes to TLC alone, and a rejection is reported at
// its line in the file, the lowest over the threads, and compared with
// expected-lines.
func TestTLCTraceThreads(t *testing.T) {
	root, log := tlcRepo(t, map[string]string{"M.cfg": "\\* expect: ok\n\\* fake: ok\n"})
	dir := filepath.Join(root, "fixtures")
	writeTraces(t, dir, map[string]string{
		// Thread t2's second line (file line 4) is rejected; t1's third
		// (file line 5) too: the file's rejection is line 4.
		"bad-two.ndjson": strings.Join([]string{
			line(1, "t1", "a"), line(1, "t2", "a"), line(2, "t1", "a"), line(2, "t2", "px"), line(3, "t1", "px"),
		}, "\n") + "\n",
		"bad-wrong-line.ndjson": line(1, "t1", "a") + "\n" + line(2, "t1", "px") + "\n",
		"ok-two.ndjson":         line(1, "t1", "a") + "\n" + line(1, "t2", "a") + "\n",
		"ok-rejected.ndjson":    line(1, "t1", "px") + "\n",
		"expected-lines":        "# the Go checker's lines\nbad-two.ndjson 4\nbad-wrong-line.ndjson 1\n",
	})
	code, out := runTLCCmd(t, root, "trace", dir)
	if code != exitFailed {
		t.Errorf("exit %d, want 1\n%s", code, out)
	}
	wantAll(t, out,
		"PASS  fixtures/bad-two.ndjson: expected rejected, got rejected at line 4 of 5 (Post), as the Go checker does (2 threads, each checked on its own)",
		"FAIL  fixtures/bad-wrong-line.ndjson: expected rejected, got rejected at line 2 of 2 (Post); the Go checker rejects it at line 1",
		"PASS  fixtures/ok-two.ndjson: expected accepted, got accepted (2 threads",
		"FAIL  fixtures/ok-rejected.ndjson: expected accepted, got rejected at line 1 of 1",
		"tlc: 2 of 4 checks unexpected",
	)
	// One TLC run for every thread of every file, each trace one
	// thread's lines, in file order.
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	want := "batch 6 traces, fences all\n" +
		"  trace t1 3 lines\n  trace t2 2 lines\n" + // bad-two
		"  trace t1 2 lines\n" + // bad-wrong-line
		"  trace t1 1 lines\n" + // ok-rejected
		"  trace t1 1 lines\n  trace t2 1 lines\n" // ok-two
	if string(b) != want {
		t.Errorf("TLC's runs:\n%s\nwant:\n%s", b, want)
	}
}

// TestTLCTraceFences: a directory's fences file is the fences its traces
// are held to; directories with other fences go to TLC in runs of their
// own, and a file given alone is held to all of them.
func TestTLCTraceFences(t *testing.T) {
	root, log := tlcRepo(t, nil)
	good := line(1, "t1", "a") + "\n"
	writeTraces(t, filepath.Join(root, "on"), map[string]string{"ok-a.ndjson": good})
	writeTraces(t, filepath.Join(root, "off"), map[string]string{"ok-b.ndjson": good, "ok-c.ndjson": good, "fences": "reply abandon\n"})
	writeTraces(t, filepath.Join(root, "none"), map[string]string{"ok-d.ndjson": good, "fences": "none\n"})
	writeTraces(t, filepath.Join(root, "typo"), map[string]string{"ok-e.ndjson": good, "fences": "strat\n"})
	code, out := runTLCCmd(t, root, "trace", filepath.Join(root, "on"), filepath.Join(root, "off"), filepath.Join(root, "none"), filepath.Join(root, "on", "ok-a.ndjson"))
	if code != exitOK {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	runs := regexp.MustCompile(`(?m)^batch .*$`).FindAllString(string(b), -1)
	want := []string{"batch 2 traces, fences all", "batch 2 traces, fences reply abandon", "batch 1 traces, fences none"}
	if !slices.Equal(runs, want) {
		t.Errorf("TLC runs %q, want %q:\n%s", runs, want, out)
	}
	if !strings.Contains(out, `trace fixtures (fences on: "reply abandon"): 2 traces (2 threads) in one TLC run, 2 lines`) {
		t.Errorf("no speed line for the unfenced run:\n%s", out)
	}
	if code, out := runTLCCmd(t, root, "trace", filepath.Join(root, "typo")); code != exitUsage || !strings.Contains(out, `unknown fence "strat"`) {
		t.Errorf("an unknown fence: exit %d, want 2:\n%s", code, out)
	}
}

// TestTLCTraceBatchFails: a batch that gives no verdicts is a failure of
// every check (exit 1); a TLC that crashes did not finish (exit 4).
func TestTLCTraceBatchFails(t *testing.T) {
	for _, c := range []struct {
		proc string
		code int
		want string
	}{
		{"pnoresult", exitFailed, "FAIL  trace fixtures: 2 traces (2 threads) in one TLC run: tlc: trace batch gave no verdicts"},
		{"pcrash", exitCouldNotRun, "FAIL  trace fixtures: 2 traces (2 threads) in one TLC run: TLC did not finish"},
	} {
		root, _ := tlcRepo(t, nil)
		dir := filepath.Join(root, "fx")
		writeTraces(t, dir, map[string]string{"ok-a.ndjson": line(1, "t1", "a") + "\n", "ok-b.ndjson": line(1, "t1", c.proc) + "\n"})
		code, out := runTLCCmd(t, root, "trace", dir)
		if code != c.code || !strings.Contains(out, c.want) || strings.Contains(out, "PASS") {
			t.Errorf("%s: exit %d, want %d with %q and no PASS:\n%s", c.proc, code, c.code, c.want, out)
		}
	}
}

// TestTLCTraceInput: malformed or empty input is exit 2 with file:line,
// and TLC never runs; a bad-* fixture that the Go reader rejects at its
// expected line passes without TLC.
func TestTLCTraceInput(t *testing.T) {
	good := line(1, "t1", "a") + "\n"
	cases := []struct {
		name  string
		files map[string]string
		code  int
		want  string
		tlc   bool // TLC runs
	}{
		{"malformed ok", map[string]string{"ok-a.ndjson": good + `{"tick":2,` + "\n"}, exitUsage, "ok-a.ndjson:2: malformed trace line", false},
		{"unknown field", map[string]string{"ok-a.ndjson": strings.Replace(good, `"tick"`, `"extra":1,"tick"`, 1)}, exitUsage, "ok-a.ndjson:1: malformed trace line", false},
		{"empty", map[string]string{"ok-a.ndjson": ""}, exitUsage, "empty trace", false},
		{"malformed after a good file", map[string]string{"ok-a.ndjson": good, "ok-b.ndjson": "not json\n"}, exitUsage, "ok-b.ndjson:1: malformed", false},
		{"bad fixture malformed at its line", map[string]string{"bad-m.ndjson": good + "{\n", "expected-lines": "bad-m.ndjson 2\n"}, exitOK, "rejected by the Go reader at line 2", false},
		{"bad fixture malformed elsewhere", map[string]string{"bad-m.ndjson": good + "{\n", "expected-lines": "bad-m.ndjson 1\n"}, exitFailed, "the Go checker's line is 1", false},
		{"unnamed fixture", map[string]string{"trace.ndjson": good}, exitFailed, "cannot tell the expected outcome", false},
		{"no traces", map[string]string{"README": "x"}, exitUsage, "no *.ndjson traces", false},
		{"bad expected-lines", map[string]string{"ok-a.ndjson": good, "expected-lines": "ok-a.ndjson x\n"}, exitUsage, "want FILE LINE", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, log := tlcRepo(t, nil)
			dir := filepath.Join(root, "fx")
			writeTraces(t, dir, c.files)
			code, out := runTLCCmd(t, root, "trace", dir)
			if code != c.code || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, c.code, c.want, out)
			}
			if _, err := os.Stat(log); (err == nil) != c.tlc {
				t.Errorf("TLC ran: %v, want %v", err == nil, c.tlc)
			}
		})
	}
	// A file given by itself is expected to be accepted, whatever its name.
	root, _ := tlcRepo(t, nil)
	f := filepath.Join(root, "mine.ndjson")
	writeTraces(t, root, map[string]string{"mine.ndjson": line(1, "t1", "px") + "\n"})
	if code, out := runTLCCmd(t, root, "trace", f); code != exitFailed || !strings.Contains(out, "expected accepted, got rejected at line 1") {
		t.Errorf("exit %d, want 1:\n%s", code, out)
	}
	if code, out := runTLCCmd(t, root, "trace", filepath.Join(root, "missing.ndjson")); code != exitUsage {
		t.Errorf("a missing file: exit %d, want 2:\n%s", code, out)
	}
}

// TestTLCNotRun: without java or without a jar TLC is not run: exit 3.
func TestTLCNotRun(t *testing.T) {
	root, _ := tlcRepo(t, map[string]string{"M.cfg": "\\* expect: ok\n\\* fake: ok\n"})
	t.Setenv("TLA2TOOLS_JAR", "")
	code, out := runTLCCmd(t, root, "spec")
	if code != exitNotRun || !strings.Contains(out, "TLC was not run: tlc: not found: no tla2tools.jar") {
		t.Errorf("no jar: exit %d, want 3:\n%s", code, out)
	}
	path := os.Getenv("PATH")
	t.Setenv("PATH", t.TempDir())
	if code, out := runTLCCmd(t, root, "spec"); code != exitNotRun || !strings.Contains(out, "no java") {
		t.Errorf("no java: exit %d, want 3:\n%s", code, out)
	}
	t.Setenv("PATH", path)

	// Models run, the trace spec has no CommunityModules: all mode runs
	// the models and still says the traces were not run.
	root, _ = tlcRepo(t, map[string]string{"M.cfg": "\\* expect: ok\n\\* fake: ok\n"})
	t.Setenv("COMMUNITY_MODULES_JAR", "")
	dir := filepath.Join(root, "fx")
	writeTraces(t, dir, map[string]string{"ok-a.ndjson": line(1, "t1", "a") + "\n"})
	t.Setenv("TRACE_DIR", dir)
	code, out = runTLCCmd(t, root, "all")
	if code != exitNotRun || !strings.Contains(out, "PASS  spec/M.cfg") || !strings.Contains(out, "TLC was not run on the traces") {
		t.Errorf("all without CommunityModules: exit %d, want 3:\n%s", code, out)
	}
	if code, out := runTLCCmd(t, root, "trace"); code != exitNotRun {
		t.Errorf("trace without CommunityModules: exit %d, want 3:\n%s", code, out)
	}
	// A wrong digest is exit 1, before any java runs.
	t.Setenv("TLA2TOOLS_SHA256", strings.Repeat("0", 64))
	if code, out := runTLCCmd(t, root, "spec"); code != exitFailed || !strings.Contains(out, "sha256 mismatch") || strings.Contains(out, "TLC2 Version") {
		t.Errorf("wrong digest: exit %d, want 1 before TLC runs:\n%s", code, out)
	}
}

// TestScriptsTLCExitCode: scripts/tlc hands tracecheck tlc's exit code to
// its caller unchanged, so that scripts/test can tell TLC not run (3) and
// bad usage (2) from a failure (1): `go run`, which the script used to
// exec, turns every non-zero exit into 1. Here no jar can be had (none in
// the environment, an empty cache, offline), so TLC is not run.
func TestScriptsTLCExitCode(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH: scripts/tlc builds tracecheck with it")
	}
	t.Setenv("TLA2TOOLS_JAR", "")
	t.Setenv("COMMUNITY_MODULES_JAR", "")
	t.Setenv("TLC_CACHE_DIR", t.TempDir())
	t.Setenv("TLC_OFFLINE", "1")
	run := func(args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "../../scripts/tlc", args...).CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("scripts/tlc %v (building tracecheck, then tlc) did not finish in 5 minutes:\n%s", args, out)
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("scripts/tlc %v: %v", args, err)
		}
		if ee != nil {
			return ee.ExitCode(), string(out)
		}
		return 0, string(out)
	}
	if code, out := run("spec"); code != exitNotRun || !strings.Contains(out, "TLC was not run") {
		t.Errorf("no jar: scripts/tlc spec exited %d, want %d (TLC not run):\n%s", code, exitNotRun, out)
	}
	if code, out := run("-no-such-flag"); code != exitUsage {
		t.Errorf("bad usage: scripts/tlc exited %d, want %d:\n%s", code, exitUsage, out)
	}
}

func TestTLCUsage(t *testing.T) {
	root, _ := tlcRepo(t, nil)
	for _, args := range [][]string{{"spec", "x"}, {"bogus"}, {"-parallel", "0"}, {"-timeout", "0s"}, {"-nope"}} {
		if code, out := runTLCCmd(t, root, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2:\n%s", args, code, out)
		}
	}
	if code, out := runTLCCmd(t, root, "bogusmode"); code != exitUsage || !strings.Contains(out, `unknown mode "bogusmode": want all, spec, trace`) {
		t.Errorf("bogusmode: exit %d, want 2 naming the modes:\n%s", code, out)
	}
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"tlc", "-h"}, &out, &out); code != exitOK || !strings.Contains(out.String(), "usage: tracecheck tlc") {
		t.Errorf("-h: exit %d:\n%s", code, out.String())
	}
	if code, out := runTLCCmd(t, t.TempDir(), "spec"); code != exitUsage || !strings.Contains(out, "not the repository's root") {
		t.Errorf("no spec/: exit %d:\n%s", code, out)
	}
}

// With no DIR and no $TRACE_DIR, the trace mode checks every fixture
// directory: tla/testdata, each subdirectory of it that holds traces
// (held to the fences its "fences" file names), and tracecheck/testdata;
// as the spec mutants' check does (tlc.FixtureDirs).
func TestCollectTracesDefaultsToEveryFixtureDir(t *testing.T) {
	root := t.TempDir()
	t.Setenv("TRACE_DIR", "")
	writeTraces(t, filepath.Join(root, "tla", "testdata"), map[string]string{"ok-a.ndjson": line(1, "t1", "a") + "\n"})
	writeTraces(t, filepath.Join(root, "tla", "testdata", "abandon-unfenced"), map[string]string{
		"ok-b.ndjson": line(1, "t1", "b") + "\n", "fences": "start reply\n"})
	writeTraces(t, filepath.Join(root, "tla", "testdata", "empty"), map[string]string{"README": "no traces\n"})
	writeTraces(t, filepath.Join(root, "tracecheck", "testdata"), map[string]string{"ok-c.ndjson": line(1, "t1", "c") + "\n"})
	ins, err := collectTraces(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]core.Fences{}
	for _, in := range ins {
		got[in.show] = in.fences
	}
	want := map[string]core.Fences{
		filepath.Join("tla", "testdata", "ok-a.ndjson"):                     core.AllFences(),
		filepath.Join("tla", "testdata", "abandon-unfenced", "ok-b.ndjson"): {Start: true, Reply: true},
		filepath.Join("tracecheck", "testdata", "ok-c.ndjson"):              core.AllFences(),
	}
	if !maps.Equal(got, want) {
		t.Errorf("the default trace inputs and their fences: %v, want %v", got, want)
	}
}
