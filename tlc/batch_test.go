package tlc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// realTLC finds the TLC jars for tests that run TLC itself. Without them
// the test is skipped, saying so, unless REQUIRE_TLC=1, which makes a
// missing jar a failure.
func realTLC(t *testing.T) Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env, err := Find(ctx, FindConfig{})
	if err == nil && env.CommunityJar == "" {
		err = errors.New("no " + CommunityName)
	}
	if err != nil {
		if os.Getenv("REQUIRE_TLC") == "1" {
			t.Fatalf("REQUIRE_TLC=1 but TLC cannot run: %v", err)
		}
		t.Skipf("TLC NOT RUN: %v (put the jars in %s or set %s and %s; REQUIRE_TLC=1 makes this a failure)", err, FindConfig{}.LocalDir(), EnvJar, EnvCommunity)
	}
	return env
}

// scratch copies the repository's spec/ and tla/ for TLC.
func scratch(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := CopySpecs("..", dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func testBatch(dir string) Batch {
	return Batch{Dir: filepath.Join(dir, "tla"), SpecDir: filepath.Join(dir, "spec"), Job: Job{Timeout: 5 * time.Minute}}
}

// Every fixture in tla/testdata (and its subdirectories, with their
// fences) gets the verdict its name and expected-lines give, in one TLC
// run per set of fences.
func TestFixturesInOneBatch(t *testing.T) {
	env := realTLC(t)
	fxs, err := LoadFixtures(FixtureDirs("..")...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	vs, err := env.CheckFixtures(ctx, testBatch(scratch(t)), fxs)
	if err != nil {
		t.Fatal(err)
	}
	rejected := 0
	for i, fx := range fxs {
		if p := fx.Problem(vs[i]); p != "" {
			t.Errorf("%s: %s", fx.Path, p)
		}
		if vs[i].RejectedAt > 0 {
			rejected++
		}
	}
	if rejected == 0 || rejected == len(fxs) {
		t.Errorf("%d of %d fixtures rejected: the fixtures must have both verdicts", rejected, len(fxs))
	}
}

// A batch's verdicts do not depend on the traces beside them or on the
// number of workers: each trace is a chain of its own.
func TestBatchVerdictsIndependent(t *testing.T) {
	env := realTLC(t)
	read := func(name string) []core.TraceEvent {
		lines, err := tracecheck.ReadFile(filepath.Join("..", "tla", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return lines
	}
	ok, bad := read("ok-handover.ndjson"), read("bad-start-under-other-lease.ndjson")
	dir := scratch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, workers := range []int{1, 2} {
		b := testBatch(dir)
		b.Workers = workers
		vs, res, err := env.ValidateBatch(ctx, b, [][]core.TraceEvent{bad, ok, bad, ok})
		if err != nil {
			t.Fatal(err)
		}
		want := []Verdict{{Lines: 5, Matched: 4}, {Lines: 22, Matched: 22}, {Lines: 5, Matched: 4}, {Lines: 22, Matched: 22}}
		for i := range want {
			if vs[i] != want[i] {
				t.Errorf("workers %d, trace %d: got %+v, want %+v", workers, i+1, vs[i], want[i])
			}
		}
		if vs[0].RejectedAt() != 5 || !vs[1].Accepted() {
			t.Errorf("RejectedAt/Accepted: %d %v", vs[0].RejectedAt(), vs[1].Accepted())
		}
		if res.Distinct <= 0 {
			t.Errorf("no state counts in TLC's result: %+v", res)
		}
	}
}

func TestValidateBatchRefusesMixedThreads(t *testing.T) {
	lines := []core.TraceEvent{{Thread: "t1"}, {Thread: "t2"}}
	_, _, err := Env{}.ValidateBatch(context.Background(), Batch{Dir: "x", SpecDir: "y"}, [][]core.TraceEvent{lines})
	if err == nil {
		t.Fatal("a trace of two threads was accepted into a batch")
	}
	_, _, err = Env{}.ValidateBatch(context.Background(), Batch{Dir: "x", SpecDir: "y"}, [][]core.TraceEvent{{}})
	if err == nil {
		t.Fatal("an empty trace was accepted into a batch")
	}
}

func TestSplitThreadsKeepsFileOrderAndLines(t *testing.T) {
	lines := []core.TraceEvent{{Thread: "a", Tick: 1}, {Thread: "b", Tick: 1}, {Thread: "a", Tick: 3}, {Thread: "a", Tick: 2}}
	ths := SplitThreads(lines)
	if len(ths) != 2 || ths[0].ID != "a" || ths[1].ID != "b" {
		t.Fatalf("threads: %+v", ths)
	}
	if got := ths[0].N; len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 4 {
		t.Errorf("file lines of a: %v, want [1 3 4]", got)
	}
	if ths[0].Lines[1].Tick != 3 || ths[0].Lines[2].Tick != 2 {
		t.Errorf("a's lines were reordered: %+v", ths[0].Lines)
	}
}
