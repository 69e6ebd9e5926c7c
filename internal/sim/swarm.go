package sim

import (
	"math/rand/v2"
	"time"
)

// swarm is one execution's mix of operations (swarm testing: Groce et
// al., ISSTA 2012): each kind but step is left out one time in four, and
// the kinds kept get random weights, as does the agent's asking.
type swarm struct {
	weights [numDrawn]int
	total   int
	asks    int // the agent asks on a step with probability asks/4
}

func newSwarm(seed uint64) *swarm {
	rng := rand.New(rand.NewPCG(seed, 0x737761726d))
	w := &swarm{asks: rng.IntN(5)}
	for k := range numDrawn {
		switch {
		case k == OpStep:
			w.weights[k] = 20 + rng.IntN(60)
		case rng.IntN(4) > 0:
			w.weights[k] = 1 + rng.IntN(20)
		}
		w.total += w.weights[k]
	}
	return w
}

func (w *swarm) next(rng *rand.Rand, op Op, ttl time.Duration) Op {
	n := rng.IntN(w.total)
	for k := range numDrawn {
		if n < w.weights[k] {
			op.Kind = k
			break
		}
		n -= w.weights[k]
	}
	switch op.Kind {
	case OpStep:
		if rng.IntN(4) < w.asks {
			op.Asks = 1 + rng.IntN(2)
		}
		if rng.IntN(3) == 0 {
			op.Steers = 1 + rng.IntN(2)
		}
	case OpTime:
		op.By = time.Duration(1+rng.IntN(int(ttl/time.Second))) * time.Second
	case OpSkew:
		op.By = ttl + time.Duration(rng.IntN(int(ttl/time.Second)))*time.Second
	}
	return op
}
