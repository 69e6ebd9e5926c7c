package runner_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// The tests of this file came out of the twelfth mutation pass: each
// fails on the mutant its comment names, which no other test caught.

// hookStore calls its hook, once, at the start of its next transaction.
type hookStore struct {
	core.Storage
	mu   sync.Mutex
	hook func()
}

func (s *hookStore) setHook(h func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

func (s *hookStore) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	s.mu.Lock()
	h := s.hook
	s.hook = nil
	s.mu.Unlock()
	if h != nil {
		h()
	}
	return s.Storage.Update(ctx, fn)
}

// A turn stopped while its claim is in flight (the claim and its plan
// commit all the same) runs the planned run's agent with its context
// cancelled already, and then releases the thread. (Mutant: stepClaim did
// not cancel the new run context of a turn already stopping.)
func TestStopDuringClaimCancelsAgent(t *testing.T) {
	ctx := context.Background()
	s := &hookStore{Storage: memory.New()}
	ran := make(chan error, 1)
	a := newProc(t, s, "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, _ *runner.Session) error {
		ran <- ctx.Err()
		return nil
	})})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	s.setHook(turn.Stop) // Stop lands while the claim's transaction is in flight
	stepTo(t, turn, runner.StepOver)
	require.ErrorIs(t, waitFor(t, ran, "the agent of the run the claim planned"), context.Canceled,
		"the agent of a stopped turn ran with a live context")
	o, err := turn.Outcome()
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeStopped, o)
	l, err := a.ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Lease{}, l, "the stopped turn did not release the thread")
}

// The agent's context ends with its turn: a goroutine the agent left
// behind, waiting on it, is let go once the turn is over. (Mutant: the
// turn's end did not cancel the run context.)
func TestAgentContextEndsWithTurn(t *testing.T) {
	released := make(chan struct{})
	a := newProc(t, memory.New(), "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, _ *runner.Session) error {
		go func() {
			<-ctx.Done()
			close(released)
		}()
		return nil
	})})
	newThread(t, a.ws, "t", "m1")
	o, err := takeTurn(t, a, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
	waitFor(t, released, "the agent's context to end with its turn")
}

// syncBuffer is a log sink safe for the runner's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}

// newWarnLogger logs to w at Warn and above.
func newWarnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// A failed turn is logged at Warn, a turn that did its work at Debug: a
// Logger at Warn sees the one and not the other. (Mutant: report logged a
// failed turn at Debug.)
func TestFailedTurnLoggedAtWarn(t *testing.T) {
	logs := &syncBuffer{}
	a := newProc(t, memory.New(), "A", procOpts{cfg: func(c *runner.Config) {
		c.Logger = newWarnLogger(logs)
	}})
	newThread(t, a.ws, "t", "m1")
	o, err := takeTurn(t, a, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
	require.NotContains(t, logs.String(), "turn over", "a turn that did its work was logged at Warn")

	o, err = takeTurn(t, a, "no-such-thread")
	require.ErrorIs(t, err, core.ErrUnknownThread)
	require.Equal(t, runner.OutcomeError, o)
	require.Contains(t, logs.String(), "level=WARN msg=\"turn over\"", "a failed turn was not logged at Warn")
	require.Contains(t, logs.String(), "outcome=error")
}

// Failed holds for exactly the fenced, lost and error outcomes; and a
// lost turn, a failed one, is logged at Warn. (Mutant: Failed left out
// OutcomeLost.)
func TestLostTurnIsFailed(t *testing.T) {
	for o, failed := range map[runner.Outcome]bool{
		runner.OutcomeBusy: false, runner.OutcomeDone: false, runner.OutcomeStopped: false, runner.OutcomeYielded: false,
		runner.OutcomeFenced: true, runner.OutcomeLost: true, runner.OutcomeError: true,
	} {
		require.Equal(t, failed, o.Failed(), "%s.Failed()", o)
	}

	// A's run is abandoned by B, which took the thread once A's lease
	// lapsed: A's end is refused, and its turn is lost.
	ctx := context.Background()
	s := memory.New()
	logs := &syncBuffer{}
	a := newProc(t, s, "A", procOpts{cfg: func(c *runner.Config) { c.Logger = newWarnLogger(logs) }})
	b := newProc(t, s, "B", procOpts{skew: ttl + time.Second})
	newThread(t, a.ws, "t", "m1")
	ta := a.r.NewTurn("t")
	stepTo(t, ta, runner.StepRunEnd)
	o, err := b.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
	stepTo(t, ta, runner.StepOver)
	o, err = ta.Outcome()
	require.ErrorIs(t, err, core.ErrRunAbandoned)
	require.Equal(t, runner.OutcomeLost, o)
	require.Contains(t, logs.String(), "level=WARN msg=\"turn over\"", "a lost turn was not logged at Warn")
	require.Contains(t, logs.String(), "outcome=lost")
}

// stallOnce blocks its next transaction, once armed, until the
// transaction's context ends; it then returns the context's error,
// having written nothing.
type stallOnce struct {
	core.Storage
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
}

func (s *stallOnce) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

func (s *stallOnce) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	s.mu.Lock()
	armed := s.armed
	s.armed = false
	s.mu.Unlock()
	if armed {
		close(s.entered)
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Storage.Update(ctx, fn)
}

// A turn whose storage call hangs after TakeTurn's context ended is cut
// off ShutdownGrace later, by the runner's clock: TakeTurn returns, the
// call's error its turn's. (Mutant: the grace timer did not cancel the
// turn's storage context.)
func TestShutdownGraceCutsOffStorage(t *testing.T) {
	const grace = time.Second // shorter than RenewEvery (ttl/3): no renewal comes due
	s := &stallOnce{Storage: memory.New(), entered: make(chan struct{})}
	a := newProc(t, s, "A", procOpts{
		agent: runner.AgentFunc(func(ctx context.Context, _ *runner.Session) error {
			<-ctx.Done()
			s.arm() // the run's end hangs
			return ctx.Err()
		}),
		cfg: func(c *runner.Config) { c.ShutdownGrace = grace },
	})
	newThread(t, a.ws, "t", "m1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		o   runner.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, err := a.r.TakeTurn(ctx, "t")
		done <- result{o, err}
	}()
	waitUntil(t, func() bool { return a.clock.Waiters() == 1 }, "the turn's renewal timer")
	cancel()
	waitFor(t, s.entered, "the run's end to reach storage and hang")
	waitUntil(t, func() bool { return a.clock.Waiters() == 2 }, "the shutdown grace timer beside the renewal timer")
	a.clock.Advance(grace)
	res := waitFor(t, done, "TakeTurn to return once ShutdownGrace cut its storage call off")
	require.Equal(t, runner.OutcomeError, res.o)
	require.ErrorIs(t, res.err, context.Canceled)
}

// Run, stopping with a round open whose Crash storage cannot answer,
// tries its Crash every PollEvery only until ShutdownGrace has passed by
// its clock, and then returns with the round still open. (Mutant:
// endOpenRounds' grace timer did not cut the tries off; Run never
// returned.)
func TestStopGivesUpOpenRoundAfterGrace(t *testing.T) {
	const poll = ttl / 10
	a, f, _ := roundLeftOpen(t, func(c *runner.Config) { c.PollEvery, c.ShutdownGrace = poll, 3*poll })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var returned atomic.Bool
	done := make(chan error, 1)
	go func() {
		err := a.r.Run(ctx)
		returned.Store(true)
		done <- err
	}()
	waitUntil(t, func() bool { return a.clock.Waiters() > 0 }, "Run's first look, storage down, to end and Run to wait")
	before := f.refusedSoFar()
	cancel() // storage stays down
	waitUntil(t, func() bool { return f.refusedSoFar() > before }, "Run's first try at the Crash as it stops")
	waitUntil(t, func() bool {
		a.clock.Advance(poll)
		return returned.Load()
	}, "Run to give its open round up ShutdownGrace after it began stopping")
	require.NoError(t, waitFor(t, done, "Run's result"))
	require.Equal(t, 1, a.r.OpenRounds(), "the round storage never answered for is still open")
}

// unknownWhileDown is flaky storage whose calls, while it is down, fail
// with a commit that is unknown rather than a plain error: the connection
// broke mid-call.
type unknownWhileDown struct{ *flaky }

func (u unknownWhileDown) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	u.mu.Lock()
	down := u.down
	u.mu.Unlock()
	if down {
		return fmt.Errorf("connection reset: %w", core.ErrCommitUnknown)
	}
	return u.flaky.Update(ctx, fn)
}

// A claim that fails with core.ErrCommitUnknown before it was even tried
// (the workspace first ends the thread's open round, and storage cannot
// answer that) leaves no round of its own open: the claim it returned is
// no round's, and its Crash says so. Once storage is back, TakeTurns ends
// the one round that was open and leaves none. (Mutant: roundEnded did
// not count core.ErrInvalidArgument as a round ended; the empty claim
// stayed open for ever.)
func TestClaimInDoubtBeforeItsClaimLeavesNoRound(t *testing.T) {
	ctx := context.Background()
	f := &flaky{Store: memory.New()}
	a := newProc(t, unknownWhileDown{f}, "A", procOpts{tracer: &tracecheck.Recorder{}}) // traced: a Crash reads storage
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepRunStart)
	f.set(true, false) // the start commits unknown, then storage goes down
	stepTo(t, turn, runner.StepOver)
	require.Equal(t, 1, a.r.OpenRounds(), "the round whose start is in doubt")

	o, err := a.r.TakeTurn(ctx, "t")
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.Equal(t, runner.OutcomeError, o)
	require.Equal(t, 1, a.r.OpenRounds(), "a claim that opened no round left one open")

	f.set(false, false)
	require.NoError(t, a.r.TakeTurns(ctx))
	require.Equal(t, 0, a.r.OpenRounds(), "a round stayed open once storage was back")
}

// TakeTurns stops taking turns once its context ends, and returns the
// context's error: the thread after the one whose turn ended it is left
// alone. (Mutant: TakeTurns did not look at its context between turns,
// and returned nil.)
func TestTakeTurnsStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newProc(t, memory.New(), "A", procOpts{agent: runner.AgentFunc(func(context.Context, *runner.Session) error {
		cancel() // the first run stops the runner
		return nil
	})})
	newThread(t, a.ws, "t1", "m1")
	newThread(t, a.ws, "t2", "m1")
	require.ErrorIs(t, a.r.TakeTurns(ctx), context.Canceled)
	require.Equal(t, core.Seq(1), taken(t, a, "t1")+taken(t, a, "t2"), "one turn, one message, and no more")
}

// A renewal beside a call whose commit storage could not confirm (the
// round allows only its Crash now, and the turn has not heard yet) makes
// nothing of core's refusal: it returns nil, as a renewal after the turn
// does. Here the renewal runs in the window itself, from the workspace's
// report of the doubt. (Mutant: Renew returned core.ErrOutOfOrder and
// core.ErrRoundOver, which the renewal timer logs as a failed renewal.)
func TestRenewBesideCallInDoubtReturnsNil(t *testing.T) {
	ctx := context.Background()
	u := &unknownCommit{Storage: memory.New()}
	clock := coretest.NewClock(epoch)
	var (
		turn     *runner.Turn
		renewed  int
		renewErr error
	)
	ws := core.NewWorkspace(u, clock, core.WithProcess("A"), core.WithDoubts(func(d core.Doubt) {
		if d.Outcome == core.DoubtPending && turn != nil {
			renewed++
			renewErr = turn.Renew(ctx)
		}
	}))
	r, err := runner.New(runner.Config{
		Workspace: ws, ClaimTTL: ttl,
		Agent:     runner.AgentFunc(func(context.Context, *runner.Session) error { return nil }),
		NewHolder: func() (core.Holder, error) { return "A-1", nil },
	})
	require.NoError(t, err)
	newThread(t, ws, "t", "m1")
	turn = r.NewTurn("t")
	writeInDoubt(t, turn, u, runner.StepRunStart)
	require.Equal(t, 1, renewed, "the workspace reported the start in doubt once")
	require.NoError(t, renewErr, "a renewal beside the call in doubt")
}
