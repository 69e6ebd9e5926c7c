package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/runner"
)

// pollClock is the system clock, and tells when the runner starts waiting
// for its next poll: Run asks After(PollEvery) just before it waits.
type pollClock struct {
	core.SystemClock
	poll  time.Duration
	waits chan struct{}
}

func (c pollClock) After(d time.Duration) <-chan time.Time {
	if d == c.poll {
		c.waits <- struct{}{}
	}
	return c.SystemClock.After(d)
}

// awaitListening waits until the view of each of the Wakeups listeners
// has settled on n listeners and its connection LISTENs on its own shards
// (share.listening), about three shareEvery after the last listener came
// or went, and fails naming the views that did not within 20 shareEvery.
func awaitListening(tb testing.TB, n int, shares ...*share) {
	tb.Helper()
	deadline := time.Now().Add(20 * shareEvery)
	for {
		var late []string
		for i, sh := range shares {
			if !sh.listening(n) {
				sh.mu.Lock()
				late = append(late, fmt.Sprintf("listener %d (backend %d): reads %d listeners %v, the same %d times since, the ones before kept %v; LISTENs for change %d of %d",
					i, sh.pid, len(sh.peers), sh.peers, sh.stable, sh.prev != nil, sh.followed.Load(), sh.changes.Load()))
				sh.mu.Unlock()
			}
		}
		if len(late) == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the Wakeups listeners' views did not settle on %d listeners, each LISTENing on its own shards, within %v:\n%s",
				n, 20*shareEvery, strings.Join(late, "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// A runner that polls once an hour starts a run for a message another
// process posts, because Wakeups woke it: the runner is idle, waiting for
// an hour-long poll timer that never fires in this test, when the post is
// made, and it starts the run at once. The poster is another Store (its
// own pool), as another process would be.
func TestWakeupsStartRunner(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	mine := openStore(t, poolConfig(t, "tc-wake-runner"), schema)
	poster := core.NewWorkspace(openStore(t, poolConfig(t, "tc-wake-poster"), schema), core.SystemClock{})
	require.NoError(t, poster.CreateThread(ctx, "t"))

	wake, err := mine.Wakeups(ctx)
	require.NoError(t, err)
	const poll = time.Hour
	clock := pollClock{poll: poll, waits: make(chan struct{}, 4)}
	delivered := make(chan runner.Delivered, 4)
	r, err := runner.New(runner.Config{
		Workspace: core.NewWorkspace(mine, core.SystemClock{}, core.WithProcess("runner")),
		Agent: runner.AgentFunc(func(_ context.Context, s *runner.Session) error {
			delivered <- s.Delivered
			return nil
		}),
		Clock:     clock,
		ClaimTTL:  30 * time.Second,
		PollEvery: poll,
		Wake:      wake,
	})
	require.NoError(t, err)
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()

	// Run looked once, found nothing, and now waits for its poll timer.
	await(t, clock.waits, "the runner to go idle")
	require.Empty(t, delivered)
	posted := time.Now()
	seq, err := poster.Post(ctx, "t", "hello")
	require.NoError(t, err)

	var d runner.Delivered
	select {
	case d = <-delivered:
	case <-time.After(30 * time.Second):
		t.Fatal("the post did not wake the runner")
	}
	require.Equal(t, core.ThreadID("t"), d.Claim.Thread)
	require.Equal(t, seq, d.Prompt.Seq)
	require.Less(t, time.Since(posted), poll, "only a wake-up can have started the run")

	// The turn ends (run ended, claim released). (Run's wait says nothing
	// of the turn: a turn started by a named wake-up makes no look at its
	// end, and no new wait for the poll. The thread does.)
	var th *core.Thread
	require.Eventually(t, func() bool {
		th, err = poster.Thread(ctx, "t")
		return err == nil && len(th.Runs()) == 1 && th.Runs()[0].State == core.StateEnded
	}, 30*time.Second, time.Millisecond, "timed out waiting for the turn to record its run's end")
	require.NoError(t, err)
	require.Equal(t, seq, th.Taken)
	require.Len(t, th.Runs(), 1)
	require.Equal(t, core.StateEnded, th.Runs()[0].State)

	cancel()
	require.NoError(t, <-ran, "a stopped runner returns nil")
	for range wake { // closed once ctx ends
	}
}

// Wake-ups that come while nobody reads wait, each thread once, oldest
// first, and never block the sender: ids is unbuffered, so each send below
// returns only once coalesce has taken it. Past maxPendingWakes threads
// they become one empty ThreadID (look at every thread); a thread that is
// not the listener's is left out; the channel closes after ids does.
func TestWakeupsCoalesce(t *testing.T) {
	ids := make(chan core.ThreadID)
	wake := coalesce(ids, func(id core.ThreadID) bool { return id != "other" })
	send := func(id core.ThreadID) {
		t.Helper()
		select {
		case ids <- id:
		case <-time.After(30 * time.Second):
			t.Fatalf("coalesce blocked its sender on %q", id)
		}
	}
	next := func() core.ThreadID {
		t.Helper()
		select {
		case id := <-wake:
			return id
		case <-time.After(30 * time.Second):
			t.Fatal("no wake-up pending")
			return ""
		}
	}
	for range 20 {
		send("t")
	}
	send("other")
	for range 5 {
		send("u")
	}
	send("t")
	require.Equal(t, core.ThreadID("t"), next())
	require.Equal(t, core.ThreadID("u"), next())
	send("v") // a second "t" or "u", or "other", would come before it
	require.Equal(t, core.ThreadID("v"), next())

	for i := range maxPendingWakes + 1 {
		send(core.ThreadID(fmt.Sprintf("t%d", i)))
	}
	send("t1") // folded into the look at every thread
	require.Equal(t, core.ThreadID(""), next(), "past maxPendingWakes, one look at every thread")
	send("w")
	require.Equal(t, core.ThreadID("w"), next(), "the look stood for every thread before it, and nothing else")

	send("") // a reconnection: a look at every thread
	require.Equal(t, core.ThreadID(""), next())
	close(ids)
	select {
	case _, open := <-wake:
		require.False(t, open, "a wake-up after ids closed with none pending")
	case <-time.After(30 * time.Second):
		t.Fatal("the channel stayed open after ids closed")
	}
}

// A post wakes the runners only when it gives work to a thread that had
// none and has no live lease (none, or one expired by the server's
// clock). A post to a held thread wakes nobody (its holder plans the
// message), and the holder's release, with the message left, wakes them.
// A post to a thread that has work already wakes nobody either, held or
// not: its wake-up was sent before, or a poll finds it. Both ways of
// posting keep the rule: the one statement of another process's Store
// (postSQL), and the reading path of the Store that holds the lease
// (TestPostUnderOwnLeaseWakesOnlyWithoutWork). Notifications come in
// commit order, so a post that wakes, after one that should not, tells
// that the latter woke nobody.
func TestPostWakesOnlyFreeThreads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	s := openStore(t, poolConfig(t, "tc-wake-holder"), schema)
	heard, err := s.Listen(ctx)
	require.NoError(t, err)
	next := func(what string) core.ThreadID {
		t.Helper()
		select {
		case id := <-heard:
			return id
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
			return ""
		}
	}
	ws := core.NewWorkspace(s, core.SystemClock{})
	other := core.NewWorkspace(openStore(t, poolConfig(t, "tc-wake-other"), schema), core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "held"))
	post := func(poster *core.Workspace, id core.ThreadID) {
		t.Helper()
		_, err := poster.Post(ctx, id, "m")
		require.NoError(t, err)
	}

	post(other, "held")
	require.Equal(t, core.ThreadID("held"), next("the post to a free thread"))
	c, err := ws.Claim(ctx, "held", "h1", time.Hour)
	require.NoError(t, err)
	// A lease written by a clock an hour behind the server's has expired
	// by the server's clock: its holder may be dead.
	behind := core.NewWorkspace(s, coretest.NewClock(time.Now().Add(-time.Hour)))
	for i, poster := range []*core.Workspace{ws, other} { // ws first: its cache of "held" is current, so it takes the reading path there
		free, lapsed, fresh := core.ThreadID(fmt.Sprint("free", i)), core.ThreadID(fmt.Sprint("lapsed", i)), core.ThreadID(fmt.Sprint("fresh", i))
		for _, id := range []core.ThreadID{free, lapsed, fresh} {
			require.NoError(t, ws.CreateThread(ctx, id))
		}
		_, err = behind.Claim(ctx, lapsed, core.Holder(fmt.Sprint("h-lapsed", i)), time.Minute)
		require.NoError(t, err)
		post(poster, "held")
		post(poster, free)
		require.Equal(t, free, next("the post after the one to the held thread"), "a post to a held thread woke the runners")
		post(poster, free)
		post(poster, lapsed)
		require.Equal(t, lapsed, next("the post to a thread with no work whose lease expired"), "a post to a free thread with work woke the runners")
		post(poster, lapsed)
		post(poster, fresh)
		require.Equal(t, fresh, next("the post to a fresh thread"), "a post to a lapsed thread with work woke the runners")
	}
	require.NoError(t, ws.Release(ctx, c))
	require.Equal(t, core.ThreadID("held"), next("the release that left work"))
}

// The reading path of a post (a Store that holds the thread's lease)
// queues the wake-up's NOTIFY only when the thread has no work before the
// post, as postSQL sends it. The lease, written by a clock at epoch, has
// expired by the server's, so a NOTIFY queued is sent; the channel's name
// is one the server refuses, so a NOTIFY sent fails the post.
func TestPostUnderOwnLeaseWakesOnlyWithoutWork(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	a, c := claimedThread(t, s) // message 1 planned, not yet taken
	s.shards = strings.Repeat("c", 64)
	_, err := a.ws.Post(ctx, "t", "m2")
	require.NoError(t, err, "a post to a thread with work sent a NOTIFY")
	for m := core.Seq(1); m <= 2; m++ {
		run, err := a.ws.RunStart(ctx, c, m)
		require.NoError(t, err)
		p, _, err := a.ws.RunEndThenStart(ctx, c, run, "", -1, false)
		require.NoError(t, err)
		require.Equal(t, m == 1, p.Kind == core.PlanRun, "the plan after run %d: %+v", run, p)
	}
	_, err = a.ws.Post(ctx, "t", "m3")
	require.ErrorContains(t, err, "channel name too long", "a post to a thread with no work sent no NOTIFY")
}

// Wakeups fails, rather than returning a channel that never delivers,
// when it cannot listen.
func TestWakeupsListenFails(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Wakeups(ctx)
	require.Error(t, err)
}

// listenersOn opens n Stores on schema (application names app-0, app-1,
// ...), as n processes, and returns each one's wake-ups and share.
func listenersOn(t *testing.T, ctx context.Context, schema string, n int, app string) ([]<-chan core.ThreadID, []*share) {
	t.Helper()
	var wakes []<-chan core.ThreadID
	var shares []*share
	for i := range n {
		s := openStore(t, poolConfig(t, fmt.Sprintf("%s-%d", app, i)), schema)
		w, sh, err := s.wakeups(ctx)
		require.NoError(t, err)
		wakes, shares = append(wakes, w), append(shares, sh)
	}
	return wakes, shares
}

// Wakeups shares the threads out among a schema's listeners: once their
// views agree, each post wakes exactly one of three listeners (three
// Stores, as three processes), and each listener gets some of the
// threads. A Listen listener still hears every post (to a thread nobody holds).
func TestWakeupsShared(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	wakes, shares := listenersOn(t, ctx, schema, 3, "tc-share")
	posterS := openStore(t, poolConfig(t, "tc-share-poster"), schema)
	all, err := posterS.Listen(ctx)
	require.NoError(t, err)
	poster := core.NewWorkspace(posterS, core.SystemClock{})
	awaitListening(t, 3, shares...)
	drain := func() {
		for _, w := range wakes {
			select {
			case <-w:
			default:
			}
		}
	}
	drain()
	got := make([]int, len(wakes))
	for i := range 30 {
		id := core.ThreadID(fmt.Sprintf("t%d", i))
		require.NoError(t, poster.CreateThread(ctx, id))
		_, err := poster.Post(ctx, id, "m")
		require.NoError(t, err)
		select {
		case heard := <-all:
			require.Equal(t, id, heard, "Listen hears every post")
		case <-time.After(30 * time.Second):
			t.Fatal("Listen heard no post")
		}
		// The woken listener is woken by now, or soon: wait for one,
		// then make sure no second one was.
		woken := -1
		deadline := time.After(30 * time.Second)
		for woken < 0 {
			for j, w := range wakes {
				select {
				case <-w:
					woken = j
				default:
				}
			}
			select {
			case <-deadline:
				t.Fatalf("post %d woke no listener", i)
			case <-time.After(time.Millisecond):
			}
		}
		time.Sleep(20 * time.Millisecond)
		for j, w := range wakes {
			select {
			case <-w:
				t.Fatalf("post %d woke listeners %d and %d", i, woken, j)
			default:
			}
		}
		got[woken]++
	}
	for j, n := range got {
		require.Positive(t, n, "listener %d got no thread of 30 (%v)", j, got)
	}
}

// A Wakeups listener LISTENs only on its own shards' channels: once the
// views of two listeners agree, a post is read by one listening
// connection, not by both with one throwing it away. Listening on every
// shard, the two read 2 notifications a post.
func TestWakeupsReadOnlyTheirShare(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	var stores []*Store
	var shares []*share
	for i := range 2 {
		s := openStore(t, poolConfig(t, fmt.Sprintf("tc-shard-%d", i)), schema)
		w, sh, err := s.wakeups(ctx)
		require.NoError(t, err)
		go func() {
			for range w {
			}
		}()
		stores, shares = append(stores, s), append(shares, sh)
	}
	poster := core.NewWorkspace(openStore(t, poolConfig(t, "tc-shard-poster"), schema), core.SystemClock{})
	awaitListening(t, 2, shares...)
	read := func() int64 { return stores[0].stats.notices.Load() + stores[1].stats.notices.Load() }
	before := read()
	const posts = 40
	for i := range posts {
		id := core.ThreadID(fmt.Sprintf("t%d", i))
		require.NoError(t, poster.CreateThread(ctx, id))
		_, err := poster.Post(ctx, id, "m")
		require.NoError(t, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for read()-before < posts && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // a second reading of any post would be in by now
	require.Equal(t, int64(posts), read()-before, "notifications the two listening connections read for %d posts", posts)
	require.Positive(t, stores[0].stats.notices.Load(), "listener 0 read no post")
	require.Positive(t, stores[1].stats.notices.Load(), "listener 1 read no post")
}

// When a listener goes, the one left LISTENs on the shards that were the
// other's (nudged on the control channel: no wake-up of its own comes to
// make it), and a post to a thread of the gone listener's share wakes it.
func TestWakeupsTakeOverALeaversShare(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	a := openStore(t, poolConfig(t, "tc-leave-a"), schema)
	wa, sha, err := a.wakeups(ctx)
	require.NoError(t, err)
	bctx, bcancel := context.WithCancel(ctx)
	wb, shb, err := openStore(t, poolConfig(t, "tc-leave-b"), schema).wakeups(bctx)
	require.NoError(t, err)
	poster := core.NewWorkspace(openStore(t, poolConfig(t, "tc-leave-poster"), schema), core.SystemClock{})
	awaitListening(t, 2, sha, shb)
	var leaver core.ThreadID // a thread of b's share
	for i := 0; leaver == ""; i++ {
		require.Less(t, i, 64, "no thread of 64 woke b")
		id := core.ThreadID(fmt.Sprintf("t%d", i))
		require.NoError(t, poster.CreateThread(ctx, id))
		_, err := poster.Post(ctx, id, "m")
		require.NoError(t, err)
		select {
		case <-wa:
		case got := <-wb:
			require.Equal(t, id, got)
			leaver = id
		case <-time.After(30 * time.Second):
			t.Fatalf("the post to %s woke neither listener", id)
		}
	}
	bcancel()
	awaitListening(t, 1, sha) // a has read the listeners without b, and LISTENs on b's shards
	// A thread of the same shard with no work: a post to it wakes. (A
	// post to leaver, which has work since its wake-up went to b, wakes
	// nobody: a poll finds it; TestPostWakesOnlyFreeThreads.)
	probe := leaver
	for i := 0; probe == leaver || shardOf(string(probe)) != shardOf(string(leaver)); i++ {
		probe = core.ThreadID(fmt.Sprintf("probe%d", i))
	}
	require.NoError(t, poster.CreateThread(ctx, probe))
	_, err = poster.Post(ctx, probe, "m")
	require.NoError(t, err)
	select {
	case got := <-wa:
		require.Equal(t, probe, got)
	case <-time.After(10 * time.Second):
		t.Fatalf("a post to %s, of the gone listener's share, did not wake the one left within 10s", probe)
	}
}

// While the listeners' views of one another differ (a listener joined,
// and some have read it, some not yet), every thread still wakes one of
// them at least: a listener that has seen the change takes the threads
// that were its own before too, until it has read the same listeners
// twice more. Once every view agrees and has settled, each thread wakes
// exactly one.
func TestShareAcrossAChange(t *testing.T) {
	old, now := []uint32{10, 20}, []uint32{10, 20, 30}
	l10, l20, l30 := &share{pid: 10}, &share{pid: 20}, &share{pid: 30}
	l10.saw(old, true)
	l20.saw(old, true)
	l30.saw(now, true)
	l10.saw(now, true) // l10 saw the change, l20 not yet
	woken := func() {
		for i := range 200 {
			n := 0
			id := core.ThreadID(fmt.Sprintf("t%d", i))
			for _, l := range []*share{l10, l20, l30} {
				if l.mine(id) {
					n++
				}
			}
			if n == 0 {
				t.Fatalf("thread %s wakes no listener", id)
			}
		}
	}
	woken()
	l20.saw(now, true)
	woken()
	for range 2 {
		for _, l := range []*share{l10, l20, l30} {
			l.saw(now, true)
		}
	}
	for i := range 200 {
		id := core.ThreadID(fmt.Sprintf("t%d", i))
		n := 0
		for _, l := range []*share{l10, l20, l30} {
			if l.mine(id) {
				n++
			}
		}
		require.Equal(t, 1, n, "thread %s once the views settled", id)
	}
}

// A listener whose last read of the listeners left itself out (the read
// came before its own connection showed, or its connection was made
// again under another backend id) takes every thread, so that the
// threads the others' views give it still wake it: here 10 and 20 have
// read 30 and settled, and 30 has read only 10 and 20. (The sixth
// mutation pass: a listener left out of its own view owned nothing, and
// a third of the threads woke no listener; no test failed.)
func TestShareLeftOutOfItsOwnView(t *testing.T) {
	l10, l20, l30 := &share{pid: 10}, &share{pid: 20}, &share{pid: 30}
	for range 3 {
		l10.saw([]uint32{10, 20, 30}, true)
		l20.saw([]uint32{10, 20, 30}, true)
	}
	l30.saw([]uint32{10, 20}, true)
	for i := range 200 {
		id := core.ThreadID(fmt.Sprintf("t%d", i))
		require.True(t, l30.mine(id), "thread %s: the listener left out of its own view does not take it", id)
		require.True(t, l10.mine(id) || l20.mine(id) || l30.mine(id), "thread %s wakes no listener", id)
	}
}

// A post to a thread with no work whose lease is live wakes nobody, from
// either path of Post (the poster's own lease's reading path, and
// postSQL): the holder plans the message itself. TestPostWakesOnlyFreeThreads's
// held thread already has work when it is posted to, so there the rule on
// work alone keeps the post quiet, and the rule on the lease is never the
// one that decides. Notifications come in commit order, so the post to a
// free thread made after it is the next one heard.
func TestPostToHeldThreadWithoutWorkWakesNobody(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	s := openStore(t, poolConfig(t, "tc-held-holder"), schema)
	heard, err := s.Listen(ctx)
	require.NoError(t, err)
	ws := core.NewWorkspace(s, core.SystemClock{})
	other := core.NewWorkspace(openStore(t, poolConfig(t, "tc-held-other"), schema), core.SystemClock{})
	for i, poster := range []*core.Workspace{ws, other} {
		held, free := core.ThreadID(fmt.Sprint("held", i)), core.ThreadID(fmt.Sprint("free", i))
		for _, id := range []core.ThreadID{held, free} {
			require.NoError(t, ws.CreateThread(ctx, id))
		}
		_, err := ws.Claim(ctx, held, core.Holder(fmt.Sprint("h", i)), time.Hour) // nothing posted: no work
		require.NoError(t, err)
		for _, id := range []core.ThreadID{held, free} {
			_, err := poster.Post(ctx, id, "m")
			require.NoError(t, err)
		}
		require.Equal(t, free, recvWithin(t, heard, 30*time.Second, "the wake-up of the post to "+string(free)),
			"a post to a held thread with no work woke the runners (poster %d)", i)
	}
}

// A listener's view has settled on n listeners once it has read them,
// itself among them, and then the same twice more, with nothing kept
// from before (the benchmarks wait on it before they measure).
func TestShareSettled(t *testing.T) {
	l := &share{pid: 20}
	require.False(t, l.settled(2), "nothing read")
	l.saw([]uint32{10}, true)
	require.False(t, l.settled(1), "itself not among them")
	l.saw([]uint32{10, 20}, true)
	require.False(t, l.settled(2), "read once, the listeners before kept")
	l.saw([]uint32{10, 20}, true)
	require.False(t, l.settled(2), "read twice")
	l.saw([]uint32{10, 20}, true)
	require.True(t, l.settled(2), "read three times")
	require.False(t, l.settled(3), "settled on 2 listeners, not 3")
	l.saw(nil, true)
	require.False(t, l.settled(2), "the read failed")
	require.True(t, (&share{all: true}).settled(4), "a listener of every thread")
	m := &share{pid: 10}
	m.saw([]uint32{10, 20}, true) // all of them at its first read: nothing kept from before
	require.False(t, m.settled(2), "read once")
	m.saw([]uint32{10, 20}, true)
	m.saw([]uint32{10, 20}, true)
	require.True(t, m.settled(2), "read three times")
	// listening: settled, and its connection LISTENs for the last change.
	require.False(t, m.listening(2), "settled, its connection not caught up")
	m.followed.Store(m.changes.Load() - 1)
	require.False(t, m.listening(2), "its connection one change behind")
	m.followed.Store(m.changes.Load())
	require.True(t, m.listening(2), "settled, its connection caught up")
	require.False(t, m.listening(3), "caught up on 2 listeners, not 3")
	require.True(t, (&share{all: true}).listening(4), "a listener of every thread")
}

// A read that another listener's word made (not timed) adopts a change at
// once, but does not count towards settling: only the listener's own
// reads do. Until its view settles, the listener reads every
// shareEveryUnsettled; then every. It reads at once on another's word,
// not on its own (the payload is its backend's id).
func TestShareReadsOnWord(t *testing.T) {
	l := &share{pid: 20, every: time.Hour, poke: make(chan struct{}, 1)}
	require.Equal(t, time.Hour, l.next(), "nothing read yet (a failed read is retried at every)")
	l.saw([]uint32{10, 20}, true)
	require.Equal(t, shareEveryUnsettled, l.next(), "read once")
	l.saw([]uint32{10, 20}, true)
	l.saw([]uint32{10, 20}, true)
	require.True(t, l.settled(2))
	require.Equal(t, time.Hour, l.next(), "settled")

	l.saw([]uint32{10, 20, 30}, false) // 30 came, and said so
	require.Equal(t, []uint32{10, 20, 30}, l.peers, "an untimed read adopts the change")
	require.True(t, l.owns(1) && l.owns(3), "the shards it owned before kept: 1 by the new view, 3 by the one before")
	for range 5 {
		l.saw([]uint32{10, 20, 30}, false)
	}
	require.False(t, l.settled(3), "reads made by others' word do not settle a view")
	require.Equal(t, shareEveryUnsettled, l.next(), "unsettled: read soon")
	l.saw([]uint32{10, 20, 30}, true)
	l.saw([]uint32{10, 20, 30}, true)
	require.True(t, l.settled(3), "two of its own reads settle it")
	require.False(t, l.owns(3), "the shards from before dropped once settled")

	l.told("20")
	select {
	case <-l.poke:
		t.Fatal("its own word made it read")
	default:
	}
	l.told("30")
	l.told("10") // a read is due already: one is enough
	select {
	case <-l.poke:
	default:
		t.Fatal("another's word did not make it read")
	}
	select {
	case <-l.poke:
		t.Fatal("two words made two reads due")
	default:
	}
}

// A listener whose view has settled, and which would not read the
// listeners again for an hour, reads them at once when a new listener
// says it came: the two views agree, and each LISTENs on its own shards,
// long before the hour. Without the word, the first would keep its view
// of itself alone (every thread its own) for the hour.
func TestWakeupsNewcomerSaysSo(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	sha := hourlyWakeups(ctx, t, schema, "tc-word-a")
	awaitListening(t, 1, sha)
	shb := hourlyWakeups(ctx, t, schema, "tc-word-b")
	awaitListening(t, 2, sha, shb)
}

// hourlyWakeups starts a Wakeups listener of a Store of its own (app, its
// pool's application name) on schema, which reads the listeners again
// only once an hour when its view has settled, and returns its view.
func hourlyWakeups(ctx context.Context, t *testing.T, schema, app string) *share {
	t.Helper()
	_, sh, err := openStore(t, poolConfig(t, app), schema).wakeupsEvery(ctx, time.Hour)
	require.NoError(t, err)
	return sh
}

// settledAmongThree returns listener 20 (reading every hour, with room
// for one poke) settled on the listeners 10, 20 and 30.
func settledAmongThree(t *testing.T) *share {
	t.Helper()
	l := &share{pid: 20, every: time.Hour, poke: make(chan struct{}, 1)}
	for range 3 {
		l.saw([]uint32{10, 20, 30}, true)
	}
	require.True(t, l.settled(3))
	return l
}

// A listener that says it goes ("-" and its backend's id on the control
// channel) is left out of the others' views at once, even while the
// server still lists its connection, until a read no longer has it; one
// still listed after goneReads reads counts again. A listener's word
// about itself is not taken.
func TestShareLeavesOutTheGoing(t *testing.T) {
	l := settledAmongThree(t)
	l.told("-30")
	select {
	case <-l.poke:
	default:
		t.Fatal("the word that 30 goes did not make it read")
	}
	l.saw([]uint32{10, 20, 30}, false) // 30's connection still open
	require.Equal(t, []uint32{10, 20}, l.peers, "30 left out while still listed")
	l.saw([]uint32{10, 20}, true)
	l.saw([]uint32{10, 20}, true)
	require.True(t, l.settled(2), "settled without 30")
	require.Empty(t, l.gone, "30 forgotten once no read has it")

	l.told("-20")
	require.Empty(t, l.gone, "its own word that it goes is not taken")
	l.told("-10")
	for range goneReads - 1 {
		l.saw([]uint32{10, 20}, true)
		require.Equal(t, []uint32{20}, l.peers, "10 left out while it may be closing")
	}
	l.saw([]uint32{10, 20}, true)
	require.Equal(t, []uint32{10, 20}, l.peers, "10 still listed after %d reads: it counts again", goneReads)
}

// A listener whose context ends says so, and the one left, which would
// not read the listeners again for an hour, takes its threads at once:
// its view settles on itself alone long before the hour.
func TestWakeupsLeaverSaysSo(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	sha := hourlyWakeups(ctx, t, schema, "tc-bye-a")
	bctx, bcancel := context.WithCancel(ctx)
	shb := hourlyWakeups(bctx, t, schema, "tc-bye-b")
	awaitListening(t, 2, sha, shb)
	bcancel()
	awaitListening(t, 1, sha)
}

// A post to a thread whose run is still active wakes nobody, though its
// holder's lease has expired by the server's clock and no message waits:
// the run left active is work already, a poll's to find (the lapsed
// holder's). Both ways of posting keep the rule, as in
// TestPostWakesOnlyFreeThreads, whose commit-order reading this test
// shares. (The eighth mutation pass: postSQL without its active_runs
// condition failed no test.)
func TestPostToARunningLapsedThreadWakesNobody(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	schema := testSchema(t)
	s := openStore(t, poolConfig(t, "tc-wake-running"), schema)
	heard, err := s.Listen(ctx)
	require.NoError(t, err)
	next := func(what string) core.ThreadID {
		t.Helper()
		return recvWithin(t, heard, 30*time.Second, what)
	}
	ws := core.NewWorkspace(s, core.SystemClock{})
	other := core.NewWorkspace(openStore(t, poolConfig(t, "tc-wake-running-other"), schema), core.SystemClock{})
	// A lease written by a clock an hour behind the server's has expired
	// by the server's clock.
	behind := core.NewWorkspace(s, coretest.NewClock(time.Now().Add(-time.Hour)))
	for i, poster := range []*core.Workspace{ws, other} {
		running, free := core.ThreadID(fmt.Sprint("running", i)), core.ThreadID(fmt.Sprint("free", i))
		for _, id := range []core.ThreadID{running, free} {
			require.NoError(t, ws.CreateThread(ctx, id))
		}
		_, err := poster.Post(ctx, running, "m1")
		require.NoError(t, err)
		require.Equal(t, running, next("the first post to a free thread"))
		c, err := behind.Claim(ctx, running, core.Holder(fmt.Sprint("h-running", i)), time.Minute)
		require.NoError(t, err)
		p, err := behind.Plan(ctx, c)
		require.NoError(t, err)
		require.Equal(t, core.PlanRun, p.Kind)
		_, err = behind.RunStart(ctx, c, p.Message)
		require.NoError(t, err)
		_, err = poster.Post(ctx, running, "m2")
		require.NoError(t, err)
		_, err = poster.Post(ctx, free, "m")
		require.NoError(t, err)
		require.Equal(t, free, next("the post after the one to the running thread"), "a post to a thread with a run active woke the runners (poster %d)", i)
	}
}

// A Wakeups listener whose connection broke takes its new connection's
// backend for its own: once it has reconnected (and said so, with the
// empty ThreadID), the two listeners' views settle again, each LISTENing
// on its own shards. (The ninth mutation pass: a listener that kept its
// first backend's id after a reconnection, and so never found itself
// among the listeners it read, failed no test.)
func TestWakeupsSettleAfterAReconnection(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	wakes, shares := listenersOn(t, ctx, schema, 2, "tc-reconnect")
	awaitListening(t, 2, shares...)
	pid := func() uint32 {
		shares[0].mu.Lock()
		defer shares[0].mu.Unlock()
		return shares[0].pid
	}
	old := pid()
	terminate(t, admin(t), old)
	deadline := time.After(30 * time.Second)
	for reconnected := false; !reconnected; {
		select {
		case id, ok := <-wakes[0]:
			require.True(t, ok, "listener 0's wake-ups ended")
			reconnected = id == ""
		case <-deadline:
			t.Fatal("timed out after 30s waiting for listener 0 to say it reconnected (the empty ThreadID)")
		}
	}
	awaitListening(t, 2, shares...)
	require.NotEqual(t, old, pid(), "listener 0 kept its first backend's id")
}
