package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Four Stores, two with a cache of their own and two with none, take a
// few threads at once with ClaimThenStart, end runs (RunEnd, or
// RunEndThenStart as a runner does) and release, while a poster posts
// and each Store looks at the threads (Workspace.Thread, a View). A
// Store's cache of a thread goes stale whenever another Store takes the
// thread, so claimSQL starts runs from stale caches and from fresh ones,
// behind its check that only posts follow the cache's last event, and,
// for the Stores with no cache, from the log read with the claim, behind
// its check that no writer came between that read and the row's lock
// (the claims wait for each other's locks). Every start must be the run core
// plans (otherwise ErrInconsistentLog), and at the end every thread's log
// must fold from scratch, one ended run a message, on every Store and on
// a Store with no cache. A benchmark once left a log that did not fold
// after a claim's start (internal/bench/BENCH.md, "Sixteen turns a
// runner"); this test found it again, in about one run of six, before
// claimSQL read the events since the cache from the row's counters
// (TestClaimStartAfterWaitingForTheRow is its deterministic twin).
func TestClaimStartsFromStaleCaches(t *testing.T) {
	t.Parallel() // a schema of its own
	const (
		nThreads, nStores, turns = 2, 4, 8
		perThread                = 300
		total                    = nThreads * perThread
		limit                    = 2 * time.Minute
	)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	schema := testSchema(t)
	poster := newProc(openStore(t, poolConfig(t, "tc-stale-poster"), schema), "poster")
	ids := make([]core.ThreadID, nThreads)
	for i := range ids {
		ids[i] = core.ThreadID(fmt.Sprintf("t%d", i))
		require.NoError(t, poster.ws.CreateThread(ctx, ids[i]))
	}
	cold := func(i int) bool { return i >= nStores-2 }
	procs := make([]*proc, nStores)
	stores := make([]*Store, nStores)
	for i := range procs {
		// The last two keep no cache: each claim reads the log whole,
		// and starts its run from that.
		opts := Options{Schema: schema}
		if cold(i) {
			opts.CachedThreads = -1
		}
		stores[i] = openStoreWith(t, poolConfig(t, fmt.Sprintf("tc-stale-%d", i)), opts)
		procs[i] = newProc(stores[i], fmt.Sprintf("p%d", i))
	}

	var n staleCounts
	// A process has one round on a thread at a time (core's rule): a
	// Store's turns take a thread it has no turn on, as a runner's do.
	var mine [nStores][nThreads]sync.Mutex
	errs := make(chan error, nStores*turns+1)
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 1))
		for i := range total {
			if _, err := poster.ws.Post(ctx, ids[i%nThreads], fmt.Sprint(i)); err != nil {
				errs <- fmt.Errorf("post %d: %w", i, err)
				return
			}
			if rng.IntN(8) == 0 {
				time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
			}
		}
	})
	for i, p := range procs {
		for k := range turns {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(k)))
				for n.consumed.Load() < total {
					if ctx.Err() != nil {
						errs <- fmt.Errorf("%d of %d messages consumed when the test's %v ran out", n.consumed.Load(), total, limit)
						return
					}
					j := rng.IntN(nThreads)
					id := ids[j]
					if rng.IntN(4) == 0 { // a look, as a runner's
						if _, err := p.ws.Thread(ctx, id); err != nil {
							errs <- fmt.Errorf("look at %s by %s: %w", id, p.ws.Process(), err)
							return
						}
						continue
					}
					if !mine[i][j].TryLock() {
						continue
					}
					err := staleTurn(ctx, p, rng, id, cold(i), &n)
					mine[i][j].Unlock()
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, n.inClaim.Load(), "runs started with their claim: the path under test")
	require.Positive(t, n.coldInClaim.Load(), "runs started with their claim by a Store with no cache")
	t.Logf("%d messages consumed, %d runs started with their claim, %d of them with no cache", n.consumed.Load(), n.inClaim.Load(), n.coldInClaim.Load())

	fresh := newProc(openStore(t, poolConfig(t, "tc-stale-fresh"), schema), "fresh")
	for _, id := range ids {
		want, err := fresh.ws.Thread(ctx, id)
		require.NoError(t, err, "%s folds from scratch", id)
		require.Equal(t, [3]uint64{perThread, perThread, 0}, [3]uint64{uint64(want.Taken), uint64(want.LastRun()), uint64(len(want.ActiveRuns()))},
			"%s: taken, runs and active runs", id)
		for _, p := range procs {
			got, err := p.ws.Thread(ctx, id)
			require.NoError(t, err, "%s folds on %s", id, p.ws.Process())
			require.Equal(t, want.Runs(), got.Runs(), "%s's runs on %s", id, p.ws.Process())
		}
	}
}

// A claim that waits for the thread's row while another writer holds it
// reads the events in the snapshot its statement took before the wait,
// and the row as that writer left it. Here the writer (SQL on a
// connection of the test's, as another process's Store would write)
// starts and ends run 2 and leaves the lease free, while b, which has
// seen run 1 and only posts since, claims the thread with its start. The
// start must be run 3 on message 3, as core plans it from the log, not
// run 2 again: from its cache, which ended with run 1 (claimSQL's check
// of the events since the cache reads the row's counters, which the wait
// brings up to date, not the snapshot's events), or, with no cache
// (cold), from the snapshot's log, which has one run (claimSQL trusts
// that log only when it is as long as the row's log_n, and the
// snapshot's row is the locked one). The writer is also an older binary
// (oldWriter), which leaves log_n as it was: only the row's version then
// tells the snapshot's log from the row's.
func TestClaimStartAfterWaitingForTheRow(t *testing.T) {
	t.Parallel() // schemas of their own
	for _, c := range []struct{ cold, oldWriter bool }{{false, false}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("cold=%v/oldWriter=%v", c.cold, c.oldWriter), func(t *testing.T) {
			t.Parallel()
			claimStartAfterWaiting(t, c.cold, c.oldWriter)
		})
	}
}

func claimStartAfterWaiting(t *testing.T, cold, oldWriter bool) {
	ctx := testCtx(t)
	schema := testSchema(t)
	poster := newProc(openStore(t, poolConfig(t, "tc-wait-poster"), schema), "poster")
	app := randomName("tc-wait-b-")
	opts := Options{Schema: schema}
	if cold {
		opts.CachedThreads = -1
	}
	b := newProc(openStoreWith(t, poolConfig(t, app), opts), "b")
	require.NoError(t, poster.ws.CreateThread(ctx, "t"))
	_, err := poster.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	c, plan, run, err := b.ws.ClaimThenStart(ctx, "t", "b1", ttl)
	require.NoError(t, err)
	if run == 0 {
		run, err = b.ws.RunStart(ctx, c, plan.Message)
		require.NoError(t, err)
	}
	require.NoError(t, b.ws.RunEnd(ctx, c, run, "out"))
	require.NoError(t, b.ws.Release(ctx, c))
	for _, m := range []string{"m2", "m3"} {
		_, err := poster.ws.Post(ctx, "t", m)
		require.NoError(t, err)
	}

	x := admin(t)
	tx, err := x.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	q := pgx.Identifier{schema}.Sanitize()
	var version, logN, taken int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT version, log_n, taken FROM `+q+`.threads WHERE id = 't' FOR UPDATE`).Scan(&version, &logN, &taken))
	require.Equal(t, int64(1), taken)
	type claimed struct {
		c    core.Claim
		plan core.Plan
		run  core.RunID
		err  error
	}
	done := make(chan claimed, 1)
	go func() {
		c, plan, run, err := b.ws.ClaimThenStart(ctx, "t", "b2", ttl)
		done <- claimed{c, plan, run, err}
	}()
	waitFor(t, x, "b's claim waiting for the thread's row", waitingBackend, app)
	_, err = tx.Exec(ctx, `INSERT INTO `+q+`.events (thread_id, seq, version, kind, at, message, text, run, request, holder)
		SELECT 't', $1::bigint + 1, $2::bigint + 1, 'run_started', max(at), 2, '', 2, 0, 'x' FROM `+q+`.events WHERE thread_id = 't'
		UNION ALL
		SELECT 't', $1::bigint + 2, $2::bigint + 2, 'run_ended', max(at), 0, '', 2, 0, '' FROM `+q+`.events WHERE thread_id = 't'`, logN, version)
	require.NoError(t, err)
	moved := 2
	if oldWriter {
		moved = 0
	}
	_, err = tx.Exec(ctx, `UPDATE `+q+`.threads SET version = version + 2, taken = 2, log_n = log_n + $1 WHERE id = 't'`, moved)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	var got claimed
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("timed out after 30s waiting for b's claim once the other writer committed")
	}
	require.NoError(t, got.err, "b's claim with its start")
	require.Equal(t, [2]any{core.PlanRun, core.Seq(3)}, [2]any{got.plan.Kind, got.plan.Message}, "b's plan")
	if got.run == 0 { // the check refused the start: core's RunStart
		got.run, err = b.ws.RunStart(ctx, got.c, got.plan.Message)
		require.NoError(t, err)
	}
	require.Equal(t, core.RunID(3), got.run, "b's run")
	th, err := newProc(openStore(t, poolConfig(t, "tc-wait-fresh"), schema), "fresh").ws.Thread(ctx, "t")
	require.NoError(t, err, "the log folds from scratch")
	require.Equal(t, core.RunID(3), th.LastRun())
}

// staleCounts are what TestClaimStartsFromStaleCaches's turns count.
type staleCounts struct{ consumed, inClaim, coldInClaim, holders atomic.Int64 }

// staleTurn is a turn of TestClaimStartsFromStaleCaches: it claims id
// with its start, runs what it plans, ends each run (RunEnd, or
// RunEndThenStart), and releases; a thread held by another is no error.
func staleTurn(ctx context.Context, p *proc, rng *rand.Rand, id core.ThreadID, cold bool, c *staleCounts) error {
	h := core.Holder(fmt.Sprintf("h%d", c.holders.Add(1)))
	cl, plan, run, err := p.ws.ClaimThenStart(ctx, id, h, ttl)
	if errors.Is(err, core.ErrThreadBusy) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ClaimThenStart %s by %s: %w", id, h, err)
	}
	if run != 0 {
		c.inClaim.Add(1)
		if cold {
			c.coldInClaim.Add(1)
		}
	}
	for plan.Kind == core.PlanRun {
		if run == 0 {
			if run, err = p.ws.RunStart(ctx, cl, plan.Message); err != nil {
				return fmt.Errorf("RunStart %s by %s: %w", id, h, err)
			}
		}
		switch rng.IntN(3) {
		case 0: // the end, and the thread given up with work left or not
			if err := p.ws.RunEnd(ctx, cl, run, "out"); err != nil {
				return fmt.Errorf("RunEnd %s by %s: %w", id, h, err)
			}
			c.consumed.Add(1)
			plan.Kind = core.PlanNothing
		case 1:
			if err := p.ws.RunEnd(ctx, cl, run, "out"); err != nil {
				return fmt.Errorf("RunEnd %s by %s: %w", id, h, err)
			}
			c.consumed.Add(1)
			if plan, err = p.ws.Plan(ctx, cl); err != nil {
				return fmt.Errorf("Plan %s by %s: %w", id, h, err)
			}
			run = 0
		default: // a runner's way
			if plan, run, err = p.ws.RunEndThenStart(ctx, cl, run, "out", 0, true); err != nil {
				return fmt.Errorf("RunEndThenStart %s by %s: %w", id, h, err)
			}
			c.consumed.Add(1)
			if plan.Kind == core.PlanNothing {
				return nil // released with the end
			}
		}
	}
	if err := p.ws.Release(ctx, cl); err != nil {
		return fmt.Errorf("Release %s by %s: %w", id, h, err)
	}
	return nil
}

// A Release that finds in its Store's cache another holder's lease writes
// nothing (a Release without the lease), but the cache is read only as the
// speculation of a Store that holds the lease itself, and the round trip
// still checks that the cached row is current. Here it is not: A1's claim
// lapsed and A2, a process on the same Store, claimed the thread (the
// Store's own lease, cached); then A2's claim lapsed too and B, on another
// Store, claimed it. A1's Release finds A2's lease in the cache; the check
// fails (counted), A1 reads the row again and traces the lease as it is
// now, B's, at the row's current version. Without the check the Release
// would trace A2's lease at the version the cache had: a read of an older
// state, which the trace checker, ordering lines by version, accepts as
// serializable, but not the current read a Store promises; the failed
// check's count is what pins it (a mutation sweep found it unpinned).
func TestReleaseOnAStaleCache(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := testSchema(t)
	rec := &tracecheck.Recorder{}
	sa := openStore(t, poolConfig(t, "tc-stale-release-a"), schema)
	a1, a2 := newProc(sa, "a1", core.WithTracer(rec)), newProc(sa, "a2", core.WithTracer(rec))
	b := newProc(openStore(t, poolConfig(t, "tc-stale-release-b"), schema), "b", core.WithTracer(rec))
	require.NoError(t, a1.ws.CreateThread(ctx, "t"))
	_, err := a1.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	c1, err := a1.ws.Claim(ctx, "t", "h1", ttl)
	require.NoError(t, err)
	a2.clock.Advance(ttl + time.Second) // A1's lease has expired by A2's clock
	_, err = a2.ws.Claim(ctx, "t", "h2", ttl)
	require.NoError(t, err)
	b.clock.Advance(2 * (ttl + time.Second)) // and A2's by B's
	_, err = b.ws.Claim(ctx, "t", "hb", ttl)
	require.NoError(t, err)

	conflicts := sa.stats.conflicts.Load()
	require.NoError(t, a1.ws.Release(ctx, c1), "a Release without the lease is no error")
	require.Equal(t, int64(1), sa.stats.conflicts.Load()-conflicts, "the Release's check found the cached row stale")
	l, err := b.ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Holder("hb"), l.Holder, "B still holds the thread")
	lines := rec.Lines()
	tracecheck.Sort(lines)
	_, err = tracecheck.Check(lines)
	require.NoError(t, err, "the trace of the three claims and A1's Release")
}
