package memory_test

import (
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim/simtest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/storetest"
)

func TestConformance(t *testing.T) {
	simtest.Exercise(t, func(*testing.T) core.Storage { return memory.New() })
}

// The mutant with holder freshness off: a holder reused across claims
// passes a later claim's fence with its stale round, and a message is
// consumed twice. The conformance suite's HolderReused and
// ReuseHolderRefused cases catch it.
func TestReuseHolderMutant(t *testing.T) {
	storetest.CheckReuseHolderMutant(t, memory.New(memory.WithHolderReuseForTesting()))
}
