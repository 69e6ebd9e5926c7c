package memory_test

import (
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// Any sequence of public calls, by several processes with skewed clocks,
// is refused or traced as a behaviour of the specification.
func TestAPIClosedUnderSpec(t *testing.T) {
	storetest.RunAPIMachine(t, func(*testing.T) core.Storage { return memory.New() }, 60)
}

// The mutant: a workspace without rounds accepts calls the specification
// does not allow, and the machine must catch it.
func TestAPIMachineCatchesNoRounds(t *testing.T) {
	err := storetest.APIMachineCatches(t, func(*testing.T) core.Storage { return memory.New() }, 200, 60, core.WithoutRoundsForTesting())
	if err == nil {
		t.Fatal("the API machine did not catch a workspace without rounds in 200 seeds")
	}
	t.Logf("caught: %v", err)
}
