package postgres

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
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
//
// rate=half is issue 25's measure: the same runners first take 4,000
// messages that the 16 posters post as fast as they can (closed loop:
// saturation-msgs/s, the rate at which the runners started them), then
// the schedule runs at half of that rate. Saturation differs from machine
// to machine and from day to day on a shared one: measured in the same
// run, half of it is half of it.
//
// Before any of it, one message to each thread is posted and started,
// untimed: the posters' pool opens its connections and the Store reads
// each thread once. Without it the first message of each thread took
// 5–64ms, over 1% of 5,000 messages, and p99 measured the start, not the
// steady rate.
//
// start-write-p50-µs and start-write-p99-µs are the part of a message's
// post-to-start from its turn's claim returning (TurnReport.Began) to the
// run's start: the RunStart's round trip, and the runner's steps around
// it. tail-start-write-% is that part's share of the time of the slowest
// 1% of the messages (those at or past p99). claimed-p99-µs is the p99
// of the part before: post to the claim's return.
//
// gc/s is how many cycles the process's garbage collector completed a second
// while the schedule ran. The process is the posters' and the runners':
// the messages whose start waited most were posted during a cycle, in
// clusters (store/postgres/BENCH.md, "The tail at half of saturation: the
// collector").
//
// rate=2000 is a little under half of what 4 runners start while 16
// posters post 10,000 messages (internal/bench's Compare: 4,842-5,085 a
// second on 5 Dec 2026, River 3,866-3,983): there a turn takes several
// messages of its thread; at a steady rate each message is a turn of its
// own, with its own claim (BENCH.md, "The tail at half of saturation: a
// turn a message").
//
// rate=500/claim=two-trips and rate=half/claim=two-trips are the same
// with the runners' Claims of two round trips (BEGIN with the claim, then
// COMMIT: Store.claimBegins), the one-trip Claim's before.
// rate=1250/start=apart and rate=half/start=apart are the same with each
// run's start written apart from its claim (Store.noClaimStart), the
// before of the start in the claim (ClaimThenStart).
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench RunnerLoadedLatency -benchtime 5000x -count 3
func BenchmarkRunnerLoadedLatency(b *testing.B) {
	for _, rate := range []int{250, 500, 1250, 2000, 0} {
		name := fmt.Sprintf("rate=%d", rate)
		if rate == 0 {
			name = "rate=half"
		}
		b.Run(name, func(b *testing.B) { benchLoadedLatency(b, rate, runnerSetup{}) })
	}
	// The befores of the one-trip Claim and of the start in the claim,
	// in the same run.
	twoTrips, apart := runnerSetup{claimBegins: true}, runnerSetup{startApart: true}
	b.Run("rate=500/claim=two-trips", func(b *testing.B) { benchLoadedLatency(b, 500, twoTrips) })
	b.Run("rate=half/claim=two-trips", func(b *testing.B) { benchLoadedLatency(b, 0, twoTrips) })
	b.Run("rate=1250/start=apart", func(b *testing.B) { benchLoadedLatency(b, 1250, apart) })
	b.Run("rate=half/start=apart", func(b *testing.B) { benchLoadedLatency(b, 0, apart) })
}

// posted names one message: its thread and its seq.
type posted struct {
	thread core.ThreadID
	seq    core.Seq
}

// startLog keeps when each message's run started, and tells when a
// number of them have.
type startLog struct {
	mu      sync.Mutex
	at      map[posted]time.Time
	by      map[posted]core.Holder    // the claim whose turn started the run
	claimed map[core.Holder]time.Time // when each turn's claim returned (TurnReport.Began)
	goal    int
	reached chan struct{}
}

func (l *startLog) started(m posted, by core.Holder, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at[m], l.by[m] = at, by
	if len(l.at) == l.goal {
		close(l.reached)
	}
}

// turned records when a turn's claim returned.
func (l *startLog) turned(r runner.TurnReport) {
	if r.Holder == "" || r.Began.IsZero() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claimed[r.Holder] = r.Began
}

// await waits until n runs have started, or fails b after a minute
// naming what it waited for.
func (l *startLog) await(b *testing.B, n int, what string) {
	l.mu.Lock()
	l.goal, l.reached = n, make(chan struct{})
	if len(l.at) >= n {
		close(l.reached)
	}
	reached := l.reached
	l.mu.Unlock()
	select {
	case <-reached:
	case <-time.After(time.Minute):
		l.mu.Lock()
		defer l.mu.Unlock()
		b.Fatalf("%s: %d of %d runs started within a minute", what, len(l.at), n)
	}
}

// benchLoadedLatency is BenchmarkRunnerLoadedLatency at rate (0: half of
// saturation), with undo's levers undone (claimBegins, startApart).
func benchLoadedLatency(b *testing.B, rate int, undo runnerSetup) {
	const runners, threads, posters, saturation = 4, 100, 16, 4000
	n := threads + saturation + b.N
	log := &startLog{at: make(map[posted]time.Time, n), by: make(map[posted]core.Holder, n), claimed: make(map[core.Holder]time.Time, n)}
	br := startRunners(b, runnerSetup{
		runners: runners, threads: threads,
		claimTTL: 2 * time.Second, pollEvery: 50 * time.Millisecond, wake: true, claimBegins: undo.claimBegins, startApart: undo.startApart,
		opts: readModes[0].opts, onTurn: log.turned,
		agent: func(int) runner.Agent {
			return runner.AgentFunc(func(_ context.Context, sn *runner.Session) error {
				log.started(posted{sn.Delivered.Claim.Thread, sn.Delivered.Taken}, sn.Delivered.Claim.Holder, time.Now())
				return nil
			})
		},
	})
	defer br.stop()
	br.settle(b)
	ctx := context.Background()
	var (
		mu       sync.Mutex
		postedAt = make(map[posted]time.Time, b.N)
		timed    = -1 // the first post timed; those before are the warm-up's and saturation's
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
				if timed >= 0 && i >= timed {
					postedAt[posted{br.threads[i%threads], seq}] = returned
				}
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	next, sat := 0, 0.0
	for range threads {
		queue <- next
		next++
	}
	log.await(b, next, "the warm-up's message to each thread")
	if rate == 0 {
		t0 := time.Now()
		for range saturation {
			queue <- next
			next++
		}
		log.await(b, next, "the saturation's messages")
		sat = saturation / time.Since(t0).Seconds()
		rate = max(int(sat/2), 1)
		// The burst's aftermath is not the steady rate's: the runners
		// end their turns, and the burst's garbage is collected, before
		// the schedule starts (without this, the messages of its first
		// 50 ms or so were 3% of those timed, and the slowest).
		br.awaitIdle(b, nil)
		runtime.GC()
	}
	mu.Lock()
	timed = next
	mu.Unlock()
	turns0, busy0, idle0, polls0 := br.turns.Load(), br.busy.Load(), br.idle.Load(), br.polls()
	gc0 := gcCycles()
	b.ResetTimer()
	start := time.Now()
	every := time.Second / time.Duration(rate)
	for i := range b.N {
		at := start.Add(time.Duration(i) * every)
		time.Sleep(time.Until(at))
		queue <- next + i
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
	log.await(b, next+b.N, "the runs of the messages posted on the schedule")
	elapsed := time.Since(start)
	b.StopTimer()
	gcs := gcCycles() - gc0
	mu.Lock()
	defer mu.Unlock()
	reportSplits(b, log.splits(b, postedAt))
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	if sat > 0 {
		b.ReportMetric(sat, "saturation-msgs/s") // after ResetTimer, which drops the metrics reported before it
	}
	b.ReportMetric(100*float64(late)/float64(b.N), "late-%")
	b.ReportMetric(float64(gcs)/elapsed.Seconds(), "gc/s")
	per := func(n int64) float64 { return float64(n) / float64(b.N) }
	b.ReportMetric(per(br.turns.Load()-turns0), "turns/msg")
	b.ReportMetric(per(br.busy.Load()-busy0), "busy-turns/msg")
	b.ReportMetric(per(br.idle.Load()-idle0), "idle-turns/msg")
	b.ReportMetric(per(br.polls()-polls0), "polls/msg")
}

// split is one message's post-to-start, and its part from the turn's
// claim returning to the run's start: the RunStart's write, and the
// runner's steps around it.
type split struct{ total, write time.Duration }

// splits returns the post-to-start of each message posted (at the time
// postedAt has), once the turn that started each has reported (a turn
// reports at its end, after its runs started), or fails b naming a
// message whose run or turn's report it lacks a minute on.
func (l *startLog) splits(b *testing.B, postedAt map[posted]time.Time) []split {
	deadline := time.Now().Add(time.Minute)
	for {
		lat, missing := l.trySplits(postedAt)
		if missing == "" {
			return lat
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s, a minute after the last run started", missing)
		}
		time.Sleep(time.Millisecond)
	}
}

// trySplits is splits now, or what it lacks.
func (l *startLog) trySplits(postedAt map[posted]time.Time) ([]split, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lat := make([]split, 0, len(postedAt))
	for m, p := range postedAt {
		s, ok := l.at[m]
		if !ok {
			return nil, fmt.Sprintf("message %d of thread %q posted, and no run started for it", m.seq, m.thread)
		}
		c, ok := l.claimed[l.by[m]]
		if !ok {
			return nil, fmt.Sprintf("message %d of thread %q: its turn (holder %q) did not report its claim", m.seq, m.thread, l.by[m])
		}
		// The start can commit before Post's caller sees its reply.
		lat = append(lat, split{total: max(s.Sub(p), 0), write: max(s.Sub(c), 0)})
	}
	return lat, ""
}

// reportSplits reports the post-to-start's p50 and p99, the same of its
// part after the claim (start-write-), the p99 of the part before it
// (claimed-p99-µs, post to the claim's return), and the part after's
// share of the slowest 1%'s post-to-start (tail-start-write-%): how much
// of the tail a start written with its claim, in the claim's round trip,
// would remove.
func reportSplits(b *testing.B, lat []split) {
	slices.SortFunc(lat, func(x, y split) int { return cmp.Compare(x.total, y.total) })
	writes, claimed := make([]time.Duration, len(lat)), make([]time.Duration, len(lat))
	for i, l := range lat {
		writes[i], claimed[i] = l.write, max(l.total-l.write, 0)
	}
	slices.Sort(writes)
	slices.Sort(claimed)
	var tail, tailWrite time.Duration
	for _, l := range lat[len(lat)*99/100:] {
		tail += l.total
		tailWrite += min(l.write, l.total)
	}
	b.ReportMetric(float64(lat[len(lat)/2].total.Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].total.Microseconds()), "p99-µs")
	b.ReportMetric(float64(writes[len(writes)/2].Microseconds()), "start-write-p50-µs")
	b.ReportMetric(float64(writes[len(writes)*99/100].Microseconds()), "start-write-p99-µs")
	b.ReportMetric(float64(claimed[len(claimed)*99/100].Microseconds()), "claimed-p99-µs")
	if tail > 0 {
		b.ReportMetric(100*float64(tailWrite)/float64(tail), "tail-start-write-%")
	}
}

// gcCycles returns how many cycles the garbage collector has completed
// (runtime.MemStats.NumGC).
func gcCycles() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumGC
}
