package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/simclock"
)

// BenchmarkConsumingWrite measures RunStart, the write that consumes a
// message, on a real server, beside what it is compared with:
//
//	write=fenced          RunStart with every fence on (a deployment)
//	write=unfenced        RunStart with the fences off (WithFencesForTesting)
//	write=fenced-nocache  RunStart folding the whole log each time (CachedThreads -1)
//	write=update-tx       BEGIN; one UPDATE of the thread's row; COMMIT (pgx.Tx)
//	write=update          the same UPDATE alone, autocommitted: one round trip
//
// A thread takes 500 writes, then a new one is made off the clock, so the
// thread's size stays bounded. Compare side by side with benchstat:
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench ConsumingWrite -count 6 > bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /write bench.txt
func BenchmarkConsumingWrite(b *testing.B) {
	for _, write := range []string{"fenced", "unfenced", "fenced-nocache", "update-tx", "update"} {
		b.Run("write="+write, func(b *testing.B) {
			ctx := context.Background()
			opts := Options{Schema: testSchema(b)}
			if write == "fenced-nocache" {
				opts.CachedThreads = -1
			}
			s, err := open(ctx, poolConfig(b, "tc-bench"), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			// Rounds off: the benchmark repeats one claim's RunStart.
			wsOpts := []core.Option{core.WithoutRoundsForTesting()}
			if write == "unfenced" {
				wsOpts = append(wsOpts, core.WithFencesForTesting(core.Fences{}))
			}
			ws := core.NewWorkspace(s, simclock.New(epoch), wsOpts...)
			const perThread = 500
			var c core.Claim
			fresh := func(i int) {
				id := core.ThreadID(fmt.Sprintf("t%d", i))
				if err := ws.CreateThread(ctx, id); err != nil {
					b.Fatal(err)
				}
				if _, err := ws.Post(ctx, id, "m"); err != nil {
					b.Fatal(err)
				}
				if c, err = ws.Claim(ctx, id, "h", time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			update := `UPDATE ` + pgx.Identifier{s.Schema()}.Sanitize() + `.threads SET version = version + 1 WHERE id = $1`
			op := func() error {
				_, err := ws.RunStart(ctx, c, 1)
				return err
			}
			switch write {
			case "update-tx":
				op = func() error {
					return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
						_, err := tx.Exec(ctx, update, string(c.Thread))
						return err
					})
				}
			case "update":
				op = func() error {
					_, err := s.pool.Exec(ctx, update, string(c.Thread))
					return err
				}
			}
			fresh(0)
			for range 20 { // warm the pool's connection and its prepared statements
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 && i%perThread == 0 {
					b.StopTimer()
					fresh(i)
					b.StartTimer()
				}
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWakeUp measures how long a posted message takes to wake a
// listener in another Store: from Post's call to the wake-up's arrival,
// with its p50 and p99 reported as metrics.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench WakeUp -count 6
func BenchmarkWakeUp(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(b)
	listener, err := open(ctx, poolConfig(b, "tc-bench"), Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer listener.Close()
	poster, err := open(ctx, poolConfig(b, "tc-bench"), Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer poster.Close()
	ws := core.NewWorkspace(poster, core.SystemClock{})
	const perThread = 500
	var id core.ThreadID
	fresh := func(i int) {
		id = core.ThreadID(fmt.Sprintf("t%d", i))
		if err := ws.CreateThread(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	wake, err := listener.Listen(ctx)
	if err != nil {
		b.Fatal(err)
	}
	fresh(0)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 && i%perThread == 0 {
			b.StopTimer()
			fresh(i)
			b.StartTimer()
		}
		start := time.Now()
		if _, err := ws.Post(ctx, id, "m"); err != nil {
			b.Fatal(err)
		}
		if got := <-wake; got != id {
			b.Fatalf("woken for %q, posted to %q", got, id)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
