package tracecheck

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
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
		_, err = Check(res.Lines)
		require.NoError(t, err, "seed %d", seed)
		for _, l := range res.Lines {
			require.LessOrEqual(t, l.Call, l.Return, "a line's call after its return")
		}
	}
}

// The mutant under real concurrency: with the fences off, some execution's
// trace is rejected by the checker (or an invariant breaks in storage).
func TestConcurrentUnfencedMutantCaught(t *testing.T) {
	for seed := range uint64(20) {
		res, err := RunConcurrent(context.Background(), ConcurrentConfig{Seed: seed, Unfenced: true})
		var inv *InvariantError
		if errors.As(err, &inv) {
			t.Logf("seed %d: %v", seed, err)
			return
		}
		require.NoError(t, err)
		if _, err := Check(res.Lines); err != nil {
			var v *Violation
			require.ErrorAs(t, err, &v)
			t.Logf("seed %d: %s", seed, v.Rule)
			return
		}
	}
	t.Fatal("20 concurrent executions with the fences off went uncaught")
}
