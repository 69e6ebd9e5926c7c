package runner_test

import (
	"context"
	"fmt"
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
func woken(t *testing.T, p *proc, wake chan<- core.ThreadID) {
	t.Helper()
	before := p.clock.Waiters()
	wake <- "" // look at every thread
	waitUntil(t, func() bool { return p.clock.Waiters() > before }, "Run to look for work after a wake-up and wait again")
}

// While every turn slot is taken, a wake-up does not make Run poll: what
// it found could not start (a wake-up brings no expired lease, which a
// takeover slot could take). The turn's end makes it look.
func TestRunNoLookWhileTurnsFull(t *testing.T) {
	s := &pollCounter{Store: memory.New()}
	wake := make(chan core.ThreadID, 1)
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
	wake <- ""                        // look at every thread
	time.Sleep(20 * time.Millisecond) // a Run that took the wake-up would poll here
	require.Len(t, wake, 1, "Run took a wake-up with every turn slot taken")
	require.Equal(t, polls, s.polls.Load(), "Run polled with every turn slot taken")
	close(release)
	waitUntil(t, func() bool { return taken(t, a, "t2") == 1 }, "Run to consume t2's message once t1's turn ended")
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
	// ... at its next look but one, maybe. The second busy turn is
	// reported (OnTurn) before Run notes it: Run may note it after this
	// Advance, or look while it is still going (the poll's timer fired),
	// and leave t out for PollEvery from then. (CI saw the test wait here
	// for a poll that never came.) So the clock moves on a poll at a time
	// until Run takes t over.
	waitUntil(t, func() bool {
		if taken(t, a, "t") == 1 {
			return true
		}
		a.clock.Advance(poll)
		return false
	}, "Run to take t over once B's lease expired")
	h.stop(t)
}

// A look that comes while the turn that finds the thread held by another
// is still going (its report made, its bookkeeping not yet) does not make
// Run claim the thread again when that turn ends: the other holder's work
// is left out for PollEvery all the same. (Without it, CI saw
// TestRunLeavesThreadClaimedByAnother claim twice now and then.) A
// wake-up that names the thread meanwhile does: it says nobody held the
// thread when its work came.
func TestRunLeavesThreadClaimedByAnotherWokenMidTurn(t *testing.T) {
	t.Run("look", func(t *testing.T) {
		h := runWokenMidTurn(t, "")
		woken(t, h.a, h.wake)             // after the turn's end
		time.Sleep(20 * time.Millisecond) // a Run that claimed t again would report more busy turns here
		require.Equal(t, int64(1), h.busy.Load(), "Run claimed a thread held by another again within PollEvery, after a look mid-turn")
		h.stop(t)
	})
	t.Run("named", func(t *testing.T) {
		h := runWokenMidTurn(t, "t")
		waitUntil(t, func() bool { return h.busy.Load() == 2 }, "Run to claim t again at the turn's end, a wake-up having named it mid-turn")
		h.stop(t)
	})
}

// runWokenMidTurn is runHeld's A and B, where A's first turn on t, which
// finds t held by B, sends the wake-up id (and then the empty one, to
// know that Run has dealt with it: its look waits on a new timer) before
// its bookkeeping, and returns once that turn has reported.
func runWokenMidTurn(t *testing.T, id core.ThreadID) *held {
	var first atomic.Bool
	h := runHeldWith(t, staleLeases{memory.New()}, func(h *held) {
		if !first.CompareAndSwap(false, true) {
			return
		}
		// This goroutine is the turn's: it reports a failure, and does
		// not stop the test.
		before := h.a.clock.Waiters()
		if id != "" {
			h.wake <- id
		}
		h.wake <- ""
		deadline := time.Now().Add(10 * time.Second)
		for h.a.clock.Waiters() <= before {
			if time.Now().After(deadline) {
				t.Errorf("Run did not look after a wake-up, a turn going, within 10s")
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	waitUntil(t, func() bool { return first.Load() }, "Run's first claim of t to find it held by B")
	return h
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
	wake   chan core.ThreadID
	busy   atomic.Int64
	poll   time.Duration
	cancel context.CancelFunc
	done   chan error
}

// runHeld creates thread t over s with one message, has B claim it for
// ttl, and starts A's Run.
func runHeld(t *testing.T, s core.Storage) *held {
	t.Helper()
	return runHeldWith(t, s, nil)
}

// runHeldWith is runHeld whose A calls busy (when set), on the turn's
// goroutine, after counting each busy turn.
func runHeldWith(t *testing.T, s core.Storage, busy func(*held)) *held {
	t.Helper()
	h := &held{wake: make(chan core.ThreadID, 1), poll: ttl / 5, done: make(chan error)}
	h.a = newProc(t, s, "A", procOpts{cfg: func(c *runner.Config) {
		c.Wake, c.PollEvery = h.wake, h.poll
		c.OnTurn = func(r runner.TurnReport) {
			if r.Outcome == runner.OutcomeBusy {
				h.busy.Add(1)
				if busy != nil {
					busy(h)
				}
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
	waitUntil(t, func() bool { return taken(t, h.a, "t") == 1 }, "Run to take t over once B's lease expired")
}

// stop ends A's Run and checks that it returned for that reason.
func (h *held) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	require.NoError(t, waitFor(t, h.done, "Run to return once its context ended"), "a stopped runner returns nil")
}

// runWoken starts Run over s with a Wake channel and an hour-long poll,
// after creating threads t1 and t2 (no messages); stop ends it. The
// channel is unbuffered: a send returns once Run has taken the wake-up,
// and Run deals with it before it takes the next.
func runWoken(t *testing.T, s core.Storage, cfg func(*runner.Config), agent runner.Agent) (a *proc, wake chan core.ThreadID, stop func()) {
	t.Helper()
	wake = make(chan core.ThreadID)
	a = newProc(t, s, "A", procOpts{agent: agent, cfg: func(c *runner.Config) {
		c.Wake, c.PollEvery = wake, time.Hour
		if cfg != nil {
			cfg(c)
		}
	}})
	newThread(t, a.ws, "t1")
	newThread(t, a.ws, "t2")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.r.Run(ctx) }()
	waitUntil(t, func() bool { return a.clock.Waiters() > 0 }, "Run to look once and wait")
	return a, wake, func() {
		cancel()
		require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
	}
}

// A wake-up that names a thread starts its turn with no look, and the
// turn's end, with nothing left that Run found and could not start, makes
// none either: one message, woken, costs no PendingThreads. Each wake-up
// names a thread of its own: one that named a thread whose turn was still
// going (the test goes on at the run's start) would rightly make that
// turn's end look (TestRunWakeForOwnTurn), as it did in one CI run.
func TestRunWakeNamesThread(t *testing.T) {
	s := &pollCounter{Store: memory.New()}
	a, wake, stop := runWoken(t, s, nil, nil)
	defer stop()
	newThread(t, a.ws, "t3")
	polls := s.polls.Load()
	for _, id := range []core.ThreadID{"t2", "t1", "t3"} {
		_, err := a.ws.Post(context.Background(), id, "m")
		require.NoError(t, err)
		wake <- id
		waitUntil(t, func() bool { return taken(t, a, id) == 1 }, "Run, woken, to consume the message")
	}
	waitUntil(t, func() bool { return a.clock.Waiters() > 0 }, "Run to wait again")
	require.Equal(t, polls, s.polls.Load(), "Run looked for work it was told of")
}

// A wake-up that names a thread Run's own turn has (a release that left
// work, heard before the turn was over) is not lost: the turn's end
// claims the thread again, with no look, and a yielded turn's message
// left on the thread is consumed before the poll.
func TestRunWakeForOwnTurn(t *testing.T) { testWakeDuringOwnTurn(t, "t1") }

// A wake-up that asks for a look at every thread (the empty id: Wakeups
// sends it in place of names it could not keep, a release that left work
// among them) while this Run's own turn has a thread with work makes Run
// claim that thread again when the turn ends, with no other look: the
// look found the thread busy, and the release's own wake-up may be the
// one it stands for. (TestAgentAwaitsAnswer waited for the hour-long poll
// in about one run in seven without it.)
func TestRunWholeLookForOwnTurn(t *testing.T) { testWakeDuringOwnTurn(t, "") }

// testWakeDuringOwnTurn sends the wake-up during while Run's turn on t1
// is going (a turn that takes one of t1's two messages), and waits for
// the second message's turn, which only the turn's end can start: the
// poll is an hour away. The only look is the one the empty id asks for.
func testWakeDuringOwnTurn(t *testing.T, during core.ThreadID) {
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	agent := runner.AgentFunc(func(context.Context, *runner.Session) error {
		started <- struct{}{}
		<-release
		return nil
	})
	s := &pollCounter{Store: memory.New()}
	a, wake, stop := runWoken(t, s, func(c *runner.Config) { c.MaxTurnMessages = 1 }, agent)
	defer stop()
	for _, m := range []string{"m1", "m2"} {
		_, err := a.ws.Post(context.Background(), "t1", m)
		require.NoError(t, err)
	}
	wake <- "t1"
	waitFor(t, started, "the agent of t1's first run to start")
	polls := s.polls.Load()
	wake <- during // the turn has t1: Run claims it again once it ends
	wake <- "t2"   // taken once Run has dealt with the first, while the turn still has t1
	close(release)
	waitUntil(t, func() bool { return taken(t, a, "t1") == 2 }, "Run to consume the message the yielded turn left, before its poll")
	looks := int64(0)
	if during == "" {
		looks = 1
	}
	require.Equal(t, polls+looks, s.polls.Load(), "looks after the wake-up during the turn")
}

// Work that a sweep (here Run's first look, which takes every free thread
// with work) found and no slot was free to start is looked for again at a
// turn's end, not left to the poll.
func TestRunLooksWhenBehind(t *testing.T) {
	s := memory.New()
	a := newProc(t, s, "A", procOpts{cfg: func(c *runner.Config) {
		c.Wake, c.PollEvery, c.MaxConcurrentTurns, c.TakeoverTurns = make(chan core.ThreadID), time.Hour, 1, -1
	}})
	newThread(t, a.ws, "t1", "m1")
	newThread(t, a.ws, "t2", "m1")
	newThread(t, a.ws, "t3", "m1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.r.Run(ctx) }()
	for _, id := range []core.ThreadID{"t1", "t2", "t3"} {
		waitUntil(t, func() bool { return taken(t, a, id) == 1 }, "Run to consume "+string(id)+"'s message, one turn at a time, before its poll")
	}
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
}

// Wake-ups that name threads make no look, and do not put the poll off:
// Run still looks PollEvery after its last look, however many came in
// between (or, wake-ups coming faster than PollEvery, it would never look
// for lapsed leases).
func TestRunWakeKeepsPoll(t *testing.T) {
	s := &pollCounter{Store: memory.New()}
	const poll = time.Minute
	turns := make(chan runner.TurnReport, 4)
	a, wake, stop := runWoken(t, s, func(c *runner.Config) {
		c.PollEvery = poll
		c.OnTurn = func(r runner.TurnReport) { turns <- r }
	}, nil)
	defer stop()
	polls := s.polls.Load()
	a.clock.Advance(poll / 2)
	wake <- "t1" // nothing to do there: a claim, a plan, a release
	waitFor(t, turns, "the woken turn to end")
	a.clock.Advance(poll / 2)
	waitUntil(t, func() bool { return s.polls.Load() > polls }, "Run to poll PollEvery after its last look, a wake-up in between")
}

// With wake-ups, a poll takes only the free threads with work that an
// earlier look found waiting too: a thread given work since is one whose
// wake-up is on its way to a runner (Wakeups shares the threads out), and
// the poll would claim it too, one of the two claims finding it taken or
// nothing left to do. A later poll takes it: the next one if a slot is
// free then (the woken turn may still hold the one slot as the test's
// clock moves on: its report comes before its slot is free), or a turn's
// end once the thread has waited a few polls (leftover). One slot, so
// that a turn the first poll started would end before the woken one's.
func TestRunPollTakesOnlyThreadsFoundBefore(t *testing.T) {
	s := &pollCounter{Store: memory.New()}
	const poll = time.Minute
	turns := make(chan runner.TurnReport, 4)
	a, wake, stop := runWoken(t, s, func(c *runner.Config) {
		c.PollEvery, c.MaxConcurrentTurns = poll, 1
		c.OnTurn = func(r runner.TurnReport) { turns <- r }
	}, nil)
	defer stop()
	ctx := context.Background()
	_, err := a.ws.Post(ctx, "t2", "m1") // its wake-up went to another runner
	require.NoError(t, err)
	polls := s.polls.Load()
	a.clock.Advance(poll)
	waitUntil(t, func() bool { return s.polls.Load() > polls }, "Run's poll")
	_, err = a.ws.Post(ctx, "t1", "m1")
	require.NoError(t, err)
	wake <- "t1" // received once the poll's look has launched what it took
	r := waitFor(t, turns, "the woken turn on t1 to end")
	require.Equal(t, core.ThreadID("t1"), r.Thread, "the first poll that found t2 with work took it")
	for range 5 {
		polls := s.polls.Load()
		a.clock.Advance(poll)
		waitUntil(t, func() bool { return s.polls.Load() > polls }, "Run's next poll")
		select {
		case r = <-turns:
			require.Equal(t, core.ThreadID("t2"), r.Thread)
			require.Equal(t, 1, r.Consumed, "a later poll's turn consumed t2's message")
			return
		case <-time.After(100 * time.Millisecond): // no slot was free at that poll
		}
	}
	t.Fatal("five polls after t2's message, no turn on t2 had ended")
}

// With wake-ups, work a poll found and no slot was free to start makes no
// look at a turn's end, nor does the turn's end claim it: under load it
// is mostly work whose wake-up is on its way to a runner, and a look at
// each turn's end that claimed it kept runners that fell behind from
// catching up (issue 25). Once a thread has been found waiting at
// stealAfter (3) looks before a poll that could not start it, a turn's
// end claims it with no look: its wake-up's runner is not keeping up with
// it, or the wake-up was lost.
//
// stale: the turn's end comes more than a fifth of PollEvery after that
// poll (leftoverFresh), when other runners' turn ends may have claimed
// the thread since. It lists the threads again, once, and claims the
// thread if it is still free ("free"); one another holder has claimed
// meanwhile ("taken") it leaves, with no claim that finds it taken.
// When the last listing had over 16 threads for each of the leftover's
// ("wide": 17 more threads with work, held by another holder), it does
// not list them again, and claims the thread as the poll left it.
func TestRunPollLeftoverWaitsForPolls(t *testing.T) {
	for _, stale := range []string{"no", "free", "taken", "wide"} {
		t.Run("stale="+stale, func(t *testing.T) { testLeftover(t, stale) })
	}
}

func testLeftover(t *testing.T, stale string) {
	s := &pollCounter{Store: memory.New()}
	const poll = time.Second // renewals (ttl/3) keep the lease live across the polls
	next := make(chan struct{}, 3)
	started := make(chan core.ThreadID, 3)
	agent := runner.AgentFunc(func(_ context.Context, sn *runner.Session) error {
		started <- sn.Delivered.Claim.Thread
		<-next
		return nil
	})
	var busy atomic.Int64
	a, _, stop := runWoken(t, s, func(c *runner.Config) {
		c.PollEvery, c.MaxConcurrentTurns = poll, 1
		c.OnTurn = func(r runner.TurnReport) {
			if r.Outcome == runner.OutcomeBusy {
				busy.Add(1)
			}
		}
	}, agent)
	defer stop()
	newThread(t, a.ws, "t3")
	for _, id := range []core.ThreadID{"t1", "t2", "t3"} {
		_, err := a.ws.Post(context.Background(), id, "m") // their wake-ups went to another runner
		require.NoError(t, err)
	}
	if stale == "wide" {
		other := core.NewWorkspace(s, a.clock)
		for i := range 17 {
			id := core.ThreadID(fmt.Sprintf("w%d", i))
			newThread(t, a.ws, id, "m")
			_, err := other.Claim(context.Background(), id, core.Holder("other-"+string(id)), time.Hour)
			require.NoError(t, err)
		}
	}
	polled := func(what string) {
		t.Helper()
		polls, waiters := s.polls.Load(), a.clock.Waiters()
		a.clock.Advance(poll)
		waitUntil(t, func() bool { return s.polls.Load() > polls && a.clock.Waiters() >= waiters }, what)
	}
	ended := func(id core.ThreadID) {
		t.Helper()
		next <- struct{}{}
		waitUntil(t, func() bool { return taken(t, a, id) == 1 }, "Run to consume "+string(id)+"'s message")
	}
	polled("look 2, which first finds the three threads waiting")
	require.Empty(t, started, "a poll claimed a thread it found waiting for the first time")
	polled("look 3, which takes one of them")
	first := waitFor(t, started, "the first thread's run to start")
	polled("look 4, which finds the other two waiting, found first two looks before, with the slot taken")
	polls := s.polls.Load()
	ended(first)
	time.Sleep(20 * time.Millisecond) // a Run that claimed a thread at the turn's end would start its run here
	require.Empty(t, started, "a turn's end claimed a thread found waiting at two looks before the poll")
	require.Equal(t, polls, s.polls.Load(), "Run looked at a turn's end for threads a poll left")
	polled("look 5, which takes one of the two and leaves the other (found waiting three looks before)")
	second := waitFor(t, started, "the second thread's run to start")
	polls = s.polls.Load()
	if stale == "no" {
		ended(second)
		third := waitFor(t, started, "the third thread's run to start at the second's turn's end")
		ended(third)
		require.Equal(t, polls, s.polls.Load(), "Run looked at a turn's end for threads a poll left")
		require.ElementsMatch(t, []core.ThreadID{"t1", "t2", "t3"}, []core.ThreadID{first, second, third})
		return
	}
	var left core.ThreadID // the leftover's one thread
	for _, id := range []core.ThreadID{"t1", "t2", "t3"} {
		if id != first && id != second {
			left = id
		}
	}
	if stale == "taken" {
		other := core.NewWorkspace(s, a.clock)
		_, err := other.Claim(context.Background(), left, "another-runner", time.Hour)
		require.NoError(t, err)
	}
	a.clock.Advance(poll/5 + time.Millisecond)
	ended(second)
	if stale == "wide" {
		third := waitFor(t, started, "the third thread's run to start at the second's turn's end")
		require.Equal(t, left, third)
		require.Equal(t, polls, s.polls.Load(), "listings at the turn's end, the last listing over 16 threads for the leftover's one")
		ended(third)
		return
	}
	if stale == "free" {
		third := waitFor(t, started, "the third thread's run to start at the second's turn's end")
		require.Equal(t, left, third)
		require.Equal(t, polls+1, s.polls.Load(), "listings at the turn's end that claimed a stale leftover's thread")
		ended(third)
		require.Zero(t, busy.Load(), "claims that found the thread taken")
		return
	}
	waitUntil(t, func() bool { return s.polls.Load() > polls }, "the turn's end to list the threads again, its leftover stale")
	time.Sleep(20 * time.Millisecond) // a Run that claimed the thread would report its busy turn here
	require.Empty(t, started, "a turn's end claimed a thread another holder had claimed since the poll")
	require.Zero(t, busy.Load(), "claims that found the thread taken: the stale leftover was claimed as it was")
	require.Equal(t, polls+1, s.polls.Load(), "listings at the turn's end")
}

// A look that found more lapsed threads than its slots could take (no
// takeover slot) makes the turn's end look again, with Wake too: the
// lapsed thread left is taken over when the slot frees, not at the next
// poll (an hour here). Sweep 3 of the mutation passes: the scheduler's
// mark for it could be dropped with no test failing.
func TestRunLapsedLeftWhileFullTakenAtTurnEnd(t *testing.T) {
	s := &pollCounter{Store: memory.New()}
	wake := make(chan core.ThreadID)
	release := make(chan struct{})
	started := make(chan core.ThreadID, 2)
	agent := runner.AgentFunc(func(_ context.Context, sn *runner.Session) error {
		started <- sn.Delivered.Claim.Thread
		<-release
		return nil
	})
	a := newProc(t, s, "A", procOpts{agent: agent, cfg: func(c *runner.Config) {
		c.Wake, c.PollEvery, c.MaxConcurrentTurns, c.TakeoverTurns = wake, time.Hour, 1, -1
	}})
	deadThread(t, s, "d1")
	deadThread(t, s, "d2")
	a.clock.Advance(ttl) // both leases have expired by A's clock
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- a.r.Run(ctx) }()
	first := waitFor(t, started, "the agent of the first lapsed thread's run to start")
	other := map[core.ThreadID]core.ThreadID{"d1": "d2", "d2": "d1"}[first]
	// Run's first look over (it may still be launching when the agent
	// starts, and would find the slot free once the turn ended).
	waitUntil(t, func() bool { return a.clock.Waiters() == 2 }, "the turn's renewal and Run's poll to wait on the clock")
	polls := s.polls.Load()
	close(release)
	waitUntil(t, func() bool { return taken(t, a, other) == 2 }, fmt.Sprintf("the turn's end to take %s over, without a poll", other))
	require.Equal(t, polls+1, s.polls.Load(), "one look, at the turn's end")
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
}

// A plain poll (no wake-up asked for it) that lists a thread this Run's
// turn has leaves that thread alone when the turn ends: only a look a
// wake-up asked for marks it to be claimed again (see Config.Wake), for
// the turn itself plans what was posted meanwhile. Sweep 3 of the
// mutation passes: a poll that marked it made a claim more a turn, with
// nothing left to plan, and no test failed.
func TestRunPollLeavesOwnTurnAlone(t *testing.T) {
	s := &pollCounter{Store: memory.New()}
	wake := make(chan core.ThreadID)
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	turns := make(chan runner.TurnReport, 4)
	agent := runner.AgentFunc(func(context.Context, *runner.Session) error {
		started <- struct{}{}
		<-release
		return nil
	})
	a := newProc(t, s, "A", procOpts{agent: agent, cfg: func(c *runner.Config) {
		c.Wake, c.PollEvery, c.MaxConcurrentTurns = wake, ttl/10, 2
		c.OnTurn = func(rep runner.TurnReport) { turns <- rep }
	}})
	newThread(t, a.ws, "t1", "m1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- a.r.Run(ctx) }()
	waitFor(t, started, "the agent of t1's first run to start")
	_, err := a.ws.Post(ctx, "t1", "m2") // t1 has work while its turn goes on
	require.NoError(t, err)
	waitUntil(t, func() bool { return a.clock.Waiters() == 2 }, "the turn's renewal and Run's poll to wait on the clock")
	polls := s.polls.Load()
	a.clock.Advance(ttl / 10) // the poll, well before the renewal
	waitUntil(t, func() bool { return s.polls.Load() > polls }, "Run's poll, which lists t1")
	close(release)
	rep := waitFor(t, turns, "t1's turn to end")
	require.Equal(t, runner.OutcomeDone, rep.Outcome)
	require.Equal(t, 2, rep.Consumed, "the turn planned m2 itself")
	time.Sleep(20 * time.Millisecond) // a claim more would come here
	require.Zero(t, len(turns), "a turn more on t1 after its turn ended with nothing left")
	require.Equal(t, int64(1), a.holders.Load(), "a claim more on t1")
	cancel()
	require.NoError(t, waitFor(t, done, "Run to return once its context ended"), "a stopped runner returns nil")
}
