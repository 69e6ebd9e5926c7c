package main

import (
	"math/rand/v2"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tlc"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// diffMutator is the differential's mutator: tracecheck's Mutate, the
// one FuzzCheck uses too.
var diffMutator tlc.Mutator = func(rng *rand.Rand, lines []core.TraceEvent) ([]core.TraceEvent, string) {
	m, what := tracecheck.Mutate(rng, lines)
	return m, what.Desc
}
