package runner_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

var errDown = errors.New("storage unreachable")

// flaky is memory storage that can fail: once armed, its next transaction
// commits but reports its outcome unknown, and storage then goes down
// (every call fails) until brought back.
type flaky struct {
	*memory.Store
	mu          sync.Mutex
	armed, down bool
	refused     int // transactions refused while down
}

// refusedSoFar returns how many transactions failed while storage was down.
func (f *flaky) refusedSoFar() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused
}

func (f *flaky) set(armed, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.down = armed, down
}

func (f *flaky) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	f.mu.Lock()
	armed, down := f.armed, f.down
	f.armed = false
	if down {
		f.refused++
	}
	f.mu.Unlock()
	if down {
		return errDown
	}
	if err := f.Store.Update(ctx, fn); err != nil || !armed {
		return err
	}
	f.set(false, true)
	return fmt.Errorf("commit: %w", core.ErrCommitUnknown)
}

func (f *flaky) PendingThreads(ctx context.Context) ([]core.PendingThread, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return nil, errDown
	}
	return f.Store.PendingThreads(ctx)
}

// traced counts the lines of action x that rec kept.
func traced(rec *tracecheck.Recorder, x core.Action) int {
	n := 0
	for _, ev := range rec.Lines() {
		if ev.Action == x {
			n++
		}
	}
	return n
}

// roundLeftOpen makes a runner (configured by cfg) over flaky storage
// whose turn's RunStart had a commit it was not told of, and whose Crash
// storage, gone down, could not answer: a round left open.
func roundLeftOpen(t *testing.T, cfg func(*runner.Config)) (*proc, *flaky, *tracecheck.Recorder) {
	t.Helper()
	f := &flaky{Store: memory.New()}
	rec := &tracecheck.Recorder{}
	a := newProc(t, f, "A", procOpts{tracer: rec, cfg: cfg})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepRunStart)
	f.set(true, false)
	require.True(t, turn.Step(context.Background()), "the turn goes on after a RunStart whose commit is unknown")
	o, err := turn.Outcome()
	require.Equal(t, runner.OutcomeError, o)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.False(t, traced(rec, core.ActionCrash) > 0, "a Crash was traced while storage was down")
	require.Equal(t, 1, a.r.OpenRounds(), "the round left open is not recorded")
	return a, f, rec
}

// A round whose RunStart's commit is unknown, and whose Crash storage
// could not answer (it went down), stays open while storage is down; once
// storage is back, Run ends it with its Crash line at a later look, at
// most once every PollEvery, without the thread being claimed again.
func TestCommitUnknownRoundEndedOnceStorageBack(t *testing.T) {
	const poll = ttl / 10
	wake := make(chan core.ThreadID, 1)
	a, f, rec := roundLeftOpen(t, func(c *runner.Config) { c.PollEvery, c.Wake = poll, wake })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	done := make(chan error)
	go func() { done <- a.r.Run(ctx) }()
	waitUntil(t, func() bool { return a.clock.Waiters() > 0 }, "Run's first look, storage down, to end and Run to wait")
	require.Equal(t, 1, a.r.OpenRounds(), "a round was forgotten while storage was down")

	f.set(false, false)
	woken(t, a, wake) // storage is back, but the retry is not due before PollEvery
	require.Equal(t, 1, a.r.OpenRounds(), "Run tried the Crash again sooner than PollEvery")
	require.False(t, traced(rec, core.ActionCrash) > 0)

	a.clock.Advance(poll)
	waitUntil(t, func() bool { return a.r.OpenRounds() == 0 && traced(rec, core.ActionCrash) > 0 }, "Run to end the open round with its Crash once storage is back")
	require.Equal(t, 1, traced(rec, core.ActionClaim), "the round was ended by a claim of the thread, not by Run's retry")
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
}

// A round still open when Run stops gets a last try at its Crash, due or
// not: storage is back, so Run returns with no round open and the Crash
// traced.
func TestOpenRoundEndedWhenRunStops(t *testing.T) {
	a, f, rec := roundLeftOpen(t, func(c *runner.Config) { c.PollEvery = ttl / 10 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	done := make(chan error)
	go func() { done <- a.r.Run(ctx) }()
	waitUntil(t, func() bool { return a.clock.Waiters() > 0 }, "Run's first look, storage down, to end and Run to wait")
	f.set(false, false) // storage is back; the retry is not due for PollEvery
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
	require.Equal(t, 0, a.r.OpenRounds(), "Run returned with a round open")
	require.Equal(t, 1, traced(rec, core.ActionCrash))
}

// A round still open when Run stops, while storage is still down: the
// first try at its Crash fails, and Run keeps trying every PollEvery
// within ShutdownGrace, so once storage is back it returns with no round
// open and the Crash traced. Before, the one try at stop failed and Run
// returned with the round open (the fleet's "open when the process
// stopped").
func TestOpenRoundEndedWhenStorageBackDuringStop(t *testing.T) {
	const poll = ttl / 10
	a, f, rec := roundLeftOpen(t, func(c *runner.Config) { c.PollEvery, c.ShutdownGrace = poll, 1000*poll })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	done := make(chan error)
	go func() { done <- a.r.Run(ctx) }()
	waitUntil(t, func() bool { return a.clock.Waiters() > 0 }, "Run's first look, storage down, to end and Run to wait")
	before := f.refusedSoFar()
	cancel() // storage still down: the try at stop fails
	waitUntil(t, func() bool { return f.refusedSoFar() > before }, "Run's first try at the Crash as it stops")
	f.set(false, false)
	waitUntil(t, func() bool {
		a.clock.Advance(poll)
		return a.r.OpenRounds() == 0
	}, "Run's later try at the Crash, storage back, to end the round")
	require.NoError(t, waitFor(t, done, "Run to return once its round ended"), "a stopped runner returns nil")
	require.Equal(t, 1, traced(rec, core.ActionCrash))
}

// A renewal that storage failed, writing nothing (not one whose outcome
// is unknown), is tried again at the next tick: the lease is still the
// claim's, and the turn keeps it. Before, the first failure ended the
// renewals for the rest of the turn, silently, and the lease lapsed
// under a live run.
func TestRenewalGoesOnAfterAFailure(t *testing.T) {
	f := &flaky{Store: memory.New()}
	started, release := make(chan struct{}), make(chan struct{})
	a := newProc(t, f, "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, _ *runner.Session) error {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})})
	newThread(t, a.ws, "t", "m1")
	ctx := context.Background()
	done := make(chan runner.Outcome, 1)
	go func() {
		o, _ := a.r.TakeTurn(ctx, "t")
		done <- o
	}()
	waitFor(t, started, "the agent to start")
	every := a.r.Config().RenewEvery
	expiry := func() time.Time {
		l, err := a.ws.Lease(ctx, "t")
		require.NoError(t, err)
		return l.ExpiresAt
	}
	first := expiry()

	f.set(false, true) // storage down: the renewal fails, writing nothing
	before := f.refusedSoFar()
	waitUntil(t, func() bool { return a.clock.Waiters() > 0 }, "the renewal timer")
	a.clock.Advance(every)
	waitUntil(t, func() bool { return f.refusedSoFar() > before }, "the renewal storage refused")
	require.Equal(t, first, func() time.Time { f.set(false, false); return expiry() }(), "the failed renewal wrote nothing")

	waitUntil(t, func() bool {
		if !expiry().After(first) {
			if a.clock.Waiters() > 0 {
				// The next tick, once its timer waits: time moved on
				// while none waited would pile up past MaxTurnDuration
				// (the turn would then yield, not end done).
				a.clock.Advance(every / 4)
			}
			return false
		}
		return true
	}, "the renewal after the failed one to extend the lease")
	close(release)
	require.Equal(t, runner.OutcomeDone, waitFor(t, done, "the turn to end"))
}

// A call of the round whose commit is unknown, made beside the turn's
// steps (the agent's Ask, a renewal), leaves the round to its Crash: the
// turn makes no other call of it (core would refuse one as out of order,
// which only a defect explains) and ends OutcomeError with that call's
// error, its Crash traced. (The call committed: its line is storage's to
// give, as the simulations' faults give it, so the recorder's lines alone
// are not the whole trace.)
func TestConcurrentCallInDoubtEndsTheRound(t *testing.T) {
	for _, via := range []string{"ask", "renew"} {
		t.Run(via, func(t *testing.T) {
			ctx := context.Background()
			s := memory.New()
			u := &unknownCommit{Storage: s}
			rec := &tracecheck.Recorder{}
			var turn *runner.Turn
			var callErr error
			a := newProc(t, u, "A", procOpts{tracer: rec, agent: runner.AgentFunc(func(ctx context.Context, sn *runner.Session) error {
				u.arm()
				if via == "ask" {
					_, callErr = sn.Ask(ctx, "which one?")
				} else {
					callErr = turn.Renew(ctx)
				}
				return nil
			})})
			newThread(t, a.ws, "t", "m1")
			turn = a.r.NewTurn("t")
			stepTo(t, turn, runner.StepAgent)
			calls := u.count()
			for !turn.Step(ctx) {
			}
			require.ErrorIs(t, callErr, core.ErrCommitUnknown)
			o, err := turn.Outcome()
			require.Equal(t, runner.OutcomeError, o, "%v", err)
			require.ErrorIs(t, err, core.ErrCommitUnknown)
			require.NotErrorIs(t, err, core.ErrOutOfOrder)
			require.Equal(t, 2, u.count()-calls, "the call in doubt and the Crash's read of its outcome, nothing between")
			require.Equal(t, 1, traced(rec, core.ActionCrash))
			require.Zero(t, traced(rec, core.ActionRunEnd), "the run's end was recorded after a call in doubt")
		})
	}
}

// A round left open that a claim of its thread by the runner's workspace
// ended meanwhile (Workspace.Claim ends the thread's open round first) is
// over: the runner's retry finds its Crash refused as ErrRoundOver, and
// forgets the round rather than try again at every look.
func TestOpenRoundEndedByAClaimIsForgotten(t *testing.T) {
	ctx := context.Background()
	a, f, rec := roundLeftOpen(t, nil)
	f.set(false, false)  // storage is back
	a.clock.Advance(ttl) // the lapsed claim's lease has expired
	o, err := a.r.TakeTurn(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, runner.OutcomeDone, o)
	require.Equal(t, 1, traced(rec, core.ActionCrash), "the claim ended the open round with its Crash")
	require.NoError(t, a.r.TakeTurns(ctx))
	require.Equal(t, 0, a.r.OpenRounds(), "the round a claim ended is still open")
	require.Equal(t, 1, traced(rec, core.ActionCrash))
}

// A renewal whose commit is unknown cancels the running agent's context:
// only the round's Crash may follow it, so the turn must not wait on an
// agent working under a claim it has given up. The turn then ends
// OutcomeError with the renewal's error, its Crash traced and its run's
// end not recorded.
func TestRenewalInDoubtCancelsAgent(t *testing.T) {
	ctx := context.Background()
	u := &unknownCommit{Storage: memory.New()}
	rec := &tracecheck.Recorder{}
	started := make(chan struct{})
	a := newProc(t, u, "A", procOpts{tracer: rec, agent: runner.AgentFunc(func(ctx context.Context, _ *runner.Session) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepAgent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !turn.Step(ctx) {
		}
	}()
	waitFor(t, started, "the agent to start")
	u.arm()
	require.ErrorIs(t, turn.Renew(ctx), core.ErrCommitUnknown)
	waitFor(t, done, "the turn to end once the renewal in doubt cancelled the agent's context")
	o, err := turn.Outcome()
	require.Equal(t, runner.OutcomeError, o, "%v", err)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.Equal(t, 1, traced(rec, core.ActionCrash))
	require.Zero(t, traced(rec, core.ActionRunEnd), "the run's end was recorded after a renewal in doubt")
}

// heldDoubts is storage that reports the commits it is told to as unknown
// (after committing them), naming each by the report given, and that can
// hold its next transaction back before it begins.
type heldDoubts struct {
	core.Storage
	mu      sync.Mutex
	hold    chan struct{} // the next Update closes held and waits for it
	held    chan struct{}
	reports []string // the next commits, reported unknown in this order
}

func (s *heldDoubts) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	s.mu.Lock()
	hold, held := s.hold, s.held
	s.hold = nil
	s.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
	}
	err := s.Storage.Update(ctx, fn)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || len(s.reports) == 0 {
		return err
	}
	report := s.reports[0]
	s.reports = s.reports[1:]
	return errors.Join(core.ErrCommitUnknown, errors.New(report))
}

// Two calls of a round in doubt, one after the other: the turn keeps the
// first's error, and gives its round up with it. Here a renewal begun
// before the agent's Ask is held back until the Ask's commit was reported
// unknown; then its own is. The run's end makes no call and the turn
// crashes, OutcomeError with the Ask's error. (The ninth mutation pass: a
// turn that kept the last call in doubt's error failed no test.)
func TestTurnKeepsTheFirstCallInDoubt(t *testing.T) {
	ctx := context.Background()
	s := &heldDoubts{Storage: memory.New()}
	started, ask := make(chan struct{}), make(chan struct{})
	a := newProc(t, s, "A", procOpts{agent: runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
		close(started)
		<-ask
		_, err := sess.Ask(ctx, "which one?")
		return err
	})})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepAgent)
	stepped := make(chan bool, 1)
	go func() { stepped <- turn.Step(ctx) }()
	waitFor(t, started, "the agent to start")

	hold, held := make(chan struct{}), make(chan struct{})
	s.mu.Lock()
	s.hold, s.held = hold, held
	s.reports = []string{"the Ask's commit reset", "the renewal's commit reset"}
	s.mu.Unlock()
	renewed := make(chan error, 1)
	go func() { renewed <- turn.Renew(ctx) }()
	waitFor(t, held, "the renewal's transaction to be held back")
	close(ask)
	require.False(t, waitFor(t, stepped, "the agent's step to end once its Ask was in doubt"))
	close(hold)
	err := waitFor(t, renewed, "the held renewal to return")
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.ErrorContains(t, err, "the renewal's commit reset")

	stepTo(t, turn, runner.StepOver)
	o, err := turn.Outcome()
	require.Equal(t, runner.OutcomeError, o, "%v", err)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.ErrorContains(t, err, "the Ask's commit reset", "the turn crashed with the second call's doubt, not the first's")
}

// cancelledInCommit is storage whose armed transaction commits, and then
// ends the caller's context and reports its commit unknown: a COMMIT cut
// off as the context ended.
type cancelledInCommit struct {
	core.Storage
	armed  bool
	cancel context.CancelFunc
}

func (s *cancelledInCommit) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	err := s.Storage.Update(ctx, fn)
	if s.armed && err == nil {
		s.armed = false
		s.cancel()
		return errors.Join(core.ErrCommitUnknown, context.Canceled)
	}
	return err
}

// A write in doubt because the step's context ended in its commit is
// given up all the same: the turn's Crash reads on a context that has not
// ended, learns what became of the write, and ends the round, which is
// not left open for a later look. (The ninth mutation pass: a Crash made
// on the step's own context, which could not read, failed no test.)
func TestCrashAfterTheStepsContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &cancelledInCommit{Storage: memory.New(), cancel: cancel}
	rec := &tracecheck.Recorder{}
	a := newProc(t, s, "A", procOpts{tracer: rec, cfg: func(c *runner.Config) { c.SeparatePlans = true }})
	newThread(t, a.ws, "t", "m1")
	turn := a.r.NewTurn("t")
	stepTo(t, turn, runner.StepRunEnd)
	s.armed = true
	require.True(t, turn.Step(ctx), "the run's end in doubt ends the turn")
	require.Error(t, ctx.Err())
	o, err := turn.Outcome()
	require.Equal(t, runner.OutcomeError, o, "%v", err)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.Equal(t, 0, a.r.OpenRounds(), "the round was left open: its Crash could not read")
	require.Equal(t, 1, traced(rec, core.ActionCrash))
}
