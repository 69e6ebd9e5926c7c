package postgres

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
)

// The runner benchmarks run whole runner.Runners against a real server,
// each as a process would: its own Store (its own pool and listening
// connection), its own Workspace on the system clock, its own wake-ups.
// Messages are posted by yet another Store.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench 'Runner' -count 3 -benchtime 2s

// probe sits between a runner and its Store and clock, to tell when the
// runner is idle: Run asks the clock for its poll timer just before it
// waits, and every look for work starts with a transaction.
type probe struct {
	core.Storage
	poll    time.Duration
	updates atomic.Int64
	polls   atomic.Int64 // PendingThreads calls
	waiting atomic.Bool  // no storage call since Run asked for its poll, or since a turn ended (OnTurn)
}

func (p *probe) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	p.waiting.Store(false)
	p.updates.Add(1)
	return p.Storage.Update(ctx, fn)
}

// PendingThreads passes the Store's unlocked poll through, so the runner
// looks for work as it would without the probe.
func (p *probe) PendingThreads(ctx context.Context) ([]core.PendingThread, error) {
	p.waiting.Store(false)
	p.updates.Add(1)
	p.polls.Add(1)
	return p.Storage.(core.PendingLister).PendingThreads(ctx)
}

// View passes the Store's read-only transactions through, as
// PendingThreads does.
func (p *probe) View(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	p.waiting.Store(false)
	p.updates.Add(1)
	return p.Storage.(core.Viewer).View(ctx, fn)
}

func (p *probe) Now() time.Time { return time.Now() }

func (p *probe) After(d time.Duration) <-chan time.Time {
	if d == p.poll {
		p.waiting.Store(true)
	}
	return time.After(d)
}

// benchRunners is a benchmark's runner processes and its poster.
type benchRunners struct {
	schema  string
	poster  *core.Workspace
	threads []core.ThreadID
	probes  []*probe
	stores  []*Store // the runners'
	shares  []*share // their Wakeups listeners' views (wake: true)
	posterS *Store
	stop    func()       // stops the runners and closes the Stores; idempotent
	started time.Time    // when the first runner was started
	turns   atomic.Int64 // turns over, whatever their outcome
	busy    atomic.Int64 // turns whose claim found the thread claimed
	idle    atomic.Int64 // turns that claimed the thread and found nothing to consume
	wakes   atomic.Int64 // wake-ups the runners received
}

// reportPerMessage reports, per consumed message, the round trips and
// transactions the runners' Stores made (and the speculating writes whose
// check failed), the poster's round trips, the runners' polls
// (PendingThreads), their turns, the turns that found the thread
// claimed by another (busy) and the wake-ups they received, and the
// runners' one-trip writes (trip-writes) with the round trips that
// carried them (trip-sends: fewer when several went together, trips.go),
// and those of them that carried several in one transaction
// (trip-groups), counted from zero at b.ResetTimer.
func (br *benchRunners) reportPerMessage(b *testing.B, n int, base [11]int64) {
	now := br.counts()
	per := func(i int) float64 { return float64(now[i]-base[i]) / float64(n) }
	b.ReportMetric(per(0), "roundtrips/msg")
	b.ReportMetric(per(1), "txns/msg")
	b.ReportMetric(per(2), "conflicts/msg")
	b.ReportMetric(per(3), "poster-roundtrips/msg")
	b.ReportMetric(per(4), "polls/msg")
	b.ReportMetric(per(5), "turns/msg")
	b.ReportMetric(per(6), "busy-turns/msg")
	b.ReportMetric(per(7), "wakeups/msg")
	b.ReportMetric(per(8), "trip-writes/msg")
	b.ReportMetric(per(9), "trip-sends/msg")
	b.ReportMetric(per(10), "trip-groups/msg")
}

func (br *benchRunners) counts() [11]int64 {
	var c [11]int64
	for _, s := range br.stores {
		c[0] += s.stats.roundTrips.Load()
		c[1] += s.stats.transactions.Load()
		c[2] += s.stats.conflicts.Load()
		c[8] += s.stats.tripWrites.Load()
		c[9] += s.stats.tripSends.Load()
		c[10] += s.stats.tripGroups.Load()
	}
	c[3] = br.posterS.stats.roundTrips.Load()
	for _, p := range br.probes {
		c[4] += p.polls.Load()
	}
	c[5], c[6], c[7] = br.turns.Load(), br.busy.Load(), br.wakes.Load()
	return c
}

type runnerSetup struct {
	runners   int
	threads   int
	claimTTL  time.Duration
	pollEvery time.Duration
	wake      bool // Wake from the runner's own Store's Wakeups
	agent     func(i int) runner.Agent
	opts      Options // the Stores' (Schema is the benchmark's)
	// before, when set, runs once the threads exist, before any runner
	// starts (to post work the runners then drain).
	before func(br *benchRunners)
	// readPost, wakeAll, tripsAlone and claimBegins undo a lever, for a
	// before in the same run: the poster reads the thread before it posts
	// (two round trips), every post wakes every runner, the runners'
	// Stores send each one-trip write on its own, and their Claims begin
	// a transaction that a second round trip commits.
	readPost, wakeAll, tripsAlone, claimBegins bool
	// tripsSynced: the runners' Stores commit each write of a shared
	// round trip on its own (Store.tripsSynced), as before the writes
	// shared a transaction.
	tripsSynced bool
	// startApart: the runners' Stores write each run's start apart from
	// its claim (Store.noClaimStart), as before ClaimThenStart.
	startApart bool
	// onTurn, when set, is given each turn's report too.
	onTurn func(runner.TurnReport)
}

// startRunners creates the threads and starts the runners, each waiting
// idle once this returns.
func startRunners(b *testing.B, cfg runnerSetup) *benchRunners {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	schema := testSchema(b)
	opts := cfg.opts
	opts.Schema = schema
	poster, err := open(ctx, poolConfig(b, "tc-bench-poster"), opts)
	if err != nil {
		b.Fatal(err)
	}
	poster.readPost = cfg.readPost
	br := &benchRunners{schema: schema, poster: core.NewWorkspace(poster, core.SystemClock{}, core.WithProcess("poster")), posterS: poster}
	for i := range cfg.threads {
		id := core.ThreadID(fmt.Sprintf("t%03d", i))
		if err := br.poster.CreateThread(ctx, id); err != nil {
			b.Fatal(err)
		}
		br.threads = append(br.threads, id)
	}
	if cfg.before != nil {
		cfg.before(br)
	}
	br.started = time.Now()
	var stores []*Store
	var wg sync.WaitGroup
	for i := range cfg.runners {
		s, err := open(ctx, poolConfig(b, fmt.Sprintf("tc-bench-runner-%d", i)), opts)
		if err != nil {
			b.Fatal(err)
		}
		s.wakeAll, s.tripsAlone, s.claimBegins, s.noClaimStart, s.tripsSynced = cfg.wakeAll, cfg.tripsAlone, cfg.claimBegins, cfg.startApart, cfg.tripsSynced
		stores = append(stores, s)
		p := &probe{Storage: s, poll: cfg.pollEvery}
		br.probes = append(br.probes, p)
		var wake <-chan core.ThreadID
		if cfg.wake {
			var sh *share
			if wake, sh, err = s.wakeups(ctx); err != nil {
				b.Fatal(err)
			}
			br.shares = append(br.shares, sh)
			wake = br.counted(wake)
		}
		r, err := runner.New(runner.Config{
			Workspace: core.NewWorkspace(p, core.SystemClock{}, core.WithProcess(fmt.Sprintf("runner-%d", i))),
			Agent:     cfg.agent(i),
			Clock:     p,
			ClaimTTL:  cfg.claimTTL,
			PollEvery: cfg.pollEvery,
			Wake:      wake,
			OnTurn: func(r runner.TurnReport) {
				if cfg.onTurn != nil {
					cfg.onTurn(r)
				}
				br.turns.Add(1)
				if r.Outcome == runner.OutcomeBusy {
					br.busy.Add(1)
				}
				if r.Holder != "" && r.Consumed == 0 && len(r.Runs) == 0 {
					br.idle.Add(1)
				}
				// The turn's calls are over. A turn a named wake-up
				// started makes no look at its end, so Run asks for no
				// new poll: its turn's end is when it waits again.
				p.waiting.Store(true)
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = r.Run(ctx)
		}()
	}
	var stopped sync.Once
	br.stores = stores
	br.stop = func() {
		stopped.Do(func() {
			cancel()
			wg.Wait()
			for _, s := range stores {
				s.Close()
			}
			poster.Close()
		})
	}
	br.awaitIdle(b, nil)
	return br
}

// settle waits until the runners' Wakeups listeners have read one
// another, their views have settled (Wakeups' share: each has read all
// of them three times, about three shareEvery after the last came), and
// each LISTENs on its own shards.
func (br *benchRunners) settle(b *testing.B) {
	b.Helper()
	awaitListening(b, len(br.shares), br.shares...)
}

// counted passes wake on, counting what it passes in br.wakes.
func (br *benchRunners) counted(wake <-chan core.ThreadID) <-chan core.ThreadID {
	out := make(chan core.ThreadID)
	go func() {
		defer close(out)
		for id := range wake {
			br.wakes.Add(1)
			out <- id
		}
	}()
	return out
}

// awaitIdle waits until every runner waits for its next poll or has ended
// its last turn (probe's waiting), and, when
// since is given, some runner has looked for work since since's counts of
// their transactions (a wake-up reaches one runner: Wakeups' share).
func (br *benchRunners) awaitIdle(b *testing.B, since []int64) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		idle, looked := true, since == nil
		for i, p := range br.probes {
			if !p.waiting.Load() {
				idle = false
			}
			if since != nil && p.updates.Load() > since[i] {
				looked = true
			}
		}
		if idle && looked {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the runners did not go idle within a minute")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// consumed checks, off the clock, that every posted message was consumed
// exactly as far as posted (taken == last on every thread) and returns the
// sum of the taken cursors.
func (br *benchRunners) consumed(b *testing.B) int64 {
	b.Helper()
	conn := admin(b)
	t := pgx.Identifier{br.schema}.Sanitize()
	var behind, sum int64
	err := conn.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE taken <> (SELECT count(*) FROM `+t+`.events e WHERE e.thread_id = th.id AND e.kind = $1)),
		coalesce(sum(taken), 0)
		FROM `+t+`.threads th`, string(core.MessagePosted)).Scan(&behind, &sum)
	if err != nil {
		b.Fatal(err)
	}
	if behind != 0 {
		b.Fatalf("%d threads have taken != last", behind)
	}
	return sum
}

// BenchmarkRunnerThroughput runs 4 runner processes over 100 threads and
// posts b.N messages round-robin over the threads (from 16 posters at
// once: with 4, posting took 99% of the measured time); it measures from
// the first post until every message is consumed, and reports messages/s,
// the share of that time the posting took (posting-%: near 100, the
// posters bound the figure), and per consumed message the round trips
// and transactions the runners' Stores made, their polls and turns
// (reportPerMessage). ClaimTTL 2s; runners wake on LISTEN/NOTIFY and
// poll every 50ms. The Stores read as readModes say: reads=locking is
// every transaction as it was before writes were sent in one round trip
// (and reads committed in one), for a ratio measured in the same run.
//
// posted=before drains instead: the b.N messages are posted before the
// runners start, and the time is from their start until every message is
// consumed, so that the posters do not bound the figure (posted=during
// runs at posting-% near 100 on this machine); posts/s is the posters'
// rate then, alone on the server. trips=synced (reads=speculative only)
// commits each write of a shared round trip on its own, behind a Sync of
// its own, as before the writes shared a transaction: a before in the
// same run.
func BenchmarkRunnerThroughput(b *testing.B) {
	for _, m := range readModes {
		for _, before := range []bool{false, true} {
			name := m.name + "/posted=during"
			if before {
				name = m.name + "/posted=before"
			}
			b.Run(name, func(b *testing.B) { benchThroughput(b, throughputCase{opts: m.opts, before: before, posters: 16}) })
			if !m.opts.LockingReads {
				b.Run(name+"/trips=synced", func(b *testing.B) {
					benchThroughput(b, throughputCase{opts: m.opts, before: before, posters: 16, tripsSynced: true})
				})
			}
		}
	}
}

// postAll posts n messages round-robin over the threads from posters
// goroutines at once.
func postAll(b *testing.B, br *benchRunners, n, posters int) {
	ctx := context.Background()
	errs := make(chan error, posters)
	for p := range posters {
		go func() {
			for i := p; i < n; i += posters {
				if _, err := br.poster.Post(ctx, br.threads[i%len(br.threads)], "m"); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range posters {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// throughputCase is one run of benchThroughput.
type throughputCase struct {
	opts                                       Options
	before                                     bool
	posters                                    int
	readPost, wakeAll, tripsAlone, claimBegins bool // runnerSetup's
	tripsSynced                                bool // runnerSetup's
}

func benchThroughput(b *testing.B, c throughputCase) {
	const runners, threads = 4, 100
	opts, before, posters := c.opts, c.before, c.posters
	var started atomic.Int64
	n := int64(b.N)
	all := make(chan struct{})
	var (
		once   sync.Once
		doneAt time.Time // the last run's start, written before all closes
	)
	setup := runnerSetup{
		runners: runners, threads: threads, opts: opts,
		claimTTL: 2 * time.Second, pollEvery: 50 * time.Millisecond, wake: true,
		readPost: c.readPost, wakeAll: c.wakeAll, tripsAlone: c.tripsAlone, claimBegins: c.claimBegins, tripsSynced: c.tripsSynced,
		agent: func(int) runner.Agent {
			return runner.AgentFunc(func(context.Context, *runner.Session) error {
				if started.Add(1) == n {
					once.Do(func() { doneAt = time.Now(); close(all) })
				}
				return nil
			})
		},
	}
	var postRate float64 // posted=before: the posters' rate, alone on the server
	if before {
		setup.before = func(br *benchRunners) {
			t0 := time.Now()
			postAll(b, br, b.N, posters)
			postRate = float64(b.N) / time.Since(t0).Seconds()
		}
	}
	b.ResetTimer()
	br := startRunners(b, setup)
	defer br.stop()
	// posted=before: the runners' counts start at zero; the poster's
	// round trips are not counted.
	base := [11]int64{3: br.posterS.stats.roundTrips.Load()}
	start := br.started
	if !before {
		br.settle(b)
		b.ResetTimer()
		base = br.counts()
		start = time.Now()
		postAll(b, br, b.N, posters)
	}
	posted := time.Since(start)
	if before {
		posted = 0
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d messages consumed after 5 minutes", started.Load(), b.N)
	}
	elapsed := doneAt.Sub(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	// How much of the time the posts took: near 100%, the posters bound
	// the figure, not the runners.
	b.ReportMetric(100*posted.Seconds()/elapsed.Seconds(), "posting-%")
	if before {
		b.ReportMetric(postRate, "posts/s")
	}
	br.reportPerMessage(b, b.N, base)
	br.stop()
	if got := br.consumed(b); got != n || started.Load() != n {
		b.Fatalf("posted %d, taken sums to %d, runs started %d", n, got, started.Load())
	}
}

// BenchmarkRunnerLatency measures post-to-start latency: with every
// runner idle and waiting, one message is posted (round-robin over the
// threads) and the time from Post's return to the agent's call (the run's
// start is committed then) is taken; p50 and p99 are reported in µs.
//
//	wake=notify  Wake from Wakeups (LISTEN/NOTIFY); polling every hour, so
//	             every start is a wake-up's
//	wake=poll    Wake nil, PollEvery 50ms; each post is made at a
//	             different moment of the poll period (evenly spread)
//
// A runner looks at every thread when it wakes (runner.Run ignores which
// thread a wake-up names), so the latency grows with the threads before
// the posted one: threads=1 shows the floor, threads=100 a workspace.
func BenchmarkRunnerLatency(b *testing.B) {
	for _, wake := range []string{"notify", "poll"} {
		for _, threads := range []int{1, 100} {
			for _, runners := range []int{1, 4} {
				b.Run(fmt.Sprintf("wake=%s/threads=%d/runners=%d", wake, threads, runners), func(b *testing.B) {
					benchLatency(b, wake == "notify", threads, runners)
				})
			}
		}
	}
}

func benchLatency(b *testing.B, wake bool, threads, runners int) {
	poll := 50 * time.Millisecond
	if wake {
		poll = time.Hour
	}
	startedAt := make(chan time.Time, 16)
	br := startRunners(b, runnerSetup{
		runners: runners, threads: threads,
		claimTTL: 2 * time.Second, pollEvery: poll, wake: wake,
		agent: func(int) runner.Agent {
			return runner.AgentFunc(func(context.Context, *runner.Session) error {
				startedAt <- time.Now()
				return nil
			})
		},
	})
	defer br.stop()
	br.settle(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	since := make([]int64, runners)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		br.awaitIdle(b, nil)
		if !wake {
			// A person posts at any moment of a runner's poll period, not
			// just as it starts waiting: spread the posts evenly over it.
			time.Sleep(time.Duration(float64(poll) * math.Mod(float64(i)*0.618034, 1)))
		}
		for j, p := range br.probes {
			since[j] = p.updates.Load()
		}
		b.StartTimer()
		if _, err := br.poster.Post(ctx, br.threads[i%threads], "m"); err != nil {
			b.Fatal(err)
		}
		posted := time.Now()
		var at time.Time
		select {
		case at = <-startedAt:
		case <-time.After(time.Minute):
			b.Fatal("no run started within a minute of the post")
		}
		// The start can be committed before Post's caller sees its reply.
		lat = append(lat, max(at.Sub(posted), 0))
		b.StopTimer()
		if wake {
			br.awaitIdle(b, since) // the woken runner looked, and every runner waits again
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	br.stop()
	if got := br.consumed(b); got != int64(b.N) {
		b.Fatalf("posted %d, taken sums to %d", b.N, got)
	}
}

// BenchmarkRunnerLevers measures issue 25's levers before and after, in
// one run, alternated with -count: BenchmarkRunnerThroughput's
// posted=during with 4 and 16 posters, each with
//
//	lever=none             a post reads the thread first (two round trips),
//	                       wakes every runner, and each runner write goes
//	                       alone: the code before the levers
//	lever=post             a post is one statement (PostMessage)
//	lever=post+wake        and wakes one runner (Wakeups' share)
//	lever=post+wake+trips  and the writes ready at once go in one round
//	                       trip (trips.go)
//	lever=post+wake+trips+claim
//	                       and a Claim is one round trip, its
//	                       transaction's only one (ClaimLease)
//
// and posted=before (the drain) with and without the share, the trips
// and the one-trip Claim. Every lever before claim is measured with
// Claims of two round trips, as they were then.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench RunnerLevers -benchtime 10000x -count 3
func BenchmarkRunnerLevers(b *testing.B) {
	speculative := readModes[0].opts
	for _, posters := range []int{4, 16} {
		for _, l := range []struct {
			name                                       string
			readPost, wakeAll, tripsAlone, claimBegins bool
		}{{"none", true, true, true, true}, {"post", false, true, true, true}, {"post+wake", false, false, true, true},
			{"post+wake+trips", false, false, false, true}, {"post+wake+trips+claim", false, false, false, false}} {
			b.Run(fmt.Sprintf("posted=during/posters=%d/lever=%s", posters, l.name), func(b *testing.B) {
				benchThroughput(b, throughputCase{opts: speculative, posters: posters, readPost: l.readPost, wakeAll: l.wakeAll,
					tripsAlone: l.tripsAlone, claimBegins: l.claimBegins})
			})
		}
	}
	for _, l := range []struct {
		name                             string
		wakeAll, tripsAlone, claimBegins bool
	}{{"none", true, true, true}, {"wake", false, true, true}, {"wake+trips", false, false, true}, {"wake+trips+claim", false, false, false}} {
		b.Run("posted=before/lever="+l.name, func(b *testing.B) {
			benchThroughput(b, throughputCase{opts: speculative, before: true, posters: 16, wakeAll: l.wakeAll, tripsAlone: l.tripsAlone,
				claimBegins: l.claimBegins})
		})
	}
}

// polls counts the runners' looks for work (PendingThreads) so far.
func (br *benchRunners) polls() int64 {
	var n int64
	for _, p := range br.probes {
		n += p.polls.Load()
	}
	return n
}
