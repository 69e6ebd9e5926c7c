package runner_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// runAgent runs the agent made for the workspace on a fresh thread with one message, on memory and
// the machine's clock, until stop says so or the deadline passes, and
// returns the thread.
func runAgent(t *testing.T, agent func(ws *core.Workspace) runner.AgentFunc, stop func(*core.Thread) bool, deadline time.Duration) *core.Thread {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	ws := core.NewWorkspace(memory.New(), core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err := ws.Post(ctx, "t", "hello")
	require.NoError(t, err)
	r, err := runner.New(runner.Config{Workspace: ws, Agent: agent(ws), ClaimTTL: 10 * time.Second, PollEvery: 5 * time.Millisecond})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for ctx.Err() == nil {
		th, err := ws.Thread(context.Background(), "t")
		require.NoError(t, err)
		if stop(th) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended"))
	th, err := ws.Thread(context.Background(), "t")
	require.NoError(t, err)
	return th
}

// The loop: an agent that answered the person by posting to the
// thread made its answer the next prompt, run after run (9,354 runs in 2 s
// on memory). An agent that answers through Session.Output causes one
// run, whose output the thread shows, and leaves nothing to consume; the
// same agent posting its answer loops (the contrast shows the test can
// tell).
func TestOutputIsNoPrompt(t *testing.T) {
	replies := func(*core.Workspace) runner.AgentFunc {
		return func(ctx context.Context, s *runner.Session) error {
			return s.Output("you said " + s.Delivered.Prompt.Text)
		}
	}
	th := runAgent(t, replies, func(*core.Thread) bool { return false }, 500*time.Millisecond)
	require.Len(t, th.Runs(), 1, "an agent that replies through its Session causes one run")
	require.Equal(t, core.StateEnded, th.Runs()[0].State)
	require.Equal(t, "you said hello", th.Runs()[0].Output, "the person sees the reply through the thread")
	require.Len(t, th.Messages, 1, "the reply is no message")
	require.False(t, th.Unconsumed(), "nothing is left to consume")

	loops := func(ws *core.Workspace) runner.AgentFunc {
		return func(ctx context.Context, s *runner.Session) error {
			_, err := ws.Post(ctx, s.Delivered.Claim.Thread, "you said "+s.Delivered.Prompt.Text)
			return err
		}
	}
	th = runAgent(t, loops, func(th *core.Thread) bool { return len(th.Runs()) >= 10 }, 10*time.Second)
	require.GreaterOrEqual(t, len(th.Runs()), 10, "waited 10 s for the posting agent's loop: its own posts are its next prompts")
}

// A Config without a Logger logs to slog.Default(), so that a failed turn
// (Warn) is not silent.
func TestLoggerDefault(t *testing.T) {
	ws := core.NewWorkspace(memory.New(), core.SystemClock{})
	r, err := runner.New(runner.Config{Workspace: ws, Agent: runner.AgentFunc(func(context.Context, *runner.Session) error { return nil })})
	require.NoError(t, err)
	require.Same(t, slog.Default(), r.Config().Logger)
}
