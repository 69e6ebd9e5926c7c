package memory_test

import (
	"testing"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// BenchmarkConsumingWrite is the conformance suite's benchmark of RunStart
// (write=fenced, write=unfenced). Compare the two with benchstat:
//
//	go test ./store/memory -run '^$' -bench ConsumingWrite -count 10 > bench.txt
//	benchstat -col /write bench.txt
func BenchmarkConsumingWrite(b *testing.B) {
	storetest.BenchmarkConsumingWrite(b, func(*testing.B) core.Storage { return memory.New() })
}
