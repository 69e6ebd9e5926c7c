package tlc

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var record = flag.Bool("record", false, "run TLC and rewrite testdata/*.out (needs java and the jars; see Find)")

// recording is one TLC run whose -tool output is kept in testdata as
// testdata/NAME.out, with what the parser must read from it.
type recording struct {
	name string
	job  func(t testing.TB, root, tmp string) Job
	want want
}

type want struct {
	outcome   Outcome
	name      string
	text      string // a substring of Result.Text
	distinct  int64  // -1: not reported
	depth     int    // -1: not reported
	traceLen  int
	lastVar   string // a variable of the trace's last state...
	lastValue string // ...and its value
	stutters  bool   // the last state is Stuttering
	backTo    int    // the last state loops back to this state
}

// specJob checks a copy of spec/ with cfg.
func specJob(cfg string) func(t testing.TB, root, tmp string) Job {
	return func(t testing.TB, root, tmp string) Job {
		dir := copyDir(t, root, "spec", tmp)
		return Job{Spec: "ThreadClaimLapse.tla", Config: cfg, Dir: dir, Workers: 1}
	}
}

// traceJob runs the trace spec on a copy of tla/ with the trace file.
func traceJob(trace string) func(t testing.TB, root, tmp string) Job {
	return func(t testing.TB, root, tmp string) Job {
		spec := copyDir(t, root, "spec", tmp)
		dir := copyDir(t, root, "tla", tmp)
		return Job{
			Spec: "ThreadClaimLapseTrace.tla", Config: "ThreadClaimLapseTrace.cfg", Dir: dir,
			Library: []string{spec}, Env: []string{"JSON=" + filepath.Join(root, trace)}, Workers: 1,
		}
	}
}

// tinyJob checks one of the small specs in testdata/specs.
func tinyJob(module string) func(t testing.TB, root, tmp string) Job {
	return func(t testing.TB, root, tmp string) Job {
		dir := copyDir(t, filepath.Join(root, "internal", "tlc", "testdata"), "specs", tmp)
		return Job{Spec: module + ".tla", Config: module + ".cfg", Dir: dir, Workers: 1}
	}
}

var recordings = []recording{
	{"ok", specJob("ThreadClaimLapse.cfg"), want{outcome: NoError, distinct: 228049, depth: 30}},
	{"invariant", specJob("ThreadClaimLapseUnfenced.cfg"), want{outcome: InvariantViolated, name: "I1_ConsumedAtMostOnce", distinct: 497, depth: 9, traceLen: 9, lastVar: "consumed", lastValue: "<<2, 0, 0>>"}},
	{"property", traceJob("tla/testdata/bad-start-under-other-lease.ndjson"), want{outcome: PropertyViolated, name: "TraceAccepted", distinct: 6, depth: 6, traceLen: 6, lastVar: "l", lastValue: "5"}},
	{"trace-ok", traceJob("tla/testdata/ok-one-turn.ndjson"), want{outcome: NoError, distinct: 7, depth: 7}},
	{"liveness", tinyJob("Live"), want{outcome: PropertyViolated, name: "Reaches", distinct: 3, depth: 3, traceLen: 2, stutters: true}},
	{"lasso", tinyJob("Lasso"), want{outcome: PropertyViolated, name: "Reaches", distinct: 3, depth: 3, traceLen: 4, backTo: 1}},
	{"deadlock", tinyJob("Deadlock"), want{outcome: Deadlock, distinct: 3, depth: 3, traceLen: 3, lastVar: "x", lastValue: "2"}},
	{"parse", tinyJob("Parse"), want{outcome: ParseError, text: `Encountered "Beginning of definition" at line 6, column 1`, distinct: -1, depth: -1}},
	{"semantic", tinyJob("Semantic"), want{outcome: ParseError, text: "Unknown operator: `Undefined'", distinct: -1, depth: -1}},
	{"assume", tinyJob("Assume"), want{outcome: AssumptionFalse, text: "Assumption line 5, col 8 to line 5, col 12 of module Assume is false", distinct: -1, depth: -1}},
	{"assume-trace", traceJob("internal/tlc/testdata/traces/two-threads.ndjson"), want{outcome: AssumptionFalse, text: "of module ThreadClaimLapseTrace is false", distinct: -1, depth: -1}},
	{"error", traceJob("internal/tlc/testdata/traces/missing-msg-field.ndjson"), want{outcome: Failed, text: `Attempted to select nonexistent field "msg"`, distinct: 1, depth: 1, traceLen: 1, lastVar: "l", lastValue: "1"}},
}

// TestRecord rewrites the recordings with a real TLC: go test ./internal/tlc -run
// TestRecord -record. It is skipped without -record.
func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("run with -record to rewrite testdata/*.out with a real TLC")
	}
	env, err := Find(context.Background(), FindConfig{})
	if err != nil {
		t.Fatalf("-record needs TLC: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recordings {
		t.Run(r.name, func(t *testing.T) {
			var out bytes.Buffer
			job := r.job(t, root, t.TempDir())
			job.Output = &out
			job.Timeout = 5 * time.Minute
			if _, err := env.Run(context.Background(), job); err != nil && !errors.Is(err, ErrIncomplete) {
				t.Fatalf("%s: %v", r.name, err)
			}
			if err := os.WriteFile(filepath.Join("testdata", r.name+".out"), out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// copyDir copies the regular files of root/name into tmp/name and
// returns the copy's path: TLC may write beside a spec.
func copyDir(t testing.TB, root, name, tmp string) string {
	t.Helper()
	dst := filepath.Join(tmp, name)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, name, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
