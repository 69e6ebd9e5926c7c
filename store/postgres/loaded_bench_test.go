package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
)

// BenchmarkRunnerLoadedLatency measures post-to-start while messages
// arrive at a steady rate: b.N messages posted round-robin over 100
// threads, at rate= messages a second on a fixed schedule (open loop: a
// post is not held back by the one before; 16 posters take the schedule's
// posts in turn), to 4 runners woken by LISTEN/NOTIFY and polling every
// 50ms, ClaimTTL 2s. Each message's post-to-start is from its Post's
// return to its run's start (the agent's call); p50 and p99 in µs.
// late-% is the share of posts sent over 5ms behind the schedule (every
// poster busy, or the machine late to wake the schedule): near 0, the
// rate is the one offered.
// Saturation on the 2-core machine is the posting figure of
// BenchmarkRunnerLevers (about 2,500 messages a second): rate=1250 is
// half of it.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench RunnerLoadedLatency -benchtime 5000x -count 3
func BenchmarkRunnerLoadedLatency(b *testing.B) {
	for _, rate := range []int{250, 500, 1250} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) { benchLoadedLatency(b, rate) })
	}
}

// posted names one message: its thread and its seq.
type posted struct {
	thread core.ThreadID
	seq    core.Seq
}

func benchLoadedLatency(b *testing.B, rate int) {
	const runners, threads, posters = 4, 100, 16
	var (
		mu      sync.Mutex
		started = make(map[posted]time.Time, b.N)
		all     = make(chan struct{})
	)
	br := startRunners(b, runnerSetup{
		runners: runners, threads: threads,
		claimTTL: 2 * time.Second, pollEvery: 50 * time.Millisecond, wake: true,
		opts: readModes[0].opts,
		agent: func(int) runner.Agent {
			return runner.AgentFunc(func(_ context.Context, sn *runner.Session) error {
				at := time.Now()
				mu.Lock()
				defer mu.Unlock()
				started[posted{sn.Delivered.Claim.Thread, sn.Delivered.Taken}] = at
				if len(started) == b.N {
					close(all)
				}
				return nil
			})
		},
	})
	defer br.stop()
	settle()
	ctx := context.Background()
	var (
		postedAt = make(map[posted]time.Time, b.N)
		late     int
		errs     = make(chan error, posters)
		queue    = make(chan int)
	)
	for range posters {
		go func() {
			for i := range queue {
				seq, err := br.poster.Post(ctx, br.threads[i%threads], "m")
				if err != nil {
					errs <- err
					return
				}
				returned := time.Now()
				mu.Lock()
				postedAt[posted{br.threads[i%threads], seq}] = returned
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	b.ResetTimer()
	start := time.Now()
	every := time.Second / time.Duration(rate)
	for i := range b.N {
		at := start.Add(time.Duration(i) * every)
		time.Sleep(time.Until(at))
		queue <- i
		if time.Since(at) > 5*time.Millisecond {
			late++ // every poster was busy, or the schedule itself ran late
		}
	}
	close(queue)
	for range posters {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		mu.Lock()
		n := len(started)
		mu.Unlock()
		b.Fatalf("%d of %d runs started within a minute of the last post", n, b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	mu.Lock()
	lat := make([]time.Duration, 0, b.N)
	for m, p := range postedAt {
		s, ok := started[m]
		if !ok {
			mu.Unlock()
			b.Fatalf("message %d of thread %q posted, and no run started for it", m.seq, m.thread)
		}
		lat = append(lat, max(s.Sub(p), 0)) // the start can commit before Post's caller sees its reply
	}
	mu.Unlock()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(100*float64(late)/float64(b.N), "late-%")
}
