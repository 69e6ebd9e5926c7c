package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSwarmDrawsEveryKind: across seeds, swarm's mixes draw every kind
// the seeded scheduler draws, and leave each kind but step out of some
// mix (catches pass 13's mutant 29: swarm never keeps crashes).
func TestSwarmDrawsEveryKind(t *testing.T) {
	drawn := map[OpKind]bool{}
	left := map[OpKind]bool{}
	for seed := range uint64(64) {
		w := newSwarm(seed)
		for k := range numDrawn {
			if w.weights[k] == 0 {
				left[k] = true
			}
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		for range 200 {
			drawn[w.next(rng, Op{}, 10e9).Kind] = true
		}
	}
	for k := range numDrawn {
		require.True(t, drawn[k], "no swarm of 64 drew %s", k)
		require.Equal(t, k != OpStep, left[k], "%s left out of some swarm", k)
	}
}
