package sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Concurrent executions with the fences on keep the invariants, consume
// every message, and write traces the checker accepts.
func TestConcurrentFenced(t *testing.T) {
	n := 4
	if testing.Short() {
		n = 1
	}
	for seed := range uint64(n) {
		res, err := RunConcurrent(context.Background(), ConcurrentConfig{Seed: seed})
		require.NoError(t, err, "seed %d", seed)
		require.NotEmpty(t, res.Lines)
		_, err = tracecheck.Check(res.Lines)
		require.NoError(t, err, "seed %d", seed)
		for _, l := range res.Lines {
			require.LessOrEqual(t, l.Call, l.Return, "a line's call after its return")
		}
	}
}

// The mutant under real concurrency: with the fences off, the trace
// checker rejects some execution's trace and porcupine finds some
// execution's history not linearizable. It depends on real-time races, so
// it is slow (skipped with -short); its deterministic twins carry the same
// proof: TestSimSeedsUnfencedMutantCaught here, and
// tracecheck's TestUnfencedNotLinearizable for porcupine. Seeds run until
// both have caught it or the test's own deadline passes; six processes
// whose clocks are up to four TTLs apart make a write on a lapsed lease
// likely (14 of 20 seeds under -race, against 3 of 40 with three
// processes and clocks up to two TTLs apart).
func TestConcurrentUnfencedMutantCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("slow, real-time: TestSimSeedsUnfencedMutantCaught is its deterministic twin")
	}
	traceCaught, linCaught := 0, 0
	const ttl = 40 * time.Millisecond
	deadline := time.Now().Add(90 * time.Second)
	seed := uint64(0)
	for ; time.Now().Before(deadline) && (traceCaught == 0 || linCaught == 0); seed++ {
		res, err := RunConcurrent(context.Background(), ConcurrentConfig{Seed: seed, Procs: 6, Threads: 2, Messages: 8, ClaimTTL: ttl, MaxSkew: 4 * ttl, Unfenced: core.AllFences()})
		var inv *InvariantError
		if err != nil && !errors.As(err, &inv) {
			require.NoError(t, err)
		}
		if _, err := tracecheck.Check(res.Lines); err != nil {
			var v *tracecheck.Violation
			require.ErrorAs(t, err, &v)
			traceCaught++
		}
		if _, err := tracecheck.CheckLinearizable(tracecheck.OperationsFromTrace(res.Lines), time.Minute, ""); err != nil {
			require.ErrorIs(t, err, tracecheck.ErrNotLinearizable)
			linCaught++
		}
	}
	require.Positive(t, traceCaught, "the trace checker did not catch the mutant in %d seeds (90s)", seed)
	require.Positive(t, linCaught, "porcupine did not catch the mutant in %d seeds (90s)", seed)
}

// With the fences on, porcupine finds every concurrent history
// linearizable.
func TestConcurrentFencedLinearizable(t *testing.T) {
	for seed := range uint64(3) {
		res, err := RunConcurrent(context.Background(), ConcurrentConfig{Seed: seed})
		require.NoError(t, err)
		ops := tracecheck.OperationsFromTrace(res.Lines)
		require.NotEmpty(t, ops)
		_, err = tracecheck.CheckLinearizable(ops, time.Minute, "")
		require.NoError(t, err, "seed %d", seed)
	}
}
