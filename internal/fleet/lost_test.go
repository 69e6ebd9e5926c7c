package fleet

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/postgres"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// A message no write consumed is shown with its thread's row and log as
// storage has them, and only the first threads' in full: what a liveness
// failure seen once leaves to read after its cluster is gone.
func TestDescribeLost(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: this test needs a real PostgreSQL server; run it through scripts/with-postgres (scripts/with-postgres go test ./internal/fleet)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := fmt.Sprintf("tclost_%d", time.Now().UnixNano())
	st, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, KeepTrace: true})
	require.NoError(t, err)
	defer st.Close()
	defer func() { _ = st.DropSchema(context.WithoutCancel(ctx)) }()
	ws := core.NewWorkspace(st, core.SystemClock{}, core.WithTracer(tracecheck.NewHistoryWriter(io.Discard)))
	for _, id := range []core.ThreadID{"t1", "t2", "t3"} {
		require.NoError(t, ws.CreateThread(ctx, id))
		for _, text := range []string{"one", "two"} {
			_, err := ws.Post(ctx, id, text)
			require.NoError(t, err)
		}
	}
	_, _, _, err = ws.ClaimThenStart(ctx, "t1", "w1", time.Minute)
	require.NoError(t, err)

	r := &run{schema: schema, cluster: &cluster{url: url}}
	got := r.describeLost(ctx, []lostMessage{{"t1", 2}, {"t2", 1}, {"t2", 2}, {"t3", 1}})
	t.Log(got)
	require.Contains(t, got, "thread t1: message 2 never consumed; its row: version 4, taken 1, last_message 2, active_runs 1, log_n 3")
	require.Contains(t, got, "lease w1 until")
	require.Contains(t, got, "  3 4 run_started")
	require.Contains(t, got, `"action": "RunStart"`, "t1's trace lines")
	require.Contains(t, got, "thread t2: message 1 never consumed; its row: version 2, taken 0, last_message 2, active_runs 0, log_n 2, log_at 2026")
	require.Contains(t, got, "lease - until -\n")
	require.Contains(t, got, "thread t2: message 2 never consumed\n", "a thread is shown once")
	require.Contains(t, got, "thread t3: message 1 never consumed\n", "two threads at most are shown")
}
