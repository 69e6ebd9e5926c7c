package bench

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkCompare runs each workload on River (with its defaults, and
// with a FetchCooldown of 1ms) and on this project's runner (with its
// defaults, and with 16 turns a runner), one after the other, on the
// server DATABASE_URL names (run it under scripts/with-postgres; go
// test's -count repeats each one in a row, so alternate by running go
// test again, as BENCH.md's command does). b.N
// is not used: each workload has its own size (run with -benchtime 1x).
//
//	drain       20,000 messages posted (by 16 posters) before the
//	            workers start; timed from their start to the last start
//	posters=4   10,000 messages posted by 4 posters while the workers
//	posters=16  run (16 posters); timed from the first post to the last
//	            start
//	rate=250    10 seconds of messages posted on a fixed schedule, 250,
//	rate=700    700 or 2,000 a second, while the workers run (open loop:
//	rate=2000   16 posters take the schedule's posts in turn, so that a
//	            slow post does not hold the next back); after a warm-up
//	            of one message a thread (River: 100 jobs), posted and
//	            started untimed, as the project's
//	            BenchmarkRunnerLoadedLatency does. 2,000 is half of what
//	            River starts here while 16 posters post, and a little
//	            under half of what this project's runners start
//	            (3,866-3,983 and 4,842-5,085 a second, 5 Dec 2026):
//	            issue 25's target 3 is the post-to-start p99 at half of
//	            saturation
//
// It reports msgs/s; post-to-start p50 and p99 (ms: from the post's
// return to the worker's call); per message, the server's transactions
// (pg_stat_database, every process's: the posters' included while
// posting, not when draining), River's round trips (its pools' queries
// and batches, counted by a pgx tracer, over the same span as the CPU:
// this project's are BenchmarkRunnerThroughput's roundtrips/msg, since
// its Store takes a URL, not a pool), the client's CPU (this process: posters
// and workers) and the server's CPU (every PostgreSQL process);
// sessions, the connections the server took in the timed span (the
// posters' too while posting); posting-%, the share of the time the
// posters were posting (near 100: the posters bound the figure); and
// slow-threads, how many of the 100 threads the slowest 1% of the
// messages were posted to (slowThreads). The drain reports instead how
// its time went: first-1%-ms, first-10%-ms and last-10%-ms
// (reportPhases).
// A rate= workload reports late-% in posting-%'s place: the share of
// posts sent over 5ms behind the schedule (near 0:
// the rate is the one offered), and gc/s, the cycles this process's
// garbage collector (River's and this project's alike) completed a second
// while the posts went out. Every workload but the drain reports when
// the slowest 1% were posted (tailWhen): tail-at-s, their median post
// time from the first timed post, and tail-span-s, the span of the middle
// 90% of those times: short for a stall or the workers' start, near the
// run's length (10 s at a steady rate) for a tail spread over it; and
// p99-after-1s-ms, the p99 of the messages posted a second or more after
// the first timed post (afterFirst), which leaves out the workers' start
// where posters=4 and posters=16 time it; and fifo-p99-ms, the p99 had
// the workers started the messages in the order they were posted, at the
// instants they started them (inPostOrder): the p99 their rate makes in
// that order. With -statements, each
// workload also logs its costliest statements on the server, per message
// (statementsReport). With -rate N, a steady-rate workload of N messages
// a second (ten seconds of them, as the others) runs after rate=2000: to
// compare the two sides at the rate one of them posts at.
func BenchmarkCompare(b *testing.B) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		b.Fatal("DATABASE_URL is not set: run under scripts/with-postgres")
	}
	workloads := []workload{
		{name: "drain", n: 20000, posters: 16, before: true},
		{name: "posters=4", n: 10000, posters: 4},
		{name: "posters=16", n: 10000, posters: 16},
		{name: "rate=250", n: 2500, posters: 16, rate: 250},
		{name: "rate=700", n: 7000, posters: 16, rate: 700},
		{name: "rate=2000", n: 20000, posters: 16, rate: 2000},
	}
	switch r := *extraRate; {
	case r == 0:
	case r < 0:
		b.Fatalf("-rate %d: a rate is a number of messages a second, 1 or more", r)
	case slices.ContainsFunc(workloads, func(w workload) bool { return w.rate == r }):
		b.Fatalf("-rate %d: rate=%d runs already", r, r)
	default:
		workloads = append(workloads, workload{name: "rate=" + strconv.Itoa(r), n: 10 * r, posters: 16, rate: r})
	}
	for _, w := range workloads {
		for _, sys := range []func() system{newRiver, newRiverFast, newThreadclaim, newThreadclaimTurns16} {
			s := sys()
			b.Run(w.name+"/"+s.name(), func(b *testing.B) { measure(b, url, s, w) })
		}
	}
}

// extraRate is -rate: a steady-rate workload of its own, when not 0.
var extraRate = flag.Int("rate", 0, "add a workload rate=N: ten seconds of N messages a second, after rate=2000")

type workload struct {
	name    string
	n       int
	posters int
	before  bool // drain: every message posted before the workers start
	// rate, when set, is how many messages a second the posters post, on
	// a fixed schedule, after a warm-up of one message a thread.
	rate int
}

// lateBy is how far behind its schedule a post of a rate= workload may be
// sent and still count as on time.
const lateBy = 5 * time.Millisecond

// system is River or this project's runner, each set up afresh for one
// workload.
type system interface {
	name() string
	// setup makes the tables (or clears them) and opens the posters'
	// connection.
	setup(ctx context.Context, url string) error
	post(ctx context.Context, i int) error
	// donePosting closes the posters' connection.
	donePosting()
	// start starts the 4 workers; each calls started with the message's
	// text as it starts it.
	start(ctx context.Context, url string, started func(text string)) error
	// stop stops the workers, closes their connections and drops what
	// setup made.
	stop(ctx context.Context, url string)
}

const (
	workers = 4
	threads = 100
)

// slowThreads returns how many threads the slowest 1% of the messages
// (at least one) were posted to: lat[i] is message first+i's
// post-to-start time, and message m goes to thread m % threads (the
// posters go round-robin; River's jobs are grouped the same way). A
// queue that starts messages in the order they came spreads its slowest
// over the threads posted to last; a runner whose threads wait for a
// turn slot has them on the few threads that waited longest.
func slowThreads(lat []time.Duration, first int) int {
	seen := map[int]bool{}
	for _, i := range slowest(lat) {
		seen[(first+i)%threads] = true
	}
	return len(seen)
}

// slowest returns the indices of the slowest 1% of the messages (lat,
// each one's post-to-start), slowest first; at least one, when there are
// any.
func slowest(lat []time.Duration) []int {
	idx := make([]int, len(lat))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(lat[b], lat[a]) })
	return idx[:max(len(idx)/100, min(len(idx), 1))]
}

// reportLatency reports the post-to-start of the timed messages (posted
// and started, the first of them message first): its p50 and p99, the
// threads of the slowest 1%, and when those were posted; and
// p99-after-1s-ms, the p99 of the messages posted a second or more after
// the first (afterFirst).
func reportLatency(b *testing.B, posted, started []time.Time, first int) {
	lat := make([]time.Duration, len(posted))
	for i := range lat {
		lat[i] = max(started[i].Sub(posted[i]), 0)
	}
	b.ReportMetric(float64(slowThreads(lat, first)), "slow-threads")
	at, span := tailWhen(lat, posted)
	b.ReportMetric(at.Seconds(), "tail-at-s")
	b.ReportMetric(span.Seconds(), "tail-span-s")
	if late := afterFirst(lat, posted, time.Second); len(late) >= minAfterFirst {
		slices.Sort(late)
		b.ReportMetric(float64(late[len(late)*99/100].Microseconds())/1000, "p99-after-1s-ms")
	}
	fifo := inPostOrder(posted, started)
	slices.Sort(fifo)
	b.ReportMetric(float64(fifo[len(fifo)*99/100].Microseconds())/1000, "fifo-p99-ms")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// inPostOrder returns the post-to-start times the messages would have
// had if the workers had started them in the order they were posted, at
// the instants they did start them: the k-th post with the k-th start,
// each list in time order. Every message starts after its post, so the
// k-th start is no earlier than the k-th post (but for the clock's
// readings, which put a post's return after its start at times: those
// count 0, as reportLatency's do). Its p99 (fifo-p99-ms) is that of a
// queue that starts messages in the order they came, at the workers'
// start rate: the p99 above it is the order they took the messages in
// (for the runner, which thread waits for a turn slot). It bounds what
// serving the oldest message first could do at that rate, not every order
// (one that starved a hundredth of the messages could do better at p99).
func inPostOrder(posted, started []time.Time) []time.Duration {
	p, s := slices.Clone(posted), slices.Clone(started)
	slices.SortFunc(p, time.Time.Compare)
	slices.SortFunc(s, time.Time.Compare)
	out := make([]time.Duration, len(p))
	for k := range out {
		out[k] = max(s[k].Sub(p[k]), 0)
	}
	return out
}

// afterFirst returns the post-to-start times (lat) of the messages posted
// d or more after the first (posted, their post times). When the posters
// start with the workers, as posters=4 and posters=16 do, the workers'
// start (connections, first statements, a cold cache, the wake-up share
// settling) falls on the first messages; those posted later show how
// the workers keep up once started.
func afterFirst(lat []time.Duration, posted []time.Time, d time.Duration) []time.Duration {
	var out []time.Duration
	for i, l := range lat {
		if posted[i].Sub(posted[0]) >= d {
			out = append(out, l)
		}
	}
	return out
}

// minAfterFirst is the fewest messages afterFirst must return for
// p99-after-1s-ms to be reported: a p99 of fewer says little.
const minAfterFirst = 1000

// reportPhases reports how a drain's time went (started: each message's
// start; t0: the workers' start): first-1%-ms and first-10%-ms, from t0
// to the start of the 1st and the 10th percentile of the messages, and
// last-10%-ms, from the 90th percentile's start to the last. The start
// pays for the workers' connections and first statements; the end, for
// whatever runs while most of the workers have nothing left.
func reportPhases(b *testing.B, t0 time.Time, started []time.Time) {
	at := slices.Clone(started)
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	n := len(at)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(at[n/100].Sub(t0)), "first-1%-ms")
	b.ReportMetric(ms(at[n/10].Sub(t0)), "first-10%-ms")
	b.ReportMetric(ms(at[n-1].Sub(at[n*9/10])), "last-10%-ms")
}

// tailWhen returns when the slowest 1% of the messages (lat, each
// message's post-to-start) were posted, as offsets from the first post
// (posted, the same messages' post times): the median offset (at), and
// the span from the 5th to the 95th percentile of the offsets (span). A
// stall of the host, the server or the workers makes a short span; a
// tail spread over the run, a span near the run's length.
func tailWhen(lat []time.Duration, posted []time.Time) (at, span time.Duration) {
	idx := slowest(lat)
	offs := make([]time.Duration, len(idx))
	for k, i := range idx {
		offs[k] = posted[i].Sub(posted[0])
	}
	slices.Sort(offs)
	n := len(offs)
	if n == 0 {
		return 0, 0
	}
	return offs[n/2], offs[n*95/100] - offs[n*5/100]
}

func measure(b *testing.B, url string, s system, w workload) {
	ctx := context.Background()
	if err := s.setup(ctx, url); err != nil {
		b.Fatal(err)
	}
	postedAt := make([]time.Time, w.n)
	startedAt := make([]time.Time, w.n)
	var nStarted atomic.Int64
	all := make(chan struct{})
	var lastStart time.Time
	started := func(text string) {
		i, err := strconv.Atoi(text)
		if err != nil || i < 0 || i >= w.n || !startedAt[i].IsZero() {
			panic(fmt.Sprintf("a start of message %q: unknown, or started twice", text))
		}
		now := time.Now()
		startedAt[i] = now
		if nStarted.Add(1) == int64(w.n) {
			lastStart = now
			close(all)
		}
	}
	post := func(from, to, rate int) (time.Duration, int64) {
		return postRange(ctx, b, s, w.posters, postedAt, from, to, rate)
	}
	if w.before {
		post(0, w.n, 0)
		s.donePosting()
	}
	counted, _ := s.(interface{ roundTrips() int64 })
	srv := newServer(b, url)
	var (
		trips0, xacts0, sessions0 int64
		cpu0, scpu0               time.Duration
		t0                        time.Time
		warm                      int // the messages of the warm-up, not timed
		posting                   time.Duration
		late                      int64
	)
	begin := func() {
		if counted != nil {
			trips0 = counted.roundTrips()
		}
		xacts0, sessions0 = srv.xacts(b)
		srv.statementsReset(ctx, b)
		cpu0, scpu0 = clientCPU(), srv.cpu(b)
		t0 = time.Now()
	}
	if w.rate > 0 {
		if err := s.start(ctx, url, started); err != nil {
			b.Fatal(err)
		}
		warm = threads
		post(0, warm, 0)
		deadline := time.Now().Add(time.Minute)
		for nStarted.Load() < int64(warm) {
			if time.Now().After(deadline) {
				b.Fatalf("warm-up: %d of %d messages started after a minute", nStarted.Load(), warm)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(1100 * time.Millisecond) // live backends' statistics flushed (at most every second)
		begin()
		gc0 := gcCycles()
		posting, late = post(warm, w.n, w.rate)
		defer b.ReportMetric(float64(gcCycles()-gc0)/posting.Seconds(), "gc/s") // its arguments now
	} else {
		time.Sleep(300 * time.Millisecond) // closed connections' statistics flushed
		begin()
		if err := s.start(ctx, url, started); err != nil {
			b.Fatal(err)
		}
		if !w.before {
			t0 = time.Now()
			posting, _ = post(0, w.n, 0)
		}
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d messages started after 5 minutes", nStarted.Load(), w.n)
	}
	cpu, scpu := clientCPU()-cpu0, srv.cpu(b)-scpu0
	srv.statementsReport(ctx, b, w.n-warm)
	var trips int64
	if counted != nil {
		trips = counted.roundTrips() - trips0
	}
	elapsed := lastStart.Sub(t0)
	if !w.before {
		s.donePosting()
	}
	s.stop(ctx, url)
	time.Sleep(300 * time.Millisecond)
	xacts, sessions := srv.xacts(b)
	xacts -= xacts0
	srv.close()

	n := float64(w.n - warm)
	b.ReportMetric(n/elapsed.Seconds(), "msgs/s")
	if !w.before {
		reportLatency(b, postedAt[warm:], startedAt[warm:], warm)
		if w.rate > 0 {
			b.ReportMetric(100*float64(late)/n, "late-%")
		} else {
			b.ReportMetric(100*posting.Seconds()/elapsed.Seconds(), "posting-%")
		}
	}
	b.ReportMetric(float64(xacts)/n, "xacts/msg")
	b.ReportMetric(float64(sessions-sessions0), "sessions")
	if w.before {
		reportPhases(b, t0, startedAt)
	}
	if counted != nil {
		b.ReportMetric(float64(trips)/n, "roundtrips/msg")
	}
	b.ReportMetric(float64(cpu.Microseconds())/n, "client-cpu-µs/msg")
	b.ReportMetric(float64(scpu.Microseconds())/n, "server-cpu-µs/msg")
	b.ReportMetric(0, "ns/op") // b.N is not what is timed
}

// postRange posts messages [from, to) with posters posters: each poster
// its share in turn, or, at rate a second, each message on its own
// schedule, taken in turn by whichever poster is free. It records each
// post's return in postedAt, and returns how long it took and how many
// posts went out over lateBy behind their schedule.
func postRange(ctx context.Context, b *testing.B, s system, posters int, postedAt []time.Time, from, to, rate int) (time.Duration, int64) {
	t0 := time.Now()
	var next, late atomic.Int64
	next.Store(int64(from))
	take := func(p, k int) int { return from + p + k*posters }
	if rate > 0 {
		take = func(int, int) int { return int(next.Add(1) - 1) }
	}
	errs := make(chan error, posters)
	for p := range posters {
		go func() {
			for k := 0; ; k++ {
				i := take(p, k)
				if i >= to {
					errs <- nil
					return
				}
				if rate > 0 {
					due := t0.Add(time.Duration(i-from) * time.Second / time.Duration(rate))
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					} else if -d > lateBy {
						late.Add(1)
					}
				}
				if err := s.post(ctx, i); err != nil {
					errs <- err
					return
				}
				postedAt[i] = time.Now()
			}
		}()
	}
	for range posters {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0), late.Load()
}

// gcCycles returns how many cycles the garbage collector has completed.
func gcCycles() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumGC
}

func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// server reads the server's counters: its transactions, and the CPU its
// processes used (read from /proc: the server must run on this machine).
type server struct {
	conn       *pgx.Conn
	postmaster int
}

func newServer(b *testing.B, url string) *server {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	pp, err := procField(pid, "PPid:")
	if err != nil {
		b.Fatalf("the server's processes (is it on this machine?): %v", err)
	}
	return &server{conn: conn, postmaster: pp}
}

func (s *server) close() { _ = s.conn.Close(context.Background()) }

// xacts is the server's transactions committed and rolled back, and the
// sessions (connections) it has had, in every database, as its
// statistics have them: a backend reports its own when it ends, and
// while it runs at most once a second (once idle, about ten seconds
// later), so read them once the connections of interest have closed.
func (s *server) xacts(b *testing.B) (xacts, sessions int64) {
	if err := s.conn.QueryRow(context.Background(), `SELECT sum(xact_commit + xact_rollback)::bigint, sum(sessions)::bigint FROM pg_stat_database`).Scan(&xacts, &sessions); err != nil {
		b.Fatal(err)
	}
	return xacts, sessions
}

// cpu is the CPU time of the postmaster, of its children that exited (it
// waited for them) and of those running.
func (s *server) cpu(b *testing.B) time.Duration {
	total, err := procCPU(s.postmaster, true)
	if err != nil {
		b.Fatal(err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, err := procField(pid, "PPid:"); err == nil && pp == s.postmaster {
			t, _ := procCPU(pid, false)
			total += t
		}
	}
	return total
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times (100 on Linux).
const clockTick = 100

// procCPU is a process's user and system time, with its waited-for
// children's when children is set.
func procCPU(pid int, children bool) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's closing parenthesis: state is the
	// first; utime, stime, cutime and cstime are fields 14-17 of the line.
	i := bytes.LastIndexByte(raw, ')')
	var f [20]int64
	var state string
	if _, err := fmt.Sscan(string(raw[i+1:]), &state, &f[4], &f[5], &f[6], &f[7], &f[8], &f[9], &f[10], &f[11], &f[12], &f[13], &f[14], &f[15], &f[16], &f[17]); err != nil {
		return 0, err
	}
	ticks := f[14] + f[15]
	if children {
		ticks += f[16] + f[17]
	}
	return time.Duration(ticks) * time.Second / clockTick, nil
}

func procField(pid int, name string) (int, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		var v int
		if n, _ := fmt.Sscanf(line, name+"\t%d", &v); n == 1 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, name)
}
