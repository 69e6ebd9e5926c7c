package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// pollCounter counts a storage's polls for work (PendingThreads).
type pollCounter struct {
	*memory.Store
	polls atomic.Int64
}

func (p *pollCounter) PendingThreads(ctx context.Context) ([]core.PendingThread, error) {
	p.polls.Add(1)
	return p.Store.PendingThreads(ctx)
}

// woken sends a wake-up to a runner waiting on clock and returns once
// Run has looked and waits again (it asked the clock for its next poll).
func woken(t *testing.T, p *proc, wake chan<- struct{}) {
	t.Helper()
	before := p.clock.Waiters()
	wake <- struct{}{}
	waitUntil(t, func() bool { return p.clock.Waiters() > before }, "Run to look for work after a wake-up and wait again")
}

// While every turn slot is taken, a wake-up does not make Run poll: what
// it found could not start (a wake-up brings no expired lease, which a
// takeover slot could take). The turn's end makes it look.
func TestRunNoLookWhileTurnsFull(t *testing.T) {
	s := &pollCounter{Store: memory.New()}
	wake := make(chan struct{}, 1)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	agent := runner.AgentFunc(func(context.Context, *runner.Session) error {
		started <- struct{}{}
		<-release
		return nil
	})
	a := newProc(t, s, "A", procOpts{agent: agent, cfg: func(c *runner.Config) {
		c.Wake, c.PollEvery, c.MaxConcurrentTurns = wake, time.Hour, 1
	}})
	newThread(t, a.ws, "t1", "m1")
	newThread(t, a.ws, "t2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- a.r.Run(ctx) }()
	waitFor(t, started, "the agent of t1's run to start")
	waitUntil(t, func() bool { return a.clock.Waiters() > 0 }, "Run to wait with its one slot taken")
	_, err := a.ws.Post(ctx, "t2", "m1")
	require.NoError(t, err)
	polls := s.polls.Load()
	wake <- struct{}{}
	time.Sleep(20 * time.Millisecond) // a Run that took the wake-up would poll here
	require.Len(t, wake, 1, "Run took a wake-up with every turn slot taken")
	require.Equal(t, polls, s.polls.Load(), "Run polled with every turn slot taken")
	close(release)
	waitUntil(t, func() bool {
		th, err := a.ws.Thread(context.Background(), "t2")
		require.NoError(t, err)
		return th.Taken == 1
	}, "Run to consume t2's message once t1's turn ended")
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
}

// staleLeases lists the threads with work as if nobody held them: the
// listing of a storage that read them before another holder's claim.
type staleLeases struct{ *memory.Store }

func (s staleLeases) PendingThreads(ctx context.Context) ([]core.PendingThread, error) {
	list, err := s.Store.PendingThreads(ctx)
	for i := range list {
		list[i].Lease = core.Lease{}
	}
	return list, err
}

// A thread whose claim Run found held by another holder, although its
// listing showed nobody holding it (a stale listing), is left out of its
// looks for PollEvery, however many wake-ups come meanwhile; after that
// it is claimed again (and, the lease expired, taken over).
func TestRunLeavesThreadClaimedByAnother(t *testing.T) {
	h := runHeld(t, staleLeases{memory.New()})
	a, wake, busy, poll := h.a, h.wake, &h.busy, h.poll
	waitUntil(t, func() bool { return busy.Load() >= 1 }, "Run's first claim of t to find it held by B")
	for range 5 {
		woken(t, a, wake)
	}
	time.Sleep(20 * time.Millisecond) // a Run that claimed t again would report more busy turns here
	require.Equal(t, int64(1), busy.Load(), "Run claimed a thread held by another again within PollEvery")

	a.clock.Advance(poll) // B's lease (ttl) is still live: a second busy claim
	waitUntil(t, func() bool { return busy.Load() == 2 }, "Run to claim t again once PollEvery passed")
	a.clock.Advance(ttl) // B's lease has expired by A's clock: A takes t over
	h.takenOver(t)
	h.stop(t)
}

// Run does not claim a thread whose listed lease another holder has and
// has not let expire by Run's clock, at any look; once it has expired, Run
// takes the thread over at its next look.
func TestRunSkipsLiveLease(t *testing.T) {
	s := &pollCounter{Store: memory.New()}
	h := runHeld(t, s)
	a, wake, busy, poll := h.a, h.wake, &h.busy, h.poll
	waitUntil(t, func() bool { return s.polls.Load() >= 1 }, "Run's first look")
	for range 3 {
		woken(t, a, wake)
	}
	polls := s.polls.Load()
	a.clock.Advance(ttl - time.Millisecond) // B's lease is live still, by A's clock
	waitUntil(t, func() bool { return s.polls.Load() > polls }, "Run to look again once PollEvery passed")
	require.Zero(t, busy.Load(), "Run claimed a thread whose lease another holder has")
	a.clock.Advance(poll) // B's lease has expired by A's clock: A takes t over
	h.takenOver(t)
	require.Zero(t, busy.Load(), "Run claimed a thread whose lease another holder has")
	h.stop(t)
}

// held is process A's Run, started over a thread t that process B has
// claimed, with A's wake-up channel, a count of A's busy turns (claims
// that found t held) and A's PollEvery.
type held struct {
	a      *proc
	wake   chan struct{}
	busy   atomic.Int64
	poll   time.Duration
	cancel context.CancelFunc
	done   chan error
}

// runHeld creates thread t over s with one message, has B claim it for
// ttl, and starts A's Run.
func runHeld(t *testing.T, s core.Storage) *held {
	t.Helper()
	h := &held{wake: make(chan struct{}, 1), poll: ttl / 5, done: make(chan error)}
	h.a = newProc(t, s, "A", procOpts{cfg: func(c *runner.Config) {
		c.Wake, c.PollEvery = h.wake, h.poll
		c.OnTurn = func(r runner.TurnReport) {
			if r.Outcome == runner.OutcomeBusy {
				h.busy.Add(1)
			}
		}
	}})
	newThread(t, h.a.ws, "t", "m1")
	b := newProc(t, s, "B", procOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	t.Cleanup(cancel)
	_, err := b.ws.Claim(ctx, "t", "hb", ttl)
	require.NoError(t, err)
	go func() { h.done <- h.a.r.Run(ctx) }()
	return h
}

// takenOver waits for A to take t over (B's lease expired) and consume
// its message.
func (h *held) takenOver(t *testing.T) {
	t.Helper()
	waitUntil(t, func() bool {
		th, err := h.a.ws.Thread(context.Background(), "t")
		require.NoError(t, err)
		return th.Taken == 1
	}, "Run to take t over once B's lease expired")
}

// stop ends A's Run and checks that it returned for that reason.
func (h *held) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	require.NoError(t, waitFor(t, h.done, "Run to return once its context ended"), "a stopped runner returns nil")
}
