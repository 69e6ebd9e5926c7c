package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// runSeeds runs seeds executions of cfg (its Seed replaced) and returns
// how many broke an invariant or left a trace the checker rejects, by what.
func runSeeds(t *testing.T, seeds int, cfg Config) (caught map[string]int, stats Stats) {
	t.Helper()
	ctx := context.Background()
	caught = map[string]int{}
	stats.Faults = map[string]int{}
	for seed := range uint64(seeds) {
		cfg.Seed = seed
		exec, err := NewSeeded(ctx, cfg)
		require.NoError(t, err)
		err = exec.Run(ctx)
		st := exec.Stats()
		stats.Paused += st.Paused
		for k, n := range st.Faults {
			stats.Faults[k] += n
		}
		var inv *InvariantError
		switch {
		case errors.As(err, &inv):
			caught[inv.Invariant]++
			continue
		case err != nil:
			t.Fatalf("seed %d: %v", seed, err)
		}
		if _, err := tracecheck.Check(exec.TraceLines()); err != nil {
			var v *tracecheck.Violation
			require.ErrorAs(t, err, &v, "seed %d", seed)
			caught["trace: "+v.Rule]++
		}
	}
	return caught, stats
}

// With the fences on, an execution that pauses steps between their
// transactions and injects storage faults keeps every invariant, and its
// trace (with the writes whose commit the faults hid) is accepted.
func TestSimInterleavedFaultsFenced(t *testing.T) {
	caught, st := runSeeds(t, 100, Config{Interleave: true, Faults: 0.2})
	require.Empty(t, caught, "the fenced code under interleaving and faults")
	require.Positive(t, st.Paused, "no step was ever paused between transactions")
	for k := range numFaults {
		require.Positive(t, st.Faults[k.String()], "no %s fault was injected: %v", k, st.Faults)
	}
	t.Logf("paused %d steps; faults %v", st.Paused, st.Faults)
}

// The fence checked in a transaction of its own, before the write's: a
// scheduler that runs each call atomically cannot see it; one that runs
// other operations between a call's transactions catches it.
func TestSimFenceInOwnTransactionMutantCaught(t *testing.T) {
	cfg := Config{Mutants: Mutants{FenceInOwnTransaction: true}}
	blind, _ := runSeeds(t, 100, cfg)
	cfg.Interleave = true
	caught, _ := runSeeds(t, 100, cfg)
	t.Logf("atomic steps: %v; interleaved: %v", blind, caught)
	require.Empty(t, blind, "atomic steps should not see this mutant (else the test shows nothing)")
	require.Positive(t, caught[core.InvConsumedAtMostOnce]+caught[core.InvOneActiveRun], "interleaving did not catch the mutant: %v", caught)
}

// A runner that retries a consuming write whose commit outcome is unknown:
// without faults nothing shows it; with commit-unknown faults injected, the
// retry consumes a message twice.
func TestSimRetryCommitUnknownMutantCaught(t *testing.T) {
	cfg := Config{Mutants: Mutants{RetryCommitUnknown: true}}
	blind, _ := runSeeds(t, 100, cfg)
	cfg.Faults = 0.2
	caught, _ := runSeeds(t, 100, cfg)
	t.Logf("no faults: %v; faults: %v", blind, caught)
	require.Empty(t, blind, "without faults the retry never happens")
	require.Positive(t, caught[core.InvConsumedAtMostOnce], "faults did not catch the retry: %v", caught)
}

// Issue 26: the runner's retry of a write whose commit is unknown, with
// core's protection on. Core refuses the retry (ErrOutOfOrder: only Crash
// may follow), so nothing is consumed twice and every trace is accepted;
// the turn ending with that error is what shows the defect
// (InvNoDefectError). Before, the executions passed.
func TestSimRetryInRunnerCaught(t *testing.T) {
	caught, _ := runSeeds(t, 100, Config{Interleave: true, Faults: 0.05, Mutants: Mutants{retryInRunner: true}})
	t.Logf("caught: %v", caught)
	require.Positive(t, caught[InvNoDefectError], "the runner's retry went unseen: %v", caught)
	clean, _ := runSeeds(t, 100, Config{Interleave: true, Faults: 0.05})
	require.Empty(t, clean, "the same seeds without the retry")
}

// Issue 26: a Release's commit can be unknown too (a fault drawn on it):
// a runner that took such a Release as committed would leave its round
// open, which RoundsAgree and NoDefectError see. With the Release
// faulted, the Crash after it learns from the faults' log whether it
// committed (a committed Release's line ends the round), so every trace
// is still accepted. Before, Releases were never faulted.
func TestSimReleaseFaulted(t *testing.T) {
	ctx := context.Background()
	committed, rolledBack := 0, 0
	for seed := range uint64(40) {
		exec, err := NewSeeded(ctx, Config{Seed: seed, Interleave: true, Faults: 0.2})
		require.NoError(t, err)
		require.NoError(t, exec.Run(ctx), "seed %d", seed)
		_, err = tracecheck.Check(exec.TraceLines())
		require.NoError(t, err, "seed %d", seed)
		for _, ev := range exec.faults.unseen {
			if ev.Action == core.ActionRelease {
				committed++
			}
		}
		rolledBack += exec.Stats().Faults[FaultRollbackUnknown.String()]
	}
	t.Logf("Releases committed unknown: %d; writes rolled back unknown: %d", committed, rolledBack)
	require.Positive(t, committed, "no Release's commit was ever unknown")
}

// FusedTurns: half the processes end a run, plan and start the next in
// one transaction (RunEndThenStart) while a backlog waits, as a runner
// does by default, with
// steps interleaved and faults injected. Every execution is accepted,
// some fused transactions commit with their process told the commit was
// unknown (both writes' lines reach the trace from the faults' log, and
// the round's Crash traces the Plan between them), and with the start's
// fence off the checks catch it.
func TestSimFusedTurns(t *testing.T) {
	ctx := context.Background()
	fused, fusedUnseen := 0, 0
	for seed := range uint64(100) {
		// Ten messages a thread: a backlog for the runner's fused starts.
		exec, err := NewSeeded(ctx, Config{Seed: seed, Messages: 10, Interleave: true, Faults: 0.3, FusedTurns: true})
		require.NoError(t, err)
		require.NoError(t, exec.Run(ctx), "seed %d", seed)
		lines := exec.TraceLines()
		_, err = tracecheck.Check(lines)
		require.NoError(t, err, "seed %d", seed)
		for i := 2; i < len(lines); i++ {
			a, b, c := lines[i-2], lines[i-1], lines[i]
			if a.Action == core.ActionRunEnd && b.Action == core.ActionPlan && c.Action == core.ActionRunStart &&
				a.Holder == c.Holder && a.Call == c.Call && a.Return == c.Return && c.Tick == a.Tick+1 {
				fused++
			}
		}
		unseen := map[[2]any]bool{}
		for _, ev := range exec.faults.unseen {
			unseen[[2]any{ev.Thread, ev.Tick}] = true
		}
		for _, ev := range exec.faults.unseen {
			if ev.Action == core.ActionRunEnd && unseen[[2]any{ev.Thread, ev.Tick + 1}] {
				fusedUnseen++
			}
		}
	}
	t.Logf("fused end, plan and start: %d traced; %d committed with their commit unknown", fused, fusedUnseen)
	require.Positive(t, fused, "no run's end, plan and start were one transaction")
	require.Positive(t, fusedUnseen, "no fused transaction committed with its commit unknown")
	caught, _ := runSeeds(t, 60, Config{Messages: 10, Interleave: true, FusedTurns: true, Unfenced: core.Fences{Start: true}})
	require.Positive(t, caught[core.InvConsumedAtMostOnce]+caught[core.InvOneActiveRun], "the start's fence off went unseen: %v", caught)
}

// Each fault is what its name says, as the process and storage see it:
// commit-unknown commits and tells the process core.ErrCommitUnknown;
// rollback-unknown rolls back and tells it core.ErrCommitUnknown too;
// write-failed rolls back and tells it of a plain failure. Here every
// Release is faulted (rate 1), each on a thread of its own, until each
// fault came up, and whether its lease is gone says whether it
// committed. (The sixth mutation pass: a rollback-unknown reported as a
// plain failure, so that no rolled-back write was ever in doubt, failed
// no test.)
func TestFaultsAreWhatTheySay(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	f := &faults{rate: 1, rng: rand.New(rand.NewPCG(1, 2))}
	ws := core.NewWorkspace(&procStorage{Storage: store, faults: f}, coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)), core.WithTracer(&tracecheck.Recorder{}))
	seen := map[FaultKind]int{}
	for i := 0; len(seen) < int(numFaults); i++ {
		require.Less(t, i, 100, "in 100 faulted Releases, not every fault came up: %v", seen)
		id := core.ThreadID(fmt.Sprint("t", i))
		require.NoError(t, ws.CreateThread(ctx, id))
		c, err := ws.Claim(ctx, id, core.Holder(fmt.Sprint("h", i)), time.Minute)
		require.NoError(t, err)
		before := f.injected
		err = ws.Release(ctx, c)
		kind := FaultKind(-1)
		for k := range numFaults {
			if f.injected[k] > before[k] {
				kind = k
			}
		}
		require.NotEqual(t, FaultKind(-1), kind, "Release %d: no fault drawn at rate 1", i)
		seen[kind]++
		l, lerr := ws.Lease(ctx, id)
		require.NoError(t, lerr)
		committed := l.Holder == ""
		switch kind {
		case FaultCommitUnknown:
			require.ErrorIs(t, err, core.ErrCommitUnknown, "%s", kind)
			require.True(t, committed, "%s: the Release did not commit", kind)
		case FaultRollbackUnknown:
			require.ErrorIs(t, err, core.ErrCommitUnknown, "%s", kind)
			require.False(t, committed, "%s: the Release committed", kind)
		case FaultWriteFailed:
			require.Error(t, err, "%s", kind)
			require.NotErrorIs(t, err, core.ErrCommitUnknown, "%s", kind)
			require.False(t, committed, "%s: the Release committed", kind)
		}
	}
}
