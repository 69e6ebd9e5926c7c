package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// A turn asked to stop before it claims claims without starting a run
// (no ClaimThenStart), and releases at its plan: it consumes nothing.
// (The eighth mutation pass: a stopping turn that claimed with its plan
// and started the run failed no test.)
func TestTurnStoppedBeforeItsClaimStartsNothing(t *testing.T) {
	ctx := context.Background()
	a := newProc(t, memory.New(), "A", procOpts{})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	turn.Stop()
	for !turn.Step(ctx) {
	}
	o, err := turn.Outcome()
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeStopped, o)
	require.Zero(t, turn.Report().Consumed, "a stopped turn consumed a message")
	require.Empty(t, turn.Report().Runs, "a stopped turn planned a run")
	require.Zero(t, taken(t, a, "t"), "a stopped turn consumed m1")
}

// heldStore holds up its next transaction once it has committed, until
// resumed.
type heldStore struct {
	core.Storage
	mu           sync.Mutex
	held, resume chan struct{}
	calls        int
}

// holdNext arms the store: its next transaction is held up after it
// commits.
func (s *heldStore) holdNext() (held, resume chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held, s.resume = make(chan struct{}), make(chan struct{})
	return s.held, s.resume
}

func (s *heldStore) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	s.mu.Lock()
	held, resume := s.held, s.resume
	s.held, s.resume = nil, nil
	s.calls++
	s.mu.Unlock()
	err := s.Storage.Update(ctx, fn)
	if held != nil {
		close(held)
		<-resume
	}
	return err
}

func (s *heldStore) callsSoFar() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// A renewal while the turn's Release is in flight (committed, not yet
// returned) makes no call: storage would find the lease gone, and the
// turn would end lost when it gave its claim up. (The eighth mutation
// pass: a Renew that did not look at the release in flight failed no
// test.)
func TestRenewDuringReleaseMakesNoCall(t *testing.T) {
	ctx := context.Background()
	s := &heldStore{Storage: memory.New()}
	a := newProc(t, s, "A", procOpts{cfg: func(c *runner.Config) { c.SeparatePlans = true }})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepRelease)
	held, resume := s.holdNext()
	over := make(chan bool, 1)
	go func() { over <- turn.Step(ctx) }()
	waitFor(t, held, "the Release to commit and be held up")
	calls := s.callsSoFar()
	require.NoError(t, turn.Renew(ctx), "a renewal beside the Release")
	require.Equal(t, calls, s.callsSoFar(), "a renewal beside the Release went to storage")
	close(resume)
	require.True(t, waitFor(t, over, "the Release's step to return"), "the turn is over after its Release")
	o, err := turn.Outcome()
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
}

// A run's end recorded with the next run's start (RunEndThenStart, with a
// backlog behind the next prompt) lets renewals start again: the turn
// held them back for the transaction, which could have released the
// claim, and it did not. A renewal during the next run extends the lease.
// (The ninth mutation pass: a turn that left its renewals held back after
// RunEndThenStart started a run, its claim left to lapse under a running
// agent, failed no test.)
func TestRenewAfterRunEndThenStart(t *testing.T) {
	ctx := context.Background()
	a := newProc(t, memory.New(), "A", procOpts{})
	newThread(t, a.ws, "t", "m1", "m2", "m3", "m4", "m5")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepRunEnd)
	require.False(t, turn.Step(ctx))
	require.Equal(t, runner.StepAgent, turn.Next(), "RunEndThenStart started the next run")
	require.Equal(t, core.Seq(2), taken(t, a, "t"))

	before, err := a.ws.Lease(ctx, "t")
	require.NoError(t, err)
	a.clock.Advance(time.Second)
	require.NoError(t, turn.Renew(ctx))
	after, err := a.ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, before.Holder, after.Holder)
	require.Equal(t, before.ExpiresAt.Add(time.Second), after.ExpiresAt, "the renewal during the next run did not extend the claim")
	stepTo(t, turn, runner.StepOver)
}
