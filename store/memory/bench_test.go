package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/simclock"
	"github.com/threadclaim/threadclaim/store/memory"
)

// BenchmarkConsumingWrite measures RunStart, the write that consumes a
// message, with the fence (HoldsLease inside the write's transaction) and
// without it. Compare the two with benchstat:
//
//	go test ./store/memory -run '^$' -bench ConsumingWrite -count 10 > bench.txt
//	benchstat -col /fence bench.txt
func BenchmarkConsumingWrite(b *testing.B) {
	for _, fence := range []string{"on", "off"} {
		b.Run("fence="+fence, func(b *testing.B) {
			ctx := context.Background()
			// Rounds off: the benchmark repeats one claim's RunStart.
			opts := []core.Option{core.WithoutRoundsForTesting()}
			if fence == "off" {
				opts = append(opts, core.WithFencesForTesting(core.Fences{}))
			}
			ws := core.NewWorkspace(memory.New(), simclock.New(time.Unix(0, 0)), opts...)
			// A thread is renewed every 256 writes, off the clock, so its
			// size (which a write copies) stays bounded.
			const perThread = 256
			var c core.Claim
			fresh := func(i int) {
				id := core.ThreadID(fmt.Sprintf("t%d", i))
				if err := ws.CreateThread(ctx, id); err != nil {
					b.Fatal(err)
				}
				if _, err := ws.Post(ctx, id, "m"); err != nil {
					b.Fatal(err)
				}
				var err error
				if c, err = ws.Claim(ctx, id, "h", time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			fresh(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 && i%perThread == 0 {
					b.StopTimer()
					fresh(i)
					b.StartTimer()
				}
				if _, err := ws.RunStart(ctx, c, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
