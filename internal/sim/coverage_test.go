package sim

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// coverageFloor is just under the share of ThreadClaimLapse.cfg's states
// that TestCoverageFloor's executions visit (measured: see the test's log).
// The executions are seeded, so the figure is exact; a change that makes
// the scheduler reach less of the spec fails here.
const coverageFloor = 1.08 // percent of states (measured 1.0995 of 417,999 once Releases were faulted too, issue 26; 1.13 before; 1.82 of 228,049 before steering)

// TestCoverageFloor guards how much of the fenced cfg's reachable state
// graph seeded executions with its constants visit, following each
// thread's trace through the spec model.
func TestCoverageFloor(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("explores the fenced cfg's 417,999 states and follows 150 executions (skipped with -short and under -race; scripts/test runs it without -race)")
	}
	cfg, err := specmodel.ReadConfig("../../spec/ThreadClaimLapse.cfg")
	require.NoError(t, err)
	cov := NewCoverage(specmodel.New(cfg).Explore())
	ctx := context.Background()
	for seed := range uint64(150) {
		exec, err := NewSeeded(ctx, Config{Seed: seed, Procs: len(cfg.Procs), Threads: 8, Messages: cfg.MaxMsgs,
			Steps: 400, Interleave: true, Faults: 0.05, Swarm: true, Coverage: cov})
		require.NoError(t, err)
		require.NoError(t, exec.Run(ctx))
	}
	v, n := cov.States()
	e, m := cov.Edges()
	pct := 100 * float64(v) / float64(n)
	t.Logf("coverage: %d of %d states (%.2f%%), %d of %d edges (%.2f%%)", v, n, pct, e, m, 100*float64(e)/float64(m))
	require.GreaterOrEqual(t, pct, coverageFloor, "the executions reach less of the spec than they did")
}
