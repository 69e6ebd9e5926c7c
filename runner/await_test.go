package runner_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// The tests of this file came out of the twelfth mutation pass: each
// fails on the mutant its comment names, which no other test caught.

// The handle of a run whose end Await found refused (a later claim
// abandoned the run) keeps core.ErrRunAbandoned, whatever its agent
// returns afterwards. Run waits for the agent before it returns, so the
// handle is read once the agent is done with it. (Mutant: RunHandle.finish
// let a later call replace the error of the first.)
func TestAbandonedAwaitKeepsHandleError(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	errGaveUp := errors.New("the agent gave up")
	asked, proceed := make(chan struct{}), make(chan struct{})
	awaited := make(chan error, 1)
	handles := make(chan *runner.RunHandle, 8)
	a := newProc(t, s, "A", procOpts{
		agent: runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
			req, err := sess.Ask(ctx, "which?")
			if err != nil {
				return err
			}
			close(asked)
			<-proceed
			_, err = sess.Await(context.WithoutCancel(ctx), req)
			awaited <- err
			return errGaveUp
		}),
		cfg: func(c *runner.Config) { c.OnRun = func(h *runner.RunHandle) { handles <- h } },
	})
	b := newProc(t, s, "B", procOpts{skew: ttl + time.Second})
	newThread(t, a.ws, "t", "m1")
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.r.Run(rctx) }()
	h := waitFor(t, handles, "A's run to be planned")
	waitFor(t, asked, "A's agent to ask")

	o, err := b.r.TakeTurn(ctx, "t") // A's lease has lapsed by B's clock: B abandons A's run
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
	close(proceed)
	require.ErrorIs(t, waitFor(t, awaited, "A's Await to return"), core.ErrRunAbandoned)
	cancel()
	require.NoError(t, waitFor(t, done, "A's Run to return, its agent done"))
	err = waitRun(t, h, "A's abandoned run")
	require.ErrorIs(t, err, core.ErrRunAbandoned)
	require.NotErrorIs(t, err, errGaveUp, "the agent's later return replaced the run's error")
}

// ctxBlind is storage that does not look at its calls' contexts: a call
// neither fails nor stops when its context ends.
type ctxBlind struct{ core.Storage }

func (s ctxBlind) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return s.Storage.Update(context.WithoutCancel(ctx), fn)
}

// Await returns its context's error as soon as that context ends, with no
// answer and no storage call to end it: storage that does not look at
// contexts does not keep it waiting. (Mutant: Await went on waiting when
// its context ended; it read the request again and again, for ever.)
func TestAwaitEndsWithItsContext(t *testing.T) {
	stop := make(chan struct{})
	awaited := make(chan error, 1)
	a := newProc(t, ctxBlind{memory.New()}, "A", procOpts{
		agent: runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
			req, err := sess.Ask(ctx, "which?")
			if err != nil {
				return err
			}
			err = awaitUntil(ctx, sess, req, stop)
			awaited <- err
			return err
		}),
	})
	newThread(t, a.ws, "t", "m1")
	o, err := takeTurn(t, a, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o, "the turn ends while its agent waits for the answer")
	close(stop)
	require.ErrorIs(t, waitFor(t, awaited, "Await to return once its context ended"), context.Canceled)
}

// Steering that the run's Ask recorded before Await ended the run counts
// as consumed by the turn, beside the prompt: the report says two. (Mutant:
// the turn, going on from Await's end of the run, did not count the
// steering its run recorded.)
func TestAwaitCountsSteering(t *testing.T) {
	ctx := context.Background()
	stop := make(chan struct{})
	returned := make(chan error, 1)
	var a *proc
	a = newProc(t, memory.New(), "A", procOpts{
		agent: runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
			if _, err := a.ws.Post(ctx, "t", "m2"); err != nil {
				return err
			}
			m, ok, err := sess.Steer(ctx)
			switch {
			case err != nil:
				return err
			case !ok || m.Text != "m2":
				return errors.New("m2 was not given as steering")
			}
			req, err := sess.Ask(ctx, "which?") // records m2 first
			if err != nil {
				return err
			}
			err = awaitUntil(ctx, sess, req, stop)
			returned <- err
			return err
		}),
	})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepOver)
	defer func() {
		close(stop)
		waitFor(t, returned, "the waiting agent to return")
	}()
	o, err := turn.Outcome()
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
	require.Equal(t, core.Seq(2), taken(t, a, "t"), "m1 the prompt, m2 the steering")
	th, err := a.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, []core.Seq{2}, th.Runs()[0].Steering)
	require.Equal(t, 2, turn.Report().Consumed, "the prompt and one message of steering")
}

// awaitUntil waits for req's answer (Session.Await) until ctx ends or stop
// is closed, whichever comes first.
func awaitUntil(ctx context.Context, sess *runner.Session, req core.RequestID, stop <-chan struct{}) error {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-actx.Done():
		}
	}()
	_, err := sess.Await(actx, req)
	return err
}
