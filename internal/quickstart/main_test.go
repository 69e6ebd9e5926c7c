package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// The quick start runs against a real server (scripts/with-postgres), in
// a schema of its own, and the service sees the question, the agent's
// reply and the answer, in that order; run again in the same schema (the
// README's command run twice on one database), on a thread of its own,
// it sees the same. Each run returns at the answer, not when its context
// ends (mutants of pass 16: one thread name for every run; the stop at
// the answer dropped, which left run waiting out its deadline).
func TestQuickstart(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: this test needs a real PostgreSQL server; run it through scripts/with-postgres (scripts/with-postgres go test ./internal/quickstart)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema := fmt.Sprintf("tcqs_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	for range 2 {
		var out bytes.Buffer
		require.NoError(t, run(ctx, url, schema, &out))
		require.NoError(t, ctx.Err(), "run returned only when its context ended, not at the answer")
		require.Equal(t, "agent asks: which environment?\nagent replies: deploying the web app\nanswered by message 2\n", out.String())
	}
}

// Without DATABASE_URL the quick start says so, as an error (mutant of
// pass 16: Open's error ignored, a nil store used).
func TestQuickstartNoURL(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), "", "threadclaim", &out)
	require.ErrorContains(t, err, "DATABASE_URL")
	require.Empty(t, out.String())
}
