package postgres

import (
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim/simtest"
)

// Any sequence of public calls, by several processes with skewed clocks,
// is refused or traced as a behaviour of the specification, on
// PostgreSQL (one fresh schema; each check its own threads).
func TestAPIClosedUnderSpec(t *testing.T) {
	simtest.RunAPIMachine(t, func(t *testing.T) core.Storage { return newStore(t) }, 40)
}

// The mutant: a workspace without rounds is caught on PostgreSQL too.
func TestAPIMachineCatchesNoRounds(t *testing.T) {
	err := simtest.APIMachineCatches(t, func(t *testing.T) core.Storage { return newStore(t) }, 50, 40, core.WithoutRoundsForTesting())
	if err == nil {
		t.Fatal("the API machine did not catch a workspace without rounds in 50 seeds")
	}
	t.Logf("caught: %v", err)
}
