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

// The mutants: a workspace whose rounds accept a call after the round
// ended, or a write other than the round's plan, is caught on PostgreSQL
// too.
func TestAPIMachineCatchesMutants(t *testing.T) {
	for name, m := range map[string]core.Mutants{
		"round over accepted": {RoundOverAccepted: true},
		"plan not checked":    {PlanNotChecked: true},
	} {
		t.Run(name, func(t *testing.T) {
			err := simtest.APIMachineCatches(t, func(t *testing.T) core.Storage { return newStore(t) }, 50, 40, core.WithMutantsForTesting(m))
			if err == nil {
				t.Fatalf("the API machine did not catch the mutant (%s) in 50 seeds", name)
			}
			t.Logf("caught: %v", err)
		})
	}
}
