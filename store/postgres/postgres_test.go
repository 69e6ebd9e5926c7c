package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/simclock"
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
	s, err := open(context.Background(), cfg, Options{Schema: schema})
	require.NoError(tb, err)
	tb.Cleanup(s.Close)
	return s
}

// newStore opens a Store on a fresh schema of its own.
func newStore(tb testing.TB) *Store {
	tb.Helper()
	return openStore(tb, poolConfig(tb, randomName("tc_")), testSchema(tb))
}

func TestConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) core.Storage { return newStore(t) }, storetest.WithExecutions(8, 2))
}

// Without the Store's cache every transaction folds the whole log: the
// suite passes that way too.
func TestConformanceWithoutCache(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Storage {
		s, err := open(context.Background(), poolConfig(t, "tc"), Options{Schema: testSchema(t), CachedThreads: -1})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	})
}

var epoch = time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)

// proc is one process of a test: its own clock and workspace.
type proc struct {
	clock *simclock.Clock
	ws    *core.Workspace
}

func newProc(s core.Storage, name string, opts ...core.Option) *proc {
	c := simclock.New(epoch)
	return &proc{clock: c, ws: core.NewWorkspace(s, c, append([]core.Option{core.WithProcess(name)}, opts...)...)}
}
