package simtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim/apimachine"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// rapidChooser draws from a rapid.T.
type rapidChooser struct{ T *rapid.T }

// IntN draws a value in [0, n).
func (c rapidChooser) IntN(label string, n int) int { return rapid.IntRange(0, n-1).Draw(c.T, label) }

// RunAPIMachine checks the machine with rapid: every sequence of up to
// steps calls keeps the trace valid. Each check draws a fresh set of
// processes and threads on the one storage newStorage makes.
func RunAPIMachine(t *testing.T, newStorage storetest.Factory, steps int) {
	s := newStorage(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		ch := rapidChooser{rt}
		m, err := apimachine.New(context.Background(), s, fmt.Sprintf("api%d", n), 3, ch)
		if err != nil {
			rt.Fatal(err)
		}
		for range steps {
			if err := m.Step(ch); err != nil {
				rt.Fatal(err)
			}
		}
	})
}

// APIMachineCatches runs the machine over a workspace built with opts (a
// mutant) for up to seeds seeded sequences of steps calls, and returns the
// first failure, or nil when no sequence failed (the mutant survived).
func APIMachineCatches(t *testing.T, newStorage storetest.Factory, seeds, steps int, opts ...core.Option) error {
	s := newStorage(t)
	for seed := range seeds {
		ch := apimachine.RandChooser{R: rand.New(rand.NewPCG(uint64(seed), 7))}
		m, err := apimachine.New(context.Background(), s, fmt.Sprintf("mut%d", seed), 3, ch, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for range steps {
			if err := m.Step(ch); err != nil {
				return fmt.Errorf("seed %d: %w", seed, err)
			}
		}
	}
	return nil
}
