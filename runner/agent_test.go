package runner_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// An agent that waits for an answer outlives its turn, but not its
// runner: once Run's context ends, the waiting agent's context ends, its
// Await returns the cancellation, and Run returns. (The eighth mutation
// pass: an Await that left the agent's context in the turn's hands, whose
// next run's context then replaced it uncancelled, failed no test; Run
// waited for the agent for ever.)
func TestAwaitEndsWhenRunnerStops(t *testing.T) {
	asked, awaited := make(chan struct{}), make(chan error, 1)
	turns := make(chan runner.TurnReport, 8)
	a := newProc(t, memory.New(), "A", procOpts{
		agent: runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
			req, err := sess.Ask(ctx, "which environment?")
			if err != nil {
				return err
			}
			close(asked)
			actx, cancel := context.WithTimeout(ctx, 3*waitLimit) // past the test's own wait for Run
			defer cancel()
			_, err = sess.Await(actx, req)
			awaited <- err
			return err
		}),
		cfg: func(c *runner.Config) { c.OnTurn = func(r runner.TurnReport) { turns <- r } },
	})
	newThread(t, a.ws, "t", "deploy?")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.r.Run(ctx) }()
	waitFor(t, asked, "the agent to ask")
	rep := waitFor(t, turns, "the turn to end while its agent awaits the answer")
	require.Equal(t, runner.OutcomeDone, rep.Outcome, "%v", rep.Err)
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended, the agent still awaiting"))
	require.ErrorIs(t, waitFor(t, awaited, "the waiting agent's Await to return"), context.Canceled)
	require.Equal(t, core.StateEnded, readRun(t, a, "t").State)
}

// readRun returns the thread's first run.
func readRun(t *testing.T, p *proc, id core.ThreadID) core.Run {
	t.Helper()
	th, err := p.ws.Thread(context.Background(), id)
	require.NoError(t, err)
	return th.Runs()[0]
}
