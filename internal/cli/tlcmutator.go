package cli

import (
	"math/rand/v2"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/tlc"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// diffWalks is how many random walks of the fenced cfg's graph (in the
// Go model of the spec) the differential mutates, besides the
// simulation's traces.
const diffWalks = 80

// diffMutator is the differential's mutator: tracecheck's Mutate (the
// one FuzzCheck uses too), once for half the cases and two or three times
// over for the rest, so that changes also meet each other (a line moved
// and then given another value; two clock readings changed).
var diffMutator tlc.Mutator = func(rng *rand.Rand, lines []core.TraceEvent) ([]core.TraceEvent, string) {
	n := 1
	if rng.IntN(2) == 0 {
		n = 2 + rng.IntN(2)
	}
	var descs []string
	for range n {
		var what tracecheck.Mutation
		lines, what = tracecheck.Mutate(rng, lines)
		descs = append(descs, what.Desc)
	}
	return lines, strings.Join(descs, "; ")
}
