package proxy

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// through starts a proxy in front of DATABASE_URL's server and returns it
// with a connection config that goes through it.
func through(t *testing.T) (*Proxy, *pgx.ConnConfig) {
	t.Helper()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: run through scripts/with-postgres or scripts/test")
	}
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	network, addr := Upstream(cfg.Host, cfg.Port)
	p, err := Listen(network, addr)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	cfg.Host, cfg.Port = "127.0.0.1", uint16(p.Addr().Port)
	cfg.Fallbacks = nil
	return p, cfg
}

func connect(t *testing.T, ctx context.Context, cfg *pgx.ConnConfig) *pgx.Conn {
	t.Helper()
	c, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err, "connect through the proxy")
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// Queries and transactions pass through unchanged; every COMMIT is seen,
// and held back only while DelayCommits says so.
func TestProxyForwardsAndCountsCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, cfg := through(t)
	c := connect(t, ctx, cfg)
	var n int
	require.NoError(t, c.QueryRow(ctx, "SELECT 1 + $1::int", 41).Scan(&n))
	require.Equal(t, 42, n)
	for i := range 3 {
		if i == 2 {
			p.DelayCommits(time.Millisecond)
		}
		tx, err := c.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	seen, delayed := p.Commits()
	require.Equal(t, 3, seen, "COMMITs seen by the proxy")
	require.Equal(t, 1, delayed, "COMMITs held back")
}

// While partitioned nothing gets through: a query on an open connection
// and a new connection both wait until their deadline. After the heal,
// the connections that lived through the partition are closed, and new
// ones work.
func TestProxyPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, cfg := through(t)
	c := connect(t, ctx, cfg)
	require.NoError(t, c.Ping(ctx))

	p.Partition(true)
	qctx, qcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := c.Ping(qctx)
	qcancel()
	require.Error(t, err, "a query during the partition must not get through")
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = pgx.ConnectConfig(cctx, cfg)
	ccancel()
	require.Error(t, err, "a connection during the partition must not get through")

	p.Partition(false)
	c2 := connect(t, ctx, cfg)
	require.NoError(t, c2.Ping(ctx), "a new connection after the heal")
}

// Latency slows every round trip by at least the latency set.
func TestProxyLatency(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, cfg := through(t)
	c := connect(t, ctx, cfg)
	p.SetLatency(50 * time.Millisecond)
	start := time.Now()
	require.NoError(t, c.Ping(ctx))
	// A lower bound, which load cannot break: the proxy sleeps before it
	// forwards.
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
}

func TestUpstream(t *testing.T) {
	for _, c := range []struct {
		host          string
		port          uint16
		network, addr string
	}{
		{"/tmp/sock", 5432, "unix", "/tmp/sock/.s.PGSQL.5432"},
		{"127.0.0.1", 6000, "tcp", "127.0.0.1:6000"},
		{"::1", 6000, "tcp", "[::1]:6000"},
	} {
		network, addr := Upstream(c.host, c.port)
		require.Equal(t, c.network, network, fmt.Sprint(c))
		require.Equal(t, c.addr, addr, fmt.Sprint(c))
	}
}
