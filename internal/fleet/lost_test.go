package fleet

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/postgres"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// openStore opens a Store on a schema of its own, named from prefix, on
// the real PostgreSQL server of DATABASE_URL, dropped when the test ends;
// it returns a context with the test's deadline and the server's URL.
func openStore(t *testing.T, prefix string, keepTrace bool) (context.Context, *postgres.Store, string) {
	t.Helper()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: this test needs a real PostgreSQL server; run it through scripts/with-postgres (scripts/with-postgres go test ./internal/fleet)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st, err := postgres.Open(ctx, url, postgres.Options{Schema: fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()), KeepTrace: keepTrace})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = st.DropSchema(context.WithoutCancel(ctx))
		st.Close()
	})
	return ctx, st, url
}

// A message no write consumed is shown with its thread's row and log as
// storage has them, and only the first threads' in full: what a liveness
// failure seen once leaves to read after its cluster is gone.
func TestDescribeLost(t *testing.T) {
	ctx, st, url := openStore(t, "tclost", true)
	ws := core.NewWorkspace(st, core.SystemClock{}, core.WithTracer(tracecheck.NewHistoryWriter(io.Discard)))
	for _, id := range []core.ThreadID{"t1", "t2", "t3"} {
		require.NoError(t, ws.CreateThread(ctx, id))
		for _, text := range []string{"one", "two"} {
			_, err := ws.Post(ctx, id, text)
			require.NoError(t, err)
		}
	}
	_, _, _, err := ws.ClaimThenStart(ctx, "t1", "w1", time.Minute)
	require.NoError(t, err)

	r := &run{schema: st.Schema(), cluster: &cluster{url: url}}
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

// Once the faults have ended, the fleet looks at the drain again, and a
// drain it saw while they ran does not stand for it: storage that loses
// commits can take back an acknowledged consumption after the drain was
// seen (here, a message whose consumption it lost, with no runner left to
// consume it again). Trusting the drain seen, the fleet counted such a
// message lost in CI.
func TestSettleLooksAgain(t *testing.T) {
	ctx, st, _ := openStore(t, "tcsettle", false)
	ws := core.NewWorkspace(st, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t1"))
	var out strings.Builder
	r := &run{store: st, out: &out, cfg: Config{Timeout: 400 * time.Millisecond}}

	drained, err := r.settle(ctx, true)
	require.NoError(t, err)
	require.True(t, drained, "no work")
	require.Empty(t, out.String())

	_, err = ws.Post(ctx, "t1", "taken back")
	require.NoError(t, err)
	drained, err = r.settle(ctx, true)
	require.NoError(t, err)
	require.False(t, drained, "the drain seen before is not the answer: storage has work")
	require.Contains(t, out.String(), "work came back after the faults ended")
}
