package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// A session used wrongly refuses the call and changes nothing: Output with
// a text storage could not keep (before, the run's end failed on it and
// the turn crashed, leaving the run active), Await on a request the run
// did not ask (before, it recorded the run's end first and then waited),
// and every call from a goroutine the agent left behind once it returned
// (before, such an Output was taken silently and dropped, and such an
// Await raced the turn's own record of the run's end).
func TestSessionMisuseRefused(t *testing.T) {
	ctx := context.Background()
	ws := core.NewWorkspace(memory.New(), coretest.NewClock(epoch), core.WithProcess("A"))
	newThread(t, ws, "t", "m1")
	var (
		kept                      *runner.Session
		nul, utf, await, afterErr error
	)
	r, err := runner.New(runner.Config{Workspace: ws, ClaimTTL: ttl,
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			kept = s
			nul, utf = s.Output("bad \x00 byte"), s.Output("bad \xff utf-8")
			actx, cancel := context.WithTimeout(ctx, time.Second) // the old Await waited for an answer
			defer cancel()
			_, await = s.Await(actx, 7)
			afterErr = s.Output("the answer")
			return nil
		})})
	require.NoError(t, err)
	done := make(chan runner.Outcome, 1)
	go func() {
		o, _ := r.TakeTurn(ctx, "t")
		done <- o
	}()
	require.Equal(t, runner.OutcomeDone, waitFor(t, done, "the turn to end"))
	require.ErrorIs(t, nul, core.ErrInvalidArgument, "Output with a NUL byte")
	require.ErrorIs(t, utf, core.ErrInvalidArgument, "Output with invalid UTF-8")
	require.ErrorIs(t, await, core.ErrUnknownRequest, "Await on a request the run did not ask")
	require.NoError(t, afterErr, "the run goes on after the refused Await")

	require.ErrorIs(t, kept.Output("too late"), core.ErrOutOfOrder, "Output after the agent returned")
	_, err = kept.Ask(ctx, "too late?")
	require.ErrorIs(t, err, core.ErrOutOfOrder, "Ask after the agent returned")
	_, _, err = kept.Steer(ctx)
	require.ErrorIs(t, err, core.ErrOutOfOrder, "Steer after the agent returned")
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = kept.Await(actx, 1)
	require.ErrorIs(t, err, core.ErrOutOfOrder, "Await after the agent returned")

	th, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Len(t, th.Runs(), 1)
	require.Equal(t, core.StateEnded, th.Runs()[0].State, "the run ended as the turn recorded it")
	require.Equal(t, "the answer", th.Runs()[0].Output, "the output the agent set before it returned")
	require.Empty(t, th.Requests, "no request was opened")
}
