package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// Open refuses an empty url unless asked for pgx's defaults, and names a
// server it cannot reach as a connection failure, not a migration's.
func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, "", Options{})
	require.ErrorContains(t, err, "empty database url")

	_, err = Open(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=5", Options{})
	require.ErrorContains(t, err, "postgres: connect to 127.0.0.1:1")
	require.NotContains(t, err.Error(), "migrate")

	_, err = Open(ctx, "postgres://nobody@127.0.0.1:notaport/none", Options{})
	require.ErrorContains(t, err, "postgres: parse database url")
	require.ErrorIs(t, err, core.ErrInvalidArgument, "a url that does not parse")
	_, err = Open(ctx, "", Options{})
	require.ErrorIs(t, err, core.ErrInvalidArgument, "an empty url")
}

// Open given a nil context refuses it, before it connects. Before, pgxpool
// panicked on it in a goroutine of its own, which no caller can recover:
// the process died. (The session-42 misuse pass.)
func TestOpenNilContextRefused(t *testing.T) {
	var nilCtx context.Context
	_, err := Open(nilCtx, databaseURL(t), Options{Schema: testSchema(t)})
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.ErrorContains(t, err, "Open given a nil context")
}

// BenchmarkOpen times what a runner process does before its first look
// for work, on a schema that is up to date (another process migrated
// it): Open (connect, migrate) and, with wakeups=on, Wakeups too (its
// listening connection and its LISTENs).
// Issue 25's drain counts the four runners' starts (internal/bench).
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	schema := testSchema(b)
	openStore(b, poolConfig(b, "tc-open-first"), schema) // migrates
	for _, wake := range []bool{false, true} {
		b.Run(fmt.Sprintf("wakeups=%s", map[bool]string{false: "off", true: "on"}[wake]), func(b *testing.B) {
			cfg := poolConfig(b, "tc-open")
			for b.Loop() {
				s, err := open(ctx, cfg.Copy(), Options{Schema: schema})
				if err != nil {
					b.Fatal(err)
				}
				if wake {
					wctx, cancel := context.WithCancel(ctx)
					if _, err := s.Wakeups(wctx); err != nil {
						b.Fatal(err)
					}
					cancel()
				}
				s.Close()
			}
		})
	}
}

// Open refuses PostgreSQL's own schemas before it connects.
func TestOpenRefusesSystemSchemas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, schema := range []string{"information_schema", "pg_catalog", "pg_mine"} {
		_, err := Open(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=5", Options{Schema: schema})
		require.ErrorContains(t, err, fmt.Sprintf("schema name %q is PostgreSQL's own", schema))
	}
}

// DropSchema drops a schema only when all it holds is the Store's own: a
// table or a function of someone else's in it makes it refuse, dropping
// nothing, and so does the schema public, whatever it holds.
func TestDropSchemaRefusesOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := (&Store{schema: "public"}).DropSchema(ctx)
	require.ErrorContains(t, err, `drop schema "public": refused`)

	s := newStore(t)
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	conn := admin(t)
	schema := pgx.Identifier{s.Schema()}.Sanitize()
	exists := func() bool {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, s.Schema()).Scan(&n))
		return n == 1
	}
	for _, c := range []struct{ make, drop, name string }{
		{`CREATE TABLE ` + schema + `.users (id int)`, `DROP TABLE ` + schema + `.users`, "users"},
		{`CREATE FUNCTION ` + schema + `.f() RETURNS int LANGUAGE sql AS 'SELECT 1'`, `DROP FUNCTION ` + schema + `.f()`, "f()"},
		{`CREATE SEQUENCE ` + schema + `.ids`, `DROP SEQUENCE ` + schema + `.ids`, "ids"},
	} {
		_, err := conn.Exec(ctx, c.make)
		require.NoError(t, err)
		err = s.DropSchema(ctx)
		require.ErrorContains(t, err, "refused: it holds what this Store did not make ("+c.name+")")
		require.True(t, exists(), "the schema was dropped with %s in it", c.name)
		_, err = ws.Post(ctx, "t", "still here")
		require.NoError(t, err)
		_, err = conn.Exec(ctx, c.drop)
		require.NoError(t, err)
	}
	require.NoError(t, s.DropSchema(ctx))
	require.False(t, exists(), "the schema is still there")
}

// ownObjects is what the migrations leave in a fresh schema, no more, no
// less: a migration that adds a table or a function must add it there,
// or DropSchema refuses the Store's own schemas.
func TestOwnObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newStore(t)
	var all []string
	require.NoError(t, admin(t).QueryRow(ctx, othersSQL, s.Schema(), []string{}).Scan(&all))
	want := slices.Clone(ownObjects)
	slices.Sort(want)
	require.Equal(t, want, all)
}

// Once a Store is closed, Listen and Wakeups refuse, opening no
// connection.
func TestListenAfterClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := open(ctx, poolConfig(t, randomName("tc_")), Options{Schema: testSchema(t)})
	require.NoError(t, err)
	s.Close()
	_, err = s.Listen(ctx)
	require.ErrorIs(t, err, errStoreClosed)
	_, err = s.Wakeups(ctx)
	require.ErrorIs(t, err, errStoreClosed)
}

// Open refuses, before it connects, a schema name PostgreSQL cannot take
// as the Store needs it, with an error wrapping core.ErrInvalidArgument:
// longer than 55 bytes (a 55-byte one is taken), PostgreSQL's own, or
// holding a NUL byte or invalid UTF-8 (pgx's quoting drops a NUL, so
// "a\x00b" would name the schema "ab": another Store's).
func TestOpenRefusesBadSchemaNames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const unreachable = "postgres://nobody@127.0.0.1:1/none?connect_timeout=5"
	for _, c := range []struct{ schema, says string }{
		{strings.Repeat("s", 56), "longer than 55 bytes"},
		{"information_schema", "PostgreSQL's own"},
		{"pg_mine", "PostgreSQL's own"},
		{"tc\x00other", "NUL byte"},
		{"tc\xff", "not valid UTF-8"},
	} {
		_, err := Open(ctx, unreachable, Options{Schema: c.schema})
		require.ErrorIs(t, err, core.ErrInvalidArgument, "schema %q", c.schema)
		require.ErrorContains(t, err, c.says, "schema %q", c.schema)
	}
	_, err := Open(ctx, unreachable, Options{Schema: strings.Repeat("s", 55)})
	require.ErrorContains(t, err, "postgres: connect to 127.0.0.1:1", "a 55-byte schema name is refused before connecting")
}

// A schema name of 55 bytes, the longest Options.Schema takes, makes
// channel names PostgreSQL takes: a watcher of a thread hears its post.
func TestLongestSchemaName(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	schema := testSchema(t)
	schema += strings.Repeat("x", maxSchemaLen-len(schema))
	require.Len(t, schema, 55)
	t.Cleanup(func() {
		_, err := admin(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		require.NoError(t, err)
	})
	s := openStore(t, poolConfig(t, "tc"), schema)
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	ch, err := s.WatchEvents(ctx, "t")
	require.NoError(t, err)
	_, err = ws.Post(ctx, "t", "m")
	require.NoError(t, err)
	recvWithin(t, ch, 30*time.Second, "a notice of the post, on a schema of 55 bytes")
}

// An empty url with Options.PgxDefaults is pgx's defaults: here the PG*
// variables, naming the test's server.
func TestOpenPgxDefaults(t *testing.T) {
	cfg, err := pgx.ParseConfig(databaseURL(t))
	require.NoError(t, err)
	for k, v := range map[string]string{"PGHOST": cfg.Host, "PGPORT": strconv.Itoa(int(cfg.Port)), "PGUSER": cfg.User,
		"PGPASSWORD": cfg.Password, "PGDATABASE": cfg.Database, "PGSSLMODE": "prefer", "PGSERVICEFILE": "/nonexistent"} {
		t.Setenv(k, v)
	}
	s, err := Open(testCtx(t), "", Options{Schema: testSchema(t), PgxDefaults: true})
	require.NoError(t, err)
	s.Close()
}

// The zero Options are the documented defaults, and a negative
// CachedThreads keeps no thread's state: nothing is cached, and no write
// decides from the cache.
func TestOptionsDefaults(t *testing.T) {
	require.Equal(t, Options{Schema: "threadclaim", CachedThreads: 4096}, Options{}.withDefaults())
	require.Equal(t, Options{Schema: "s", CachedThreads: -1}, Options{Schema: "s", CachedThreads: -1}.withDefaults())
	ctx := testCtx(t)
	s := newStoreWith(t, Options{CachedThreads: -1})
	require.False(t, s.speculate)
	p := newProc(s, "a")
	require.NoError(t, p.ws.CreateThread(ctx, "t"))
	_, err := p.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	_, err = p.ws.Claim(ctx, "t", "h", ttl)
	require.NoError(t, err)
	require.Empty(t, s.cache, "thread states kept with CachedThreads -1")
}

// A failed Open leaves no connection open, nor the pool's goroutines:
// not after a migration it refused (a newer schema), nor after a server
// it could not reach.
func TestFailedOpenLeavesNothing(t *testing.T) {
	ctx := testCtx(t)
	schema := testSchema(t)
	openStore(t, poolConfig(t, "tc"), schema)
	_, err := admin(t).Exec(ctx, `INSERT INTO `+pgx.Identifier{schema}.Sanitize()+`.schema_migrations (version, name) VALUES (999, '0999_future.sql')`)
	require.NoError(t, err)
	app := randomName("tc_")
	_, err = open(ctx, poolConfig(t, app), Options{Schema: schema})
	require.ErrorContains(t, err, "newer than this binary")
	waitFor(t, admin(t), "no connection of a failed Open", `SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = $1`, app)

	healthChecks := func() int {
		buf := make([]byte, 1<<22)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "pgxpool.(*Pool).backgroundHealthCheck")
	}
	before := healthChecks()
	_, err = Open(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=5", Options{})
	require.ErrorContains(t, err, "postgres: connect to")
	deadline := time.Now().Add(5 * time.Second)
	for healthChecks() > before {
		if time.Now().After(deadline) {
			t.Fatalf("a pool's health check still running 5 s after an Open that could not connect (%d, %d before)", healthChecks(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close ends the Store: none of its connections stays open, and a later
// call fails, a write from the Store's cache under its own claim
// included, as known not to have been sent (not core.ErrCommitUnknown).
func TestCloseEndsTheStore(t *testing.T) {
	ctx := testCtx(t)
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	a, c := claimedThread(t, s)
	s.Close()
	waitFor(t, admin(t), "no connection of the closed Store", `SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = $1`, app)
	_, err := a.ws.RunStart(ctx, c, 1)
	require.Error(t, err, "a write from the cache after Close")
	require.NotErrorIs(t, err, core.ErrCommitUnknown)
	_, err = a.ws.Post(ctx, "t", "m2")
	require.Error(t, err, "a post after Close")
	_, err = s.PendingThreads(ctx)
	require.Error(t, err, "PendingThreads after Close")
	_, err = s.WatchEvents(ctx, "t")
	require.ErrorIs(t, err, errStoreClosed)
	require.ErrorIs(t, s.DropSchema(ctx), errStoreClosed, "DropSchema after Close says so (it said only 'closed pool')")
	require.NotPanics(t, s.Close, "a second Close")
}

// A second DropSchema, of a schema dropped already, is no error, as its
// doc says. (The session-42 misuse pass.)
func TestDropSchemaTwice(t *testing.T) {
	ctx := testCtx(t)
	s := openStore(t, poolConfig(t, "tc-drop-twice"), testSchema(t))
	require.NoError(t, s.DropSchema(ctx))
	require.NoError(t, s.DropSchema(ctx))
}

// A post that gives a free thread work NOTIFYs the channel the package
// comment names, Options.Schema+".p" and the thread's shard (FNV-1a of
// its id, mod 64), with the id as payload: what a runner of another
// version of this binary listens on through a rolling upgrade.
func TestPostNotifiesTheDocumentedShard(t *testing.T) {
	ctx := testCtx(t)
	s := newStore(t)
	h := fnv.New32a()
	_, _ = h.Write([]byte("t"))
	channel := s.Schema() + ".p" + strconv.Itoa(int(h.Sum32()%64))
	conn := admin(t)
	_, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	require.NoError(t, err)
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err = ws.Post(ctx, "t", "m")
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(wctx)
	require.NoError(t, err, "a notification on %s", channel)
	require.Equal(t, [2]string{channel, "t"}, [2]string{n.Channel, n.Payload})
}

// Options.LockingReads makes a write two round trips (it reads under
// lock, then writes and commits) where the Store's cache makes it one.
func TestLockingReadsTwoRoundTrips(t *testing.T) {
	ctx := testCtx(t)
	for _, c := range []struct {
		opts  Options
		trips int64
	}{{Options{}, 1}, {Options{LockingReads: true}, 2}} {
		s := newStoreWith(t, c.opts)
		a, cl := claimedThread(t, s)
		before := s.stats.roundTrips.Load()
		_, err := a.ws.RunStart(ctx, cl, 1)
		require.NoError(t, err)
		require.Equal(t, c.trips, s.stats.roundTrips.Load()-before, "round trips of a RunStart under the Store's own claim, %+v", c.opts)
	}
}

// A schema name with a NUL byte in it does not open the schema of the
// same name without it (pgx's quoting drops the NUL): Open refuses it,
// and the other schema gets nothing. (Before Open refused it, such a
// Store opened on the other schema, up to date, and wrote its threads
// there.)
func TestOpenNULSchemaNameTouchesNoOther(t *testing.T) {
	ctx := testCtx(t)
	schema := testSchema(t)
	openStore(t, poolConfig(t, "tc"), schema)
	s, err := open(ctx, poolConfig(t, "tc"), Options{Schema: schema[:2] + "\x00" + schema[2:]})
	if err == nil {
		_ = core.NewWorkspace(s, core.SystemClock{}).CreateThread(ctx, "t")
		s.Close()
	}
	var n int
	require.NoError(t, admin(t).QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema}.Sanitize()+`.threads`).Scan(&n))
	require.Zero(t, n, "threads written into %s by a Store opened on a name with a NUL in it", schema)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
}

// Open with a context already ended fails with its error, as a failure
// to connect, and creates nothing: not the schema.
func TestOpenEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	schema := testSchema(t)
	_, err := open(ctx, poolConfig(t, "tc"), Options{Schema: schema})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "postgres: connect to")
	var n int
	require.NoError(t, admin(t).QueryRow(testCtx(t), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n))
	require.Zero(t, n, "the schema, created by an Open whose context had ended")
}
