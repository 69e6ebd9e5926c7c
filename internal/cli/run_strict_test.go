package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/memory"
)

// A run that never exercises a spec action fails naming it, and the
// floor follows the run's size: the default run is held to it, a narrow
// one is not unless asked.
func TestRunFailsOnActionNeverExercised(t *testing.T) {
	tl := &tally{perAction: map[core.Action]int{}, invariantFails: map[string]int{}, lapses: 3, givenTwice: 1, givenAgain: 1}
	for _, a := range core.Actions() {
		tl.perAction[a] = 5
	}
	require.NoError(t, tl.verdict("", 1, io.Discard))
	// Every action, but never the exception (a steered message given
	// again after its run was abandoned): held to the floor, it fails.
	tl.givenAgain = 0
	err := tl.verdict("", 1, io.Discard)
	var f failure
	require.ErrorAs(t, err, &f)
	require.Contains(t, f.msg, "never reached the exception")
	require.NoError(t, tl.verdict("", 0, io.Discard))
	tl.givenAgain = 1
	delete(tl.perAction, core.ActionStartFenced)
	err = tl.verdict("", 1, io.Discard)
	require.ErrorAs(t, err, &f)
	require.Equal(t, exitFailed, f.code)
	require.Contains(t, f.msg, "StartFenced 0")
	require.NoError(t, tl.verdict("", 0, io.Discard), "-min-actions 0 asks for nothing")

	require.Equal(t, 1, autoMinActions(runFlags{seeds: 200, steps: 300, procs: 3}), "the default run")
	require.Equal(t, 0, autoMinActions(runFlags{seeds: 1, steps: 300, procs: 3}), "-seeds 1")
	require.Equal(t, 0, autoMinActions(runFlags{seeds: 200, steps: 300, procs: 1}), "-procs 1 fences no one")

	// End to end: one process never fences anyone, so -min-actions 1
	// fails naming the fenced actions; without it the run passes.
	code, out, errs := runCLI("run", "-seeds", "3", "-concurrent", "0", "-procs", "1", "-min-actions", "1", "-shrink=false")
	require.Equal(t, exitFailed, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, out, "AbandonFenced 0")
	code, out, errs = runCLI("run", "-seeds", "3", "-concurrent", "0", "-procs", "1", "-shrink=false")
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	code, _, _ = runCLI("run", "-seeds", "1", "-min-actions", "-2")
	require.Equal(t, exitUsage, code)
}

// leaseLiar is a storage whose HoldsLease answers as holds says, given
// the true answer and the lease seen: a defect written into the storage,
// not switched on by a flag.
type leaseLiar struct {
	core.Storage
	holds func(held bool, l core.Lease) bool
}

func (s leaseLiar) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, leaseLiarTx{tx, s.holds})
	})
}

type leaseLiarTx struct {
	core.Transaction
	holds func(held bool, l core.Lease) bool
}

func (tx leaseLiarTx) HoldsLease(ctx context.Context, id core.ThreadID, holder core.Holder) (bool, core.Lease, error) {
	held, l, err := tx.Transaction.HoldsLease(ctx, id, holder)
	return err == nil && tx.holds(held, l), l, err
}

// holderBlind is storage whose HoldsLease ignores the holder: any claim
// holds any thread's lease, as long as someone holds it.
func holderBlind(s core.Storage) core.Storage {
	return leaseLiar{s, func(_ bool, l core.Lease) bool { return l.Holder != "" }}
}

// A defect in the storage under test is a check failure (exit 1) with
// the execution's story, never "could not run" (exit 4).
func TestRunDefectInStorageIsAFailure(t *testing.T) {
	f := runFlags{seeds: 20, steps: 300, procs: 3, threads: 2, messages: 4, workers: 2, ttl: 40 * time.Millisecond,
		interleave: true, faults: 0.05, shrink: true, shrinkDir: t.TempDir(), porcupineTimeout: time.Minute}
	_, out := runDefective(t, f, func() core.Storage { return holderBlind(memory.New()) })
	require.Contains(t, out, "invariant NoDefectError — seed", "its story is told, shrunk on the same storage")
	require.Contains(t, out, "shrunk to")
}

// runDefective runs f with each execution on a storage newStorage makes,
// and requires a check failure (exit 1) naming NoDefectError. It returns
// the failure's message and what the run printed.
func runDefective(t *testing.T, f runFlags, newStorage func() core.Storage) (msg, out string) {
	t.Helper()
	f.openStorage = func(context.Context) (core.Storage, func(), error) { return newStorage(), func() {}, nil }
	var stdout, stderr bytes.Buffer
	_, err := runAll(context.Background(), f, &stdout, &stderr)
	var fl failure
	require.ErrorAs(t, err, &fl, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	require.Equal(t, exitFailed, fl.code, "%v\nstdout:\n%s", err, stdout.String())
	require.Contains(t, fl.msg, "NoDefectError violated", "the check is named")
	return fl.msg, stdout.String()
}

// staleRenew is storage that lets a stale holder renew: its lease check
// ignores the holder when a Renew asks (as a renewal's own fast path that
// forgot the comparison would), so a claim whose lease another claim took
// gets past the check, and memory's holder freshness then refuses the
// write with ErrHolderReused, an error the spec's Renew never returns (a
// correct storage refuses with ErrThreadBusy).
func staleRenew(s core.Storage) core.Storage {
	return leaseLiar{s, func(held bool, l core.Lease) bool {
		return held || l.Holder != "" && calledFrom("core.(*Workspace).Renew")
	}}
}

// calledFrom says whether a function whose name contains fn is on the
// caller's stack.
func calledFrom(fn string) bool {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// Issue 26: a storage that lets a stale holder renew is a check failure
// (exit 1, NoDefectError) with its story, in the seeded executions and in
// the concurrent ones. Before, a concurrent execution never saw the
// error (the runner's renewal gives up on it silently) and passed.
func TestRunStaleRenewIsAFailure(t *testing.T) {
	for _, c := range []struct {
		name              string
		seeds, concurrent int
		story             string
	}{
		{"sequential", 20, 0, "invariant NoDefectError — seed"},
		// About half the concurrent executions meet a stale renewal; the
		// chance that 16 all miss it is about 1 in 65,000.
		{"concurrent", 0, 16, "then p"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := runFlags{seeds: c.seeds, concurrent: c.concurrent, steps: 300, procs: 3, threads: 2, messages: 4, workers: 2,
				ttl: 40 * time.Millisecond, interleave: true, faults: 0.05, shrink: true, shrinkDir: t.TempDir(),
				porcupineTimeout: time.Minute}
			msg, out := runDefective(t, f, func() core.Storage { return staleRenew(memory.New()) })
			require.Contains(t, msg, "holder already used by an earlier claim")
			require.Contains(t, out, c.story, "its story is told")
		})
	}
}

// inconsistentLater is memory storage whose stored log stops folding
// after its first writes: every read of a thread then fails with
// ErrInconsistentLog, an error only a defect (in storage, or in what was
// written to it) explains.
type inconsistentLater struct {
	core.Storage
	updates *atomic.Int64
}

func (s inconsistentLater) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	broken := s.updates.Add(1) > 12
	return s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		if broken {
			return fmt.Errorf("thread read: %w", core.ErrInconsistentLog)
		}
		return fn(ctx, tx)
	})
}

// Issue 26: a concurrent execution whose storage fails with an error only
// a defect explains is a check failure (exit 1) with its story; before,
// the poster's failed Post ended the run as "could not run" (exit 4).
func TestRunConcurrentDefectIsAFailure(t *testing.T) {
	f := runFlags{concurrent: 1, procs: 3, threads: 2, messages: 4, ttl: 40 * time.Millisecond, shrink: true,
		shrinkDir: t.TempDir(), porcupineTimeout: time.Minute}
	msg, out := runDefective(t, f, func() core.Storage { return inconsistentLater{memory.New(), &atomic.Int64{}} })
	require.Contains(t, msg, "stored log is inconsistent")
	require.Contains(t, out, "invariant NoDefectError — concurrent 0")
}
