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
//	write=unfenced  the fences off (core.WithFencesForTesting), over the
//	                storage with HoldsLease answered without reading the
//	                lease: the write without the fence's read and lock
//
// then the sub-benchmarks more adds. Each thread takes perThread RunStarts
// of its one message under one claim, each on its own copy of the claim's
// planned round (FreshStarts). Each reports allocations. Compare them
// side by side with benchstat -col /write.
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
			through := s // the storage the Workspace writes through
			var opts []core.Option
			if w.Name == "unfenced" {
				through = unleased{s}
				opts = append(opts, core.WithFencesForTesting(core.Fences{}))
			}
			const warm = 20 // warm connections, prepared statements, caches
			var op func(ctx context.Context) error
			fresh := func(i int) {
				n := perThread
				if i == 0 {
					n += warm
				}
				c, starts := FreshStarts(ctx, b, through, coretest.NewClock(epoch), i, n, opts...)
				op = func(ctx context.Context) error {
					start := starts[0]
					starts = starts[1:]
					return start(ctx)
				}
				if w.Op != nil {
					op = w.Op(s, c)
				}
			}
			fresh(0)
			for range warm {
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

// unleased is a storage whose transactions answer HoldsLease without
// reading the lease: held, and the zero Lease. A write with its fences off
// is measured over it without the read of the lease that a fence makes
// (and the lock that read takes).
type unleased struct{ core.Storage }

func (s unleased) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, unleasedTx{tx})
	})
}

type unleasedTx struct{ core.Transaction }

func (unleasedTx) HoldsLease(context.Context, core.ThreadID, core.Holder) (bool, core.Lease, error) {
	return true, core.Lease{}, nil
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

// FreshStarts makes thread "t<i>" with one message and claims it as
// FreshClaim does, on a new Workspace over s (stamping leases with clock,
// built with opts), plans the claim's run of that message, and returns the
// claim and n RunStarts of the message under it, each to be called once,
// in order: a benchmark that repeats one claim's consuming write. A round
// allows one RunStart per plan, so each is made on its own copy of the
// planned round (core.Workspace.ForkForTesting), over s: storage sees the
// same claim start a run of the same message n times.
func FreshStarts(ctx context.Context, b *testing.B, s core.Storage, clock core.Clock, i, n int, opts ...core.Option) (core.Claim, []func(ctx context.Context) error) {
	ws := core.NewWorkspace(s, clock, opts...)
	c := FreshClaim(ctx, b, ws, i)
	p, err := ws.Plan(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	if p.Kind != core.PlanRun {
		b.Fatalf("the plan of a claim of a thread with one message is %v, not a run", p.Kind)
	}
	starts := make([]func(ctx context.Context) error, n)
	for k := range starts {
		fork, claim := ws.ForkForTesting(s, clock, nil)
		fc := claim(c)
		starts[k] = func(ctx context.Context) error {
			_, err := fork.RunStart(ctx, fc, p.Message)
			return err
		}
	}
	return c, starts
}

// Ops runs op b.N times (op(i) for i = 0, 1, ...), and calls fresh(i)
// before op(i) every every ops, off the clock, to make the next thread:
// a benchmark's thread then stays of bounded size. fresh(0) is the
// caller's; every 0 or less, or a nil fresh, never calls it. A failing op
// stops the benchmark.
func Ops(b *testing.B, every int, fresh func(i int), op func(i int) error) {
	for i := 0; i < b.N; i++ {
		if fresh != nil && every > 0 && i > 0 && i%every == 0 {
			b.StopTimer()
			fresh(i)
			b.StartTimer()
		}
		if err := op(i); err != nil {
			b.Fatal(err)
		}
	}
}
