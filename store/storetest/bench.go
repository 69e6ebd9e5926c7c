package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
)

// WriteBench is a sub-benchmark of BenchmarkConsumingWrite, measured beside
// RunStart: a RunStart on a storage made differently, or the baseline a
// storage compares its consuming write with.
type WriteBench struct {
	Name string
	// Storage makes the storage; nil: the benchmark's own.
	Storage func(b *testing.B) core.Storage
	// Op, when set, is measured instead of RunStart. It is given the
	// storage and a claim on a thread with one message, and returns the
	// operation.
	Op func(s core.Storage, c core.Claim) func(ctx context.Context) error
}

// perThread is how many writes a benchmark's thread takes before a new
// one is made, off the clock, so that the thread's size stays bounded.
const perThread = 256

// BenchmarkConsumingWrite measures RunStart, the write that consumes a
// message, on the storages newStorage makes, as sub-benchmarks
//
//	write=fenced    every fence on (a deployment)
//	write=unfenced  the fences off (core.WithFencesForTesting)
//
// then the sub-benchmarks more adds. Each reports allocations. Compare
// them side by side with benchstat -col /write.
func BenchmarkConsumingWrite(b *testing.B, newStorage func(b *testing.B) core.Storage, more ...WriteBench) {
	all := append([]WriteBench{{Name: "fenced"}, {Name: "unfenced"}}, more...)
	for _, w := range all {
		b.Run("write="+w.Name, func(b *testing.B) {
			ctx := context.Background()
			mk := newStorage
			if w.Storage != nil {
				mk = w.Storage
			}
			s := mk(b)
			// Rounds off: the benchmark repeats one claim's write, which a
			// round allows once.
			opts := []core.Option{core.WithoutRoundsForTesting()}
			if w.Name == "unfenced" {
				opts = append(opts, core.WithFencesForTesting(core.Fences{}))
			}
			ws := core.NewWorkspace(s, coretest.NewClock(epoch), opts...)
			var op func(ctx context.Context) error
			fresh := func(i int) {
				c := FreshClaim(ctx, b, ws, i)
				op = func(ctx context.Context) error {
					_, err := ws.RunStart(ctx, c, 1)
					return err
				}
				if w.Op != nil {
					op = w.Op(s, c)
				}
			}
			fresh(0)
			for range 20 { // warm connections, prepared statements, caches
				if err := op(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			Ops(b, perThread, fresh, func(int) error { return op(ctx) })
		})
	}
}

// FreshClaim makes thread "t<i>" with one message and claims it for an
// hour as holder "h<i>": a benchmark's next thread.
func FreshClaim(ctx context.Context, b *testing.B, ws *core.Workspace, i int) core.Claim {
	id := core.ThreadID(fmt.Sprintf("t%d", i))
	if err := ws.CreateThread(ctx, id); err != nil {
		b.Fatal(err)
	}
	if _, err := ws.Post(ctx, id, "m"); err != nil {
		b.Fatal(err)
	}
	c, err := ws.Claim(ctx, id, core.Holder(fmt.Sprintf("h%d", i)), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// Ops runs op b.N times (op(i) for i = 0, 1, ...), and calls fresh(i)
// before op(i) every every ops, off the clock, to make the next thread:
// a benchmark's thread then stays of bounded size. fresh(0) is the
// caller's. A failing op stops the benchmark.
func Ops(b *testing.B, every int, fresh func(i int), op func(i int) error) {
	for i := 0; i < b.N; i++ {
		if i > 0 && i%every == 0 {
			b.StopTimer()
			fresh(i)
			b.StartTimer()
		}
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
}
