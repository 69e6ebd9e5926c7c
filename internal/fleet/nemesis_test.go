package fleet

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The nemesis deals each kind once before any twice, so that a short run
// has every kind: every round of len(kinds) kinds taken holds each kind
// once, a kind not taken stays next, and the rounds' orders come from the
// seed (two seeds, two different orders in some round).
func TestKindDeckDealsEachKindOncePerRound(t *testing.T) {
	kinds := []Kind{KindStop, KindKill, KindClock, KindTerminate, KindPartition, KindLatency, KindCommit, KindRetire, KindRewind}
	deal := func(seed uint64) [][]Kind {
		rng := rand.New(rand.NewPCG(seed, 0))
		d := kindDeck{kinds: kinds}
		var rounds [][]Kind
		for range 20 {
			var round []Kind
			for range kinds {
				k := d.next(rng)
				require.Equal(t, k, d.next(rng), "a kind not taken stays next")
				d.take()
				round = append(round, k)
			}
			got := slices.Clone(round)
			slices.Sort(got)
			want := slices.Clone(kinds)
			slices.Sort(want)
			require.Equal(t, want, got, "a round deals each kind once")
			rounds = append(rounds, round)
		}
		return rounds
	}
	require.Equal(t, deal(1), deal(1), "the same seed deals the same order")
	require.NotEqual(t, deal(1), deal(2), "the order is shuffled with the seed")
}
