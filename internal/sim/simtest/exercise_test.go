package simtest

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// TestSeededReportsARejectedTrace: an execution that breaks no invariant
// in storage but whose trace the checker rejects is caught too (catches
// pass 13's mutant 72: Exercise's seeded execution passes over the trace
// check).
func TestSeededReportsARejectedTrace(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(80) {
		exec, err := sim.NewSeeded(ctx, sim.Config{Seed: seed, Storage: memory.New(), Unfenced: core.AllFences(), Interleave: true, Faults: 0.05})
		require.NoError(t, err)
		if exec.Run(ctx) != nil {
			continue // an invariant broke: not this test's case
		}
		if _, err := tracecheck.Check(exec.TraceLines()); err == nil {
			continue
		}
		caught, err := seeded(t, memory.New(), seed, core.AllFences())
		require.NoError(t, err)
		var v *tracecheck.Violation
		require.True(t, errors.As(caught, &v), "seed %d: its trace is rejected, but seeded reports %v", seed, caught)
		return
	}
	t.Fatal("no unfenced seed of 80 kept its invariants and had its trace rejected")
}
