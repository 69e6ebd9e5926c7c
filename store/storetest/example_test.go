package storetest_test

import (
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// A storage author runs the conformance suite against their storage from
// one test, with a factory that makes a fresh, empty storage.
func ExampleRun() {
	// In the storage's own _test.go file:
	testMyStorage := func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) core.Storage {
			return memory.New() // a fresh, empty storage of yours
		})
	}
	_ = testMyStorage
}
