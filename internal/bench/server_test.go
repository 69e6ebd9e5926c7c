package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkServer measures two costs the server pays for both systems,
// whatever their SQL, on the server DATABASE_URL names (run it under
// scripts/with-postgres, with -benchtime Nx):
//
//	connect       b.N connections opened, each running one statement,
//	              and closed, one after another: what a worker's pool
//	              pays for each connection it opens (the drain's start
//	              opens 12-13 of them for River's 4 clients, 21 for the
//	              4 runners here: Compare's sessions)
//	notify/listeners=N
//	              b.N NOTIFYs, each in a transaction of its own, on one
//	              channel, with N connections LISTENing: one on that
//	              channel (reading what it gets), the others on channels
//	              of their own, as the runners' wake-up shares do.
//	              PostgreSQL (15, at least) signals every listening
//	              backend of the database for each NOTIFY, whatever its
//	              channels: each wakes, reads the notification queue in a
//	              transaction of its own, and finds nothing for it
//
// Each reports the server's CPU an operation (every PostgreSQL process:
// server-cpu-µs/op) and the wall time (ns/op); notify also the server's
// transactions a NOTIFY (xacts/op: its own, and each listener's reads).
func BenchmarkServer(b *testing.B) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		b.Fatal("DATABASE_URL is not set: run under scripts/with-postgres")
	}
	b.Run("connect", func(b *testing.B) {
		ctx := context.Background()
		srv := newServer(b, url)
		defer srv.close()
		cpu0 := srv.cpu(b)
		b.ResetTimer()
		for range b.N {
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Exec(ctx, `SELECT 1`); err != nil {
				b.Fatal(err)
			}
			if err := c.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		time.Sleep(200 * time.Millisecond) // the last backends have exited
		b.ReportMetric(float64((srv.cpu(b)-cpu0).Microseconds())/float64(b.N), "server-cpu-µs/op")
	})
	for _, n := range []int{0, 1, 4, 8} {
		b.Run(fmt.Sprintf("notify/listeners=%d", n), func(b *testing.B) { benchNotify(b, url, n) })
	}
}

// benchNotify is BenchmarkServer's notify/listeners=n.
func benchNotify(b *testing.B, url string, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const channel = "bench_notified"
	got := make(chan error, 1)
	var conns []*pgx.Conn
	closeAll := func() {
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
		conns = nil
	}
	defer closeAll()
	for i := range n {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		ch := fmt.Sprintf("bench_other_%d", i)
		if i == 0 {
			ch = channel
		}
		if _, err := c.Exec(ctx, `LISTEN `+ch); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			go func() {
				for {
					if _, err := c.WaitForNotification(ctx); err != nil {
						got <- err
						return
					}
				}
			}()
		}
	}
	poster, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	conns = append(conns, poster)
	notify := func() {
		if _, err := poster.Exec(ctx, `SELECT pg_notify($1, 'x')`, channel); err != nil {
			b.Fatal(err)
		}
	}
	notify() // prepared
	srv := newServer(b, url)
	defer srv.close()
	cpu0 := srv.cpu(b)
	xacts0, _ := srv.xacts(b)
	b.ResetTimer()
	for range b.N {
		notify()
	}
	b.StopTimer()
	time.Sleep(100 * time.Millisecond) // the listeners have read the queue
	b.ReportMetric(float64((srv.cpu(b)-cpu0).Microseconds())/float64(b.N), "server-cpu-µs/op")
	if n > 0 {
		select {
		case err := <-got:
			b.Fatalf("the listener on %s failed while the notifications went out: %v", channel, err)
		default:
		}
		cancel()
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			b.Fatalf("the listener on %s did not stop within 10s of its context's end", channel)
		}
	}
	// A backend reports its transactions when it ends (or after a while
	// idle): close them all, then read (their LISTENs and the first
	// NOTIFY's, before the timer, are a few among b.N).
	closeAll()
	time.Sleep(300 * time.Millisecond)
	xacts, _ := srv.xacts(b)
	b.ReportMetric(float64(xacts-xacts0)/float64(b.N), "xacts/op")
}
