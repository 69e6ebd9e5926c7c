package tlc

import (
	"context"
	"errors"
	"math"
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
	if err := CopySpecs("../..", dir); err != nil {
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
	fxs, err := LoadFixtures(FixtureDirs("../..")...)
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
		lines, err := tracecheck.ReadFile(filepath.Join("../..", "tla", "testdata", name))
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

// A clock value's limbs are exact and keep the values' order, and adding
// two limb by limb (as the trace spec's Plus does) gives their sum plus
// 2^63; ids and ticks past TLC's integers become -1.
func TestBatchLineEncoding(t *testing.T) {
	plus := func(x, y clockValue) [3]int64 { // the trace spec's Plus
		c := x[2] + y[2]
		b := x[1] + y[1] + c/clockLimb
		return [3]int64{x[0] + y[0] + b/clockLimb, b % clockLimb, c % clockLimb}
	}
	less := func(x, y clockValue) bool {
		return x[0] < y[0] || x[0] == y[0] && (x[1] < y[1] || x[1] == y[1] && x[2] < y[2])
	}
	vals := []int64{math.MinInt64, math.MinInt64 + 1, -1e18, -5, -1, 0, 1, 2, clockLimb - 1, clockLimb, 1 << 44, 1792141200000000000, math.MaxInt64 - 1, math.MaxInt64}
	for i, a := range vals {
		ea := encodeClock(a)
		for k, limb := range ea {
			if limb < 0 || limb >= clockLimb || (k == 0 && limb >= 1<<20) {
				t.Errorf("%d: limb %d is %d", a, k, limb)
			}
		}
		if got := int64(uint64(ea[0])<<44|uint64(ea[1])<<22|uint64(ea[2])) ^ math.MinInt64; got != a {
			t.Errorf("%d encodes to %v, which is %d", a, ea, got)
		}
		for j, b := range vals {
			eb := encodeClock(b)
			if less(ea, eb) != (i < j) {
				t.Errorf("%d < %d is %v on the limbs", a, b, less(ea, eb))
			}
			// a + b, when it is an int64: Plus(e(a+b), Z) = Plus(e(a), e(b)).
			if s := a + b; (b > 0 && s < a) || (b < 0 && s > a) {
				continue
			}
			if plus(encodeClock(a+b), encodeClock(0)) != plus(ea, eb) {
				t.Errorf("%d + %d: the limbs' sums disagree", a, b)
			}
		}
	}
	if encodeClock(0) != (clockValue{1 << 19, 0, 0}) {
		t.Errorf("0 encodes to %v; the trace spec's Z is <<524288, 0, 0>>", encodeClock(0))
	}
	for v, want := range map[uint64]int64{0: 0, 7: 7, math.MaxInt32: math.MaxInt32, math.MaxInt32 + 1: -1, 1<<32 + 1: -1, math.MaxUint64: -1} {
		if got := tlcInt(v); got != want {
			t.Errorf("tlcInt(%d) = %d, want %d", v, got, want)
		}
	}
	l := toBatchLine(core.TraceEvent{Action: core.ActionPost, Msg: 1})
	if l.Clock != nil {
		t.Error("an untimed line has a clock field")
	}
	if l := toBatchLine(core.TraceEvent{Action: core.ActionClaim, Replaced: 3}); l.Clock == nil || l.Clock.Now != encodeClock(0) {
		t.Errorf("a line with any timing has all four: %+v", l.Clock)
	}
}
