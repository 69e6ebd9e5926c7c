package storetest_test

import (
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// A storage author runs every check against their storage from one test:
// the conformance suite, seeded executions whose traces are checked,
// concurrent executions checked by porcupine, and the fences-off mutant,
// which must be caught on their storage too.
func ExampleExercise() {
	// In the storage's own _test.go file:
	testMyStorage := func(t *testing.T) {
		storetest.Exercise(t, func(t *testing.T) core.Storage {
			return memory.New() // a fresh, empty storage of yours
		})
	}
	_ = testMyStorage
}
