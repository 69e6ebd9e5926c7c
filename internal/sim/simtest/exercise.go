// Package simtest runs the simulations over a storage from a test:
// Exercise (the conformance suite, seeded and concurrent executions, and
// the fences-off mutant, which they must catch) and the API machine under
// rapid. The storage packages' tests call it; a storage outside this
// module runs storetest.Run.
package simtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/store/storetest"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Exercise runs every check this project has against a storage: the
// conformance suite (Run); seeded executions of real runner processes over
// it, with steps interleaved between transactions and storage faults
// injected, each checked for the invariants after every operation and its
// trace by the Go trace checker; concurrent executions, their traces
// checked and their histories checked for linearizability with porcupine;
// and the fences-off mutant, which the same checks must catch on this
// storage, so that a pass means something. A storage author calls it from
// a test with a Factory that makes a fresh, empty storage:
//
//	func TestMyStorage(t *testing.T) {
//		simtest.Exercise(t, func(t *testing.T) core.Storage { return mystore.New(t) })
//	}
//
// By default it runs 40 seeded and 3 concurrent executions (8 and 1 with
// -short); options change that.
func Exercise(t *testing.T, newStorage storetest.Factory, opts ...ExerciseOption) {
	o := exerciseOptions{seeds: 40, concurrent: 3}
	if testing.Short() {
		o = exerciseOptions{seeds: 8, concurrent: 1}
	}
	for _, opt := range opts {
		opt(&o)
	}
	seeds, concurrent := o.seeds, o.concurrent
	t.Run("Conformance", func(t *testing.T) { storetest.Run(t, newStorage) })
	t.Run("Seeded", func(t *testing.T) {
		for seed := range uint64(seeds) {
			caught, err := seeded(t, newStorage(t), seed, core.Fences{})
			if err != nil {
				t.Fatal(err)
			}
			if caught != nil {
				t.Fatalf("seed %d (replay: tracecheck run -seed %d -seeds 1 on this storage): %v", seed, seed, caught)
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		for seed := range uint64(concurrent) {
			res, err := sim.RunConcurrent(context.Background(), sim.ConcurrentConfig{Seed: seed, Storage: newStorage(t)})
			if err != nil {
				t.Fatalf("concurrent execution %d: %v", seed, err)
			}
			if _, err := tracecheck.Check(res.Lines, tracecheck.WithFile(fmt.Sprintf("concurrent-%d", seed))); err != nil {
				t.Fatalf("concurrent execution %d: %v", seed, err)
			}
			if _, err := tracecheck.CheckLinearizable(tracecheck.OperationsFromTrace(res.Lines), time.Minute, ""); err != nil {
				t.Fatalf("concurrent execution %d: %v", seed, err)
			}
		}
	})
	t.Run("UnfencedMutantCaught", func(t *testing.T) {
		for seed := range uint64(4 * seeds) {
			caught, err := seeded(t, newStorage(t), seed, core.AllFences())
			if err != nil {
				t.Fatal(err)
			}
			if caught != nil {
				t.Logf("seed %d caught the fences-off mutant: %v", seed, caught)
				return
			}
		}
		t.Fatalf("with the fences off, %d seeded executions on this storage broke nothing: the checks are blind here", 4*seeds)
	})
}

// ExerciseOption changes what Exercise runs.
type ExerciseOption func(*exerciseOptions)

type exerciseOptions struct{ seeds, concurrent int }

// WithExecutions sets how many seeded and concurrent executions Exercise
// runs (a storage whose transactions are slow may want fewer); the mutant
// gets up to four times the seeded count to be caught.
func WithExecutions(seeded, concurrent int) ExerciseOption {
	return func(o *exerciseOptions) { o.seeds, o.concurrent = max(seeded, 1), max(concurrent, 1) }
}

// seeded runs one seeded execution over s, with the fences unfenced off,
// and returns what caught it (a broken invariant or a rejected trace), or
// an error when it could not run.
func seeded(t *testing.T, s core.Storage, seed uint64, unfenced core.Fences) (caught, err error) {
	ctx := context.Background()
	exec, err := sim.NewSeeded(ctx, sim.Config{Seed: seed, Storage: s, Unfenced: unfenced, Interleave: true, Faults: 0.05})
	if err != nil {
		return nil, err
	}
	if err := exec.Run(ctx); err != nil {
		var inv *sim.InvariantError
		if errors.As(err, &inv) {
			return inv, nil
		}
		return nil, fmt.Errorf("seed %d: %w", seed, err)
	}
	if _, err := tracecheck.Check(exec.TraceLines(), tracecheck.WithFile(fmt.Sprintf("seed-%d", seed))); err != nil {
		return err, nil
	}
	return nil, nil
}
