package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/internal/sim/simtest"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// These tests talk to a real PostgreSQL server, named by DATABASE_URL.
// Without one they fail: they never skip.
const noDatabase = "DATABASE_URL is not set: these tests need a real PostgreSQL server. " +
	"Run them through scripts/with-postgres (scripts/with-postgres go test ./store/postgres), " +
	"which starts a throwaway cluster, or scripts/test; or set DATABASE_URL=postgres://USER@HOST:PORT/DB"

func databaseURL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		tb.Fatal(noDatabase)
	}
	return url
}

func randomName(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// testCtx returns the context of a test's storage calls: it ends when
// the test does, or after testDeadline, so that a call that never
// returns (a lock the test's own transaction holds, say) fails the test
// with the call's deadline error, not the whole package at go test's
// timeout.
func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(tb.Context(), testDeadline)
	tb.Cleanup(cancel)
	return ctx
}

// testDeadline bounds each test's storage calls (testCtx).
const testDeadline = 3 * time.Minute

// admin is a plain connection for a test to look at the server with
// (pg_stat_activity, pg_locks) and to act on it (pg_terminate_backend).
func admin(tb testing.TB) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), databaseURL(tb))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// testSchema returns a fresh schema name, dropped when the test ends.
func testSchema(tb testing.TB) string {
	tb.Helper()
	schema := randomName("tctest_")
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, databaseURL(tb))
		if err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// poolConfig parses DATABASE_URL and names the pool's connections app, so
// that a test can find its backends in pg_stat_activity.
func poolConfig(tb testing.TB, app string) *pgxpool.Config {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(databaseURL(tb))
	require.NoError(tb, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	return cfg
}

// openStore opens a Store on schema, closed when the test ends.
func openStore(tb testing.TB, cfg *pgxpool.Config, schema string) *Store {
	tb.Helper()
	return openStoreWith(tb, cfg, Options{Schema: schema})
}

// openStoreWith opens a Store with opts, closed when the test ends.
func openStoreWith(tb testing.TB, cfg *pgxpool.Config, opts Options) *Store {
	tb.Helper()
	s, err := open(context.Background(), cfg, opts)
	require.NoError(tb, err)
	tb.Cleanup(s.Close)
	return s
}

// newStore opens a Store on a fresh schema of its own.
func newStore(tb testing.TB) *Store {
	tb.Helper()
	return openStore(tb, poolConfig(tb, randomName("tc_")), testSchema(tb))
}

// newStoreWith opens a Store with opts on a fresh schema of its own.
func newStoreWith(tb testing.TB, opts Options) *Store {
	tb.Helper()
	opts.Schema = testSchema(tb)
	return openStoreWith(tb, poolConfig(tb, randomName("tc_")), opts)
}

// readModes are the two ways a write transaction reads: speculating from
// the cache while the Store holds the lease (the default), and locking
// every row it reads with its first round trip.
var readModes = []struct {
	name string
	opts Options
}{
	{"reads=speculative", Options{}},
	{"reads=locking", Options{LockingReads: true}},
}

// eachReadMode runs test once for each of readModes, in parallel, with
// that mode's Options.
func eachReadMode(t *testing.T, test func(t *testing.T, opts Options)) {
	for _, m := range readModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			test(t, m.opts)
		})
	}
}

// The conformance suite runs on each way a Store can read: speculating
// from its cache (the default, which gets every check simtest.Exercise
// has), locking every read, and folding the whole log each time (no
// cache). Each keeps trace lines, so that the suite checks them, and
// each case's rows are checked against what the CHECK constraints
// migration 0010 dropped said (keepsRowChecks).
func TestConformance(t *testing.T) {
	t.Parallel() // a schema of its own
	modes := append(readModes, struct {
		name string
		opts Options
	}{"cache=none", Options{CachedThreads: -1}})
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			factory := func(t *testing.T) core.Storage {
				opts := m.opts
				opts.KeepTrace = true
				s := newStoreWith(t, opts)
				keepsRowChecks(t, s)
				return s
			}
			if i == 0 { // the default: every check storetest has
				simtest.Exercise(t, factory, simtest.WithExecutions(8, 2))
				return
			}
			storetest.Run(t, factory)
		})
	}
}

// The mutant with holder freshness off: the holders table's key dropped.
// A holder reused across claims then passes a later claim's fence with
// its stale round, and a message is consumed twice.
func TestReuseHolderMutant(t *testing.T) {
	t.Parallel() // a schema of its own
	s := newStore(t)
	_, err := s.pool.Exec(context.Background(), `ALTER TABLE `+pgx.Identifier{s.Schema()}.Sanitize()+`.holders DROP CONSTRAINT holders_pkey`)
	require.NoError(t, err)
	storetest.CheckReuseHolderMutant(t, s)
}

// The conformance suite's commit-order check catches the fences-off
// mutant on a speculating Store: the paused write read the lease from the
// cache before the other holder's claim, whose commit makes the write's
// check fail; run again with locking reads and no fence, it starts its run
// after the claim.
func TestAcquireWaitsCatchesUnfenced(t *testing.T) {
	t.Parallel() // a schema of its own
	err := storetest.CheckAcquireWaits(context.Background(), newStore(t), core.Fences{})
	require.Error(t, err, "the commit-order check passed the unfenced write")
	require.Contains(t, err.Error(), "after b's claim took the lease")
	t.Logf("caught: %v", err)
}

var epoch = time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)

// proc is one process of a test: its own clock and workspace.
type proc struct {
	clock *coretest.Clock
	ws    *core.Workspace
}

// claimedThread creates thread "t" on s with one message, "m1", and
// returns process "a" with its claim of it (holder "ha", for ttl), whose
// round has planned the run of "m1".
func claimedThread(t *testing.T, s core.Storage) (*proc, core.Claim) {
	t.Helper()
	ctx := testCtx(t)
	a := newProc(s, "a")
	require.NoError(t, a.ws.CreateThread(ctx, "t"))
	_, err := a.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	c, err := a.ws.Claim(ctx, "t", "ha", ttl)
	require.NoError(t, err)
	planRun(t, a, c)
	return a, c
}

// planRun plans p's claim c, which must plan a run of message 1.
func planRun(t *testing.T, p *proc, c core.Claim) {
	t.Helper()
	pl, err := p.ws.Plan(context.Background(), c)
	require.NoError(t, err)
	require.Equal(t, [2]int{int(core.PlanRun), 1}, [2]int{int(pl.Kind), int(pl.Message)}, "the plan of claim %q: %+v", c.Holder, pl)
}

func newProc(s core.Storage, name string, opts ...core.Option) *proc {
	c := coretest.NewClock(epoch)
	return &proc{clock: c, ws: core.NewWorkspace(s, c, append([]core.Option{core.WithProcess(name)}, opts...)...)}
}

// startRun claims thread id for holder h (ClaimThenPlan, for ttl) and
// starts the planned run, failing t if either fails.
func (p *proc) startRun(t *testing.T, id core.ThreadID, h core.Holder) (core.Claim, core.RunID) {
	t.Helper()
	ctx := testCtx(t)
	c, plan, err := p.ws.ClaimThenPlan(ctx, id, h, ttl)
	require.NoError(t, err)
	run, err := p.ws.RunStart(ctx, c, plan.Message)
	require.NoError(t, err)
	return c, run
}

// waitWithin waits for wg, and fails the test, naming what it waited for,
// if that takes longer than d: goroutines that talk to the server can
// hang on a lock, and a test must not hang until go test's timeout.
func waitWithin(t testing.TB, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: not done after %v", what, d)
	}
}

// recvWithin receives from ch, and fails the test, naming what it waited
// for, if nothing comes within d.
func recvWithin[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing after %v", what, d)
		panic("unreachable")
	}
}
