package cli

import (
	"context"
	"fmt"
	"testing"

	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/internal/sim/shrink"
)

// BenchmarkRunSeeds measures the main job's deterministic executions (run,
// trace-checked, folded in seed order) per second with 1 and 2 workers:
//
//	go test ./internal/cli -run '^$' -bench RunSeeds -count 6 | benchstat -col /workers -
func BenchmarkRunSeeds(b *testing.B) {
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			const seeds = 50
			// The main job's defaults: steps interleaved, 5% storage faults.
			f := runFlags{seeds: seeds, steps: 300, procs: 3, threads: 2, messages: 4, workers: w, interleave: true, faults: 0.05}
			execs := 0
			for b.Loop() {
				err := runSeeds(context.Background(), f, nil, func(uint64, *shrink.Execution, *sim.Visits) error {
					execs++
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(execs)/b.Elapsed().Seconds(), "executions/s")
		})
	}
}
