package runner_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// frozen is one runner process's way to storage; once frozen, every call
// blocks until the benchmark ends: the process was killed (SIGKILL), its
// leases stay until they expire.
type frozen struct {
	*memory.Store
	stop chan struct{} // closed: frozen
	end  chan struct{} // closed: the benchmark is over
	once sync.Once
}

var errKilled = errors.New("killed")

func (f *frozen) gate(ctx context.Context) error {
	select {
	case <-f.stop:
		select {
		case <-f.end:
		case <-ctx.Done():
		}
		return errKilled
	default:
		return nil
	}
}

func (f *frozen) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if err := f.gate(ctx); err != nil {
		return err
	}
	return f.Store.Update(ctx, fn)
}

func (f *frozen) PendingThreads(ctx context.Context) ([]core.PendingThread, error) {
	if err := f.gate(ctx); err != nil {
		return nil, err
	}
	return f.Store.PendingThreads(ctx)
}

// claims records when each thread was claimed, by the survivors.
type claims struct {
	mu    sync.Mutex
	after time.Time
	at    map[core.ThreadID]time.Time
}

func (c *claims) Trace(ev core.TraceEvent) {
	if ev.Action != core.ActionClaim {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.after.IsZero() && c.at[ev.Thread].IsZero() {
		c.at[ev.Thread] = time.Now()
	}
}

// handoverCase is a fleet shape: how each runner takes its turns, over
// how many threads, each run taking how long.
type handoverCase struct {
	name       string
	concurrent int
	maxTurn    time.Duration
	takeovers  int // Config.TakeoverTurns; -1: none
	threads    int
	run        time.Duration
}

const (
	handoverTTL  = 200 * time.Millisecond
	handoverPoll = 20 * time.Millisecond
	handoverCap  = 3 * time.Second // a handover not seen by then counts as this
)

// BenchmarkHandover measures, on memory storage under load, how long a
// thread whose runner was killed waits before another runner claims it:
// 4 runners over 32 threads, a message posted every millisecond, each
// run taking 20 ms (more work than the fleet can do: every runner stays
// busy); one runner is frozen mid-work (its storage calls never
// return: SIGKILL) and the time from the kill to each of its threads'
// next Claim is taken. The bound to compare with is ClaimTTL + PollEvery
// (220 ms). "serial" is the runner before bounded turns (one turn at a
// time, a turn goes on while its thread has messages, no takeover slot);
// "bounded" is the default shape (4 turns at once, each at most ClaimTTL
// long, one takeover slot); "bounded-short" bounds turns to ClaimTTL/4;
// "wide" allows 16 turns at once, more than the threads a runner ever has
// work on here, so a runner always has a free slot. "saturated" has
// every slot taken all the time by runs longer than the TTL (600 ms, an
// agent waiting on a model), over 200 threads, so that no turn ends for
// a while after the kill. The "-no-takeover" cases switch the takeover slot off
// (TakeoverTurns -1): a dead runner's thread waits for a free slot, as
// before takeover slots.
//
//	go test ./runner -run '^$' -bench Handover -benchtime 10x
func BenchmarkHandover(b *testing.B) {
	const n, run = 32, 20 * time.Millisecond
	for _, c := range []handoverCase{
		{"serial", 1, time.Hour, -1, n, run},
		{"bounded", runner.DefaultMaxConcurrentTurns, handoverTTL, 0, n, run},
		{"bounded-no-takeover", runner.DefaultMaxConcurrentTurns, handoverTTL, -1, n, run},
		{"bounded-short", runner.DefaultMaxConcurrentTurns, handoverTTL / 4, 0, n, run},
		{"wide", 16, handoverTTL, 0, n, run},
		{"saturated", runner.DefaultMaxConcurrentTurns, handoverTTL, 0, 200, 3 * handoverTTL},
		{"saturated-no-takeover", runner.DefaultMaxConcurrentTurns, handoverTTL, -1, 200, 3 * handoverTTL},
	} {
		b.Run(c.name, func(b *testing.B) {
			var all []time.Duration
			for range b.N {
				all = append(all, handover(b, c)...)
			}
			slices.Sort(all)
			if len(all) == 0 {
				b.Skip("the victim held no thread at any kill")
			}
			pct := func(p float64) float64 {
				return float64(all[int(p*float64(len(all)-1))]) / float64(time.Millisecond)
			}
			b.ReportMetric(pct(0.5), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(len(all))/float64(b.N), "threads/kill")
			b.ReportMetric(float64(handoverTTL+handoverPoll)/float64(time.Millisecond), "bound-ms")
		})
	}
}

// handover runs one fleet, kills one runner, and returns how long each of
// the threads it held waited for another runner's claim.
func handover(b *testing.B, c handoverCase) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := memory.New()
	poster := core.NewWorkspace(s, core.SystemClock{})
	threads := c.threads
	var ids []core.ThreadID
	for i := range threads {
		id := core.ThreadID(fmt.Sprintf("t%03d", i))
		if err := poster.CreateThread(ctx, id); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	seen := &claims{at: map[core.ThreadID]time.Time{}}
	end := make(chan struct{})
	var victim *frozen
	var wg sync.WaitGroup
	for i := range 4 {
		f := &frozen{Store: s, stop: make(chan struct{}), end: end}
		opts := []core.Option{core.WithProcess(fmt.Sprintf("r%d", i))}
		prefix := "s"
		if i == 0 {
			victim, prefix = f, "v"
		} else {
			opts = append(opts, core.WithTracer(seen))
		}
		n := 0
		var mu sync.Mutex
		r, err := runner.New(runner.Config{
			Workspace: core.NewWorkspace(f, core.SystemClock{}, opts...),
			Agent: runner.AgentFunc(func(ctx context.Context, _ *runner.Session) error {
				select {
				case <-time.After(c.run):
				case <-ctx.Done():
				}
				return nil
			}),
			ClaimTTL:           handoverTTL,
			PollEvery:          handoverPoll,
			MaxConcurrentTurns: c.concurrent,
			MaxTurnDuration:    c.maxTurn,
			TakeoverTurns:      c.takeovers,
			ShutdownGrace:      handoverTTL,
			NewHolder: func() (core.Holder, error) {
				mu.Lock()
				defer mu.Unlock()
				n++
				return core.Holder(fmt.Sprintf("%s%d-%d", prefix, i, n)), nil
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	wg.Add(1)
	go func() { // the load: a message a millisecond, round robin
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = poster.Post(ctx, ids[i%threads], "m")
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond) // warm up: every runner busy
	// With more slots than work ("wide"), the others can hold every thread
	// for a while: kill the victim when it holds one.
	for wait := time.Now().Add(handoverCap); len(victimThreads(b, poster, ids)) == 0; {
		if time.Now().After(wait) {
			b.Fatalf("the victim held no thread in the %v after the warm-up", handoverCap)
		}
		time.Sleep(time.Millisecond)
	}

	// Kill the victim, then list the threads whose lease it holds.
	seen.mu.Lock()
	killed := time.Now()
	close(victim.stop)
	seen.after = killed
	seen.mu.Unlock()
	held := victimThreads(b, poster, ids)
	deadline := killed.Add(handoverCap)
	var out []time.Duration
	for _, id := range held {
		for {
			seen.mu.Lock()
			at := seen.at[id]
			seen.mu.Unlock()
			if !at.IsZero() {
				out = append(out, at.Sub(killed))
				break
			}
			if time.Now().After(deadline) {
				out = append(out, handoverCap)
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	close(end)
	wg.Wait()
	return out
}

// victimThreads lists the threads of ids whose lease the victim (holders
// "v...") holds.
func victimThreads(b *testing.B, poster *core.Workspace, ids []core.ThreadID) []core.ThreadID {
	b.Helper()
	var held []core.ThreadID
	for _, id := range ids {
		l, err := poster.Lease(context.Background(), id)
		if err != nil {
			b.Fatal(err)
		}
		if strings.HasPrefix(string(l.Holder), "v") {
			held = append(held, id)
		}
	}
	return held
}

// deadThread makes thread id on s as a runner process that died would
// leave it: claimed by D at epoch (its lease expires at epoch+ttl), its
// first message's run active, a second message waiting.
func deadThread(t *testing.T, s core.Storage, id core.ThreadID) {
	t.Helper()
	ctx := context.Background()
	d := newProc(t, s, "D", procOpts{})
	newThread(t, d.ws, id, "m1", "m2")
	c, err := d.ws.Claim(ctx, id, "dead", ttl)
	require.NoError(t, err)
	p, err := d.ws.Plan(ctx, c)
	require.NoError(t, err)
	require.Equal(t, core.PlanRun, p.Kind)
	_, err = d.ws.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
}

// takenOverSaturated runs a runner whose every turn slot is taken by an
// agent that does not return, next to a thread a dead runner left (its
// lease expiring at epoch+ttl), moves the runner's clock to the lease's
// expiry plus one PollEvery and no further, and reports whether the
// runner then takes the dead thread over: claims it and abandons the
// dead runner's run.
func takenOverSaturated(t *testing.T, takeovers int) bool {
	const poll = ttl / 10
	s := memory.New()
	started := make(chan core.ThreadID, 8)
	a := newProc(t, s, "A", procOpts{
		agent: runner.AgentFunc(func(ctx context.Context, sn *runner.Session) error {
			started <- sn.Delivered.Claim.Thread
			<-ctx.Done()
			return ctx.Err()
		}),
		cfg: func(c *runner.Config) {
			c.MaxConcurrentTurns, c.TakeoverTurns, c.PollEvery = 2, takeovers, poll
		},
	})
	for _, id := range []core.ThreadID{"t1", "t2", "t3"} {
		newThread(t, a.ws, id, "m1", "m2")
	}
	deadThread(t, s, "d")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.r.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
	}()
	for range 2 {
		waitFor(t, started, "the runner's two turns to start their agents")
	}
	// Settled: two renewal timers and Run's poll. Each move of the clock
	// fires them all; wait for them to be set again, so that the next move
	// fires them again.
	settled := func(what string) {
		waitUntil(t, func() bool { return a.clock.Waiters() == 3 }, what)
	}
	settled("the two turns' renewals and Run's poll to wait on the clock")
	a.clock.Advance(ttl - time.Millisecond)
	settled("the renewals and Run's poll to wait again before the dead lease expires")
	l, err := a.ws.Lease(ctx, "d")
	require.NoError(t, err)
	require.Equal(t, core.Holder("dead"), l.Holder, "the dead runner's lease was taken before it expired")
	a.clock.Advance(poll + time.Millisecond) // expiry + one poll: no further
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		th, err := a.ws.Thread(ctx, "d")
		require.NoError(t, err)
		if len(th.ActiveRuns()) == 0 {
			// The takeover turn is short: it releases the thread once it
			// abandoned the dead run, with m2 left for a free slot.
			waitUntil(t, func() bool {
				l, err := a.ws.Lease(ctx, "d")
				require.NoError(t, err)
				return l.Holder == ""
			}, "the takeover turn to release d once it abandoned the dead run")
			require.Equal(t, core.Seq(1), th.Taken, "the takeover turn consumed a message")
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// A runner whose every turn slot is taken still takes over, in its
// takeover slot, a thread a dead runner left, within ClaimTTL + PollEvery
// of the dead runner's last renewal by its own clock.
func TestTakeoverWhileSaturated(t *testing.T) {
	require.True(t, takenOverSaturated(t, 0), "a saturated runner (default TakeoverTurns) did not take the dead runner's thread over within ClaimTTL + PollEvery")
}

// The same with the takeover slots switched off: the dead runner's thread
// waits for a turn slot, and none frees within ClaimTTL + PollEvery. This
// is the check that TestTakeoverWhileSaturated can fail.
func TestTakeoverWhileSaturatedOff(t *testing.T) {
	require.False(t, takenOverSaturated(t, -1), "a saturated runner took the dead runner's thread over without a takeover slot")
}

// Of the threads with work, Run starts first those whose lease has
// expired by its clock, before the threads nobody holds that come earlier
// in the listing.
func TestRunLapsedFirst(t *testing.T) {
	s := memory.New()
	first := firstRun(t, s, func(a *proc) {
		newThread(t, a.ws, "t1", "m1")
		deadThread(t, s, "d")
		newThread(t, a.ws, "t2", "m1")
		a.clock.Advance(ttl) // d's lease has expired by A's clock
	})
	require.Equal(t, core.ThreadID("d"), first, "Run started a thread nobody held before the lapsed one")
}

// Of the lapsed threads, Run starts first one of the longest expired (one
// of the first four, drawn at each look): a dead holder's lease stays
// where it was, while a live holder whose clock runs behind keeps moving
// its expiry on. Eight dead threads, listed newest-expired first; with the
// order reversed (the newest expired first), the first run is always on
// one of the four newest.
func TestRunLongestExpiredFirst(t *testing.T) {
	oldest := map[core.ThreadID]bool{"d0": true, "d1": true, "d2": true, "d3": true}
	for range 5 {
		s := memory.New()
		first := firstRun(t, s, func(a *proc) {
			d := newProc(t, s, "D", procOpts{})
			for i := 7; i >= 0; i-- {
				id := core.ThreadID(fmt.Sprint("d", i))
				newThread(t, d.ws, id, "m1", "m2")
				c, err := d.ws.Claim(context.Background(), id, core.Holder(fmt.Sprint("dead", i)), ttl+time.Duration(i)*time.Second)
				require.NoError(t, err)
				p, err := d.ws.Plan(context.Background(), c)
				require.NoError(t, err)
				_, err = d.ws.RunStart(context.Background(), c, p.Message)
				require.NoError(t, err)
			}
			a.clock.Advance(ttl + 8*time.Second) // every dead lease has expired by A's clock
		})
		require.True(t, oldest[first], "Run first took over %s, not one of the four longest expired (d0 to d3)", first)
	}
}

// firstRun makes a runner A on s with one turn slot and no takeover slot,
// lets setup prepare the threads (and move A's clock), runs A's Run until
// its first run starts, stops it, and returns that run's thread.
func firstRun(t *testing.T, s core.Storage, setup func(a *proc)) core.ThreadID {
	t.Helper()
	ran := make(chan core.ThreadID, 16)
	a := newProc(t, s, "A", procOpts{
		agent: runner.AgentFunc(func(_ context.Context, sn *runner.Session) error {
			ran <- sn.Delivered.Claim.Thread
			return nil
		}),
		cfg: func(c *runner.Config) {
			c.MaxConcurrentTurns, c.TakeoverTurns, c.PollEvery = 1, -1, time.Hour
		},
	})
	setup(a)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.r.Run(ctx) }()
	first := waitFor(t, ran, "the first run")
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
	return first
}
