package memory_test

import (
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim/simtest"
	"github.com/threadclaim/threadclaim/store/memory"
)

// Any sequence of public calls, by several processes with skewed clocks,
// is refused or traced as a behaviour of the specification.
func TestAPIClosedUnderSpec(t *testing.T) {
	simtest.RunAPIMachine(t, func(*testing.T) core.Storage { return memory.New() }, 60)
}

// The mutants: a workspace with one of its rounds' checks removed accepts
// calls the specification does not allow, and the machine must catch
// each.
func TestAPIMachineCatchesMutants(t *testing.T) {
	for name, opt := range map[string]core.Option{
		"round over accepted": core.WithMutantsForTesting(core.Mutants{RoundOverAccepted: true}),
		"plan not checked":    core.WithMutantsForTesting(core.Mutants{PlanNotChecked: true}),
	} {
		t.Run(name, func(t *testing.T) {
			err := simtest.APIMachineCatches(t, func(*testing.T) core.Storage { return memory.New() }, 200, 60, opt)
			if err == nil {
				t.Fatalf("the API machine did not catch the mutant (%s) in 200 seeds", name)
			}
			t.Logf("caught: %v", err)
		})
	}
}
