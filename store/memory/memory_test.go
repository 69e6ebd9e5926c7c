package memory_test

import (
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Exercise(t, func(*testing.T) core.Storage { return memory.New() })
}
