package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
)

// TestRunnerHeapGrowsWithHistoryOnly: a runner on PostgreSQL that has
// started thousands of runs keeps, of what it did, no more than the
// threads' folded states its Store caches (about 210 to 260 bytes a run
// and its prompt, BenchmarkLongThread). The Store's cache once kept every state a
// thread had had, each with its own copy of the runs: 9.3 KB a message
// here, and growing with the threads' length (cache.go, rights), against
// about 300 since.
func TestRunnerHeapGrowsWithHistoryOnly(t *testing.T) {
	const (
		threads = 20
		first   = 20 * threads  // messages before the first measure
		second  = 100 * threads // messages between the two
		perMsg  = 1500          // bytes of heap a message may leave
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	mine := openStore(t, poolConfig(t, "tc-heap-runner"), schema)
	poster := core.NewWorkspace(openStore(t, poolConfig(t, "tc-heap-poster"), schema), core.SystemClock{})
	ids := make([]core.ThreadID, threads)
	for i := range ids {
		ids[i] = core.ThreadID(fmt.Sprintf("t%02d", i))
		require.NoError(t, poster.CreateThread(ctx, ids[i]))
	}
	var started atomic.Int64
	r, err := runner.New(runner.Config{
		Workspace: core.NewWorkspace(mine, core.SystemClock{}, core.WithProcess("runner")),
		Agent: runner.AgentFunc(func(context.Context, *runner.Session) error {
			started.Add(1)
			return nil
		}),
		ClaimTTL:  30 * time.Second,
		PollEvery: 5 * time.Millisecond,
	})
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()

	// post posts n messages, one to each thread at a time, and waits for
	// their runs to start before the next round: each message a turn of
	// its own, as at a steady rate, where a turn's claim and its run's end
	// each leave the thread a new cache entry.
	post := func(n int, what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for i := 0; i < n; i += threads {
			goal := started.Load() + threads
			for _, id := range ids {
				_, err := poster.Post(ctx, id, "m")
				require.NoError(t, err)
			}
			for started.Load() < goal {
				if time.Now().After(deadline) {
					t.Fatalf("%s: %d of %d runs started within a minute", what, started.Load(), goal)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	post(first, "the first messages")
	before := liveHeap()
	post(second, "the messages between the measures")
	after := liveHeap()
	grew := float64(after-before) / second
	t.Logf("live heap %d B, then %d B after %d messages more: %.0f B a message", before, after, second, grew)
	require.LessOrEqualf(t, grew, float64(perMsg), "the runner's heap grew %.0f B a message over %d messages (at most %d)", grew, second, perMsg)

	cancel()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the runner did not return within 30s of its context's end")
	}
}
