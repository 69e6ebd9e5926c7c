package postgres

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/memory"
)

// BenchmarkLongThread measures one message's turn writes on a thread that
// already has runs= runs behind it, under one claim: its Post, its
// RunStart and its RunEnd with the next Plan, as the runner takes them.
// A write's cost should not grow with the thread's history; this shows
// whether it does (allocated bytes a message, B/op, most of all). It
// also reports the heap still in use when the thread's last run has ended
// (after a collection), by run: what the Store keeps of a thread should
// grow with its runs, not with their square.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench LongThread -benchmem
func BenchmarkLongThread(b *testing.B) {
	for _, store := range []string{"postgres", "memory"} {
		for _, runs := range []int{10, 1000, 10000} {
			b.Run(fmt.Sprintf("store=%s/runs=%d", store, runs), func(b *testing.B) {
				var s core.Storage
				if store == "postgres" {
					s = newStore(b)
				} else {
					s = memory.New()
				}
				benchLongThread(b, s, runs)
			})
		}
	}
}

func benchLongThread(b *testing.B, s core.Storage, runs int) {
	heap0 := liveHeap()
	ctx := context.Background()
	ws := core.NewWorkspace(s, core.SystemClock{})
	if err := ws.CreateThread(ctx, "t"); err != nil {
		b.Fatal(err)
	}
	c, err := ws.Claim(ctx, "t", "h", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ws.Post(ctx, "t", "m"); err != nil {
		b.Fatal(err)
	}
	p, err := ws.Plan(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	turn := func() {
		run, err := ws.RunStart(ctx, c, p.Message)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ws.Post(ctx, "t", "m"); err != nil {
			b.Fatal(err)
		}
		if p, _, err = ws.RunEndThenStart(ctx, c, run, "", -1, false); err != nil {
			b.Fatal(err)
		}
	}
	for range runs {
		turn()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		turn()
	}
	b.StopTimer()
	b.ReportMetric(float64(liveHeap()-heap0)/float64(runs+b.N), "live-B/run")
	runtime.KeepAlive(s)
}

// liveHeap returns the bytes of the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
