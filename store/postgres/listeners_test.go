package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// The wake-ups' share of the threads and the followers' LISTEN
// connection: tests from the ninth mutation pass (7 Dec 2026), each of
// which fails with the mutant its comment names, where no test failed
// before.

// followersListening asks whether the server lists $2 LISTEN connections
// of the followers (the events' channel) under the application name $1.
const followersListening = `SELECT count(*) = $2 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%.events%'`

// A listener that saw the listeners change keeps the threads that were
// its own before until it has read the same listeners twice more, not
// once: here 10 and 20 settled on {10, 20}, 30 came, and 10 has read
// {10, 20, 30} and then once more, while 20 has not read it yet. A
// thread the new view gives 20 and the old one gave 10 wakes 10 still.
// The same holds when 10's read failed between the two views: the view
// before the failure is the one it keeps. (The mutants: the view before
// dropped after one read more; the reads' count not started again at
// the change; the view before a failed read forgotten. Each left some
// threads waking no listener, and failed no test.)
func TestShareKeepsItsThreadsFromBeforeForTwoReads(t *testing.T) {
	old, now := []uint32{10, 20}, []uint32{10, 20, 30}
	wokenAll := func(what string, ls ...*share) {
		t.Helper()
		for i := range 200 {
			id := core.ThreadID(fmt.Sprintf("t%d", i))
			n := 0
			for _, l := range ls {
				if l.mine(id) {
					n++
				}
			}
			if n == 0 {
				t.Fatalf("%s: thread %s (shard %d) wakes no listener", what, id, shardOf(string(id)))
			}
		}
	}
	settledOn := func(peers []uint32, ls ...*share) {
		t.Helper()
		for _, l := range ls {
			for range 3 {
				l.saw(peers, true)
			}
			require.True(t, l.settled(len(peers)), "listener %d settled on %v", l.pid, peers)
		}
	}

	l10, l20, l30 := &share{pid: 10}, &share{pid: 20}, &share{pid: 30}
	settledOn(old, l10, l20)
	settledOn(now, l30)
	l10.saw(now, true) // the change
	l10.saw(now, true) // once more: not yet twice
	require.False(t, l10.settled(3), "read the change and once more")
	wokenAll("10 read the change and once more, 20 not yet", l10, l20, l30)

	m10, m20, m30 := &share{pid: 10}, &share{pid: 20}, &share{pid: 30}
	settledOn(old, m10, m20)
	settledOn(now, m30)
	m10.saw(nil, true) // the read failed
	m10.saw(now, true) // the change, read after the failure
	wokenAll("10 read the change after a failed read, 20 not yet", m10, m20, m30)
}

// A listener that has read only others, three times, has not settled:
// it is not among them yet (its read came before its connection showed),
// and it takes every thread. (TestShareSettled's "itself not among them"
// reads once, so its view was unsettled anyway; a settled without the
// condition failed no test.)
func TestShareNotSettledWithoutItself(t *testing.T) {
	l := &share{pid: 20}
	for range 3 {
		l.saw([]uint32{10}, true)
	}
	require.False(t, l.settled(1), "settled on a view without itself")
	require.False(t, l.listening(1), "listening on a view without itself")
	require.True(t, l.mine("t"), "a listener left out of its own view takes every thread")
}

// The wake-up shard of a thread is FNV-1a's 32-bit hash of its id: a
// post NOTIFYs the channel of the shard its binary computes, and the
// listener on that channel, maybe another binary's, hashes the id again
// to decide whether the wake-up is its own (share.mine). Binaries that
// hashed differently would drop each other's wake-ups. (The mutant: a
// hash that left out the id's last byte, so that t0 to t9 shared one
// shard, failed no test.)
func TestWakeShardIsFNV1a(t *testing.T) {
	for _, id := range []string{"", "t", "t0", "t1", "t9", "thread-42", "héllo", string(make([]byte, 300))} {
		h := fnv.New32a()
		_, _ = h.Write([]byte(id))
		require.Equal(t, h.Sum32(), fnv32(id), "fnv32(%q)", id)
		require.Equal(t, h.Sum32()%wakeShards, shardOf(id), "shardOf(%q)", id)
	}
}

// A Wakeups listener still hears an older binary's post, which NOTIFYs
// the schema's one channel of wake-ups from before the shards
// (Schema+".posted", the thread's id its payload), once its view has
// settled and its connection LISTENs on its own shards. (The mutant: a
// listener that left that channel out of the ones it LISTENs on failed
// no test; through a rolling upgrade, the older binary's posts would
// wake no runner of the newer one.)
func TestWakeupsHearAnOlderBinarysPost(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	schema := testSchema(t)
	s := openStore(t, poolConfig(t, "tc-old-post"), schema)
	wake, sh, err := s.wakeups(ctx)
	require.NoError(t, err)
	awaitListening(t, 1, sh)
	conn := admin(t)
	_, err = conn.Exec(ctx, `SELECT pg_notify($1, $2)`, schema+".posted", "old")
	require.NoError(t, err)
	require.Equal(t, core.ThreadID("old"), recvWithin(t, wake, 30*time.Second, "the wake-up of an older binary's post on "+schema+".posted"))
}

// A failed read of the listeners (unknown: nil) forgets none of those
// that said they go: 30 said so, a read failed, and the next read still
// lists 30's connection, which is left out as before. (The mutant: the
// failed read taken as a read of no listeners, which forgot 30's word;
// 30's threads then went to a listener that is closing, and failed no
// test.)
func TestShareFailedReadKeepsTheGoing(t *testing.T) {
	l := settledAmongThree(t)
	l.told("-30")
	l.saw(nil, true) // the read failed
	require.Nil(t, l.peers, "a failed read: the listeners unknown")
	l.saw([]uint32{10, 20, 30}, true) // 30's connection still open
	require.Equal(t, []uint32{10, 20}, l.peers, "30 said it goes, and is still left out after a failed read")
}

// When the Store's shared LISTEN connection of its followers breaks, each
// watcher of each thread gets a notice once it has reconnected, with no
// write made: writes in between were not notified, so a follower reads
// its log again. (The mutant: the reconnection's empty payload handed to
// the watchers of no thread failed no test; TestFollowAcrossKilledListener
// posts after the kill, and its posts' own notices may come once the new
// connection LISTENs.)
func TestWatchersToldOfAReconnection(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	ws := core.NewWorkspace(s, core.SystemClock{})
	var notices []<-chan struct{}
	for _, id := range []core.ThreadID{"a", "b"} {
		require.NoError(t, ws.CreateThread(ctx, id))
		ch, err := s.WatchEvents(ctx, id)
		require.NoError(t, err)
		notices = append(notices, ch)
	}
	look := admin(t)
	var pid int32
	require.NoError(t, look.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%.events%'`, app).Scan(&pid))
	terminate(t, look, uint32(pid))
	for i, ch := range notices {
		recvWithin(t, ch, 30*time.Second, fmt.Sprintf("watcher %d's notice of the reconnection, with no write made", i))
	}
}

// Once the last watcher of a Store's threads has stopped, the shared
// LISTEN connection of its followers closes: the server soon lists none
// of the Store's. A watcher after that opens it again. (The mutant: a
// stopped watcher's thread left in the hub with no watchers, so that
// the hub never counted none and kept its connection for the Store's
// life, failed no test.)
func TestLastWatcherClosesTheListener(t *testing.T) {
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(testCtx(t), "t"))
	look := admin(t)
	for round := range 2 {
		ctx, cancel := context.WithCancel(testCtx(t))
		ch, err := s.WatchEvents(ctx, "t")
		require.NoError(t, err)
		waitFor(t, look, fmt.Sprintf("the followers' LISTEN connection (round %d)", round), followersListening, app, 1)
		cancel()
		closed := make(chan struct{})
		go func() {
			for range ch {
			}
			close(closed)
		}()
		recvWithin(t, closed, 30*time.Second, "the watcher's channel to close once its context ended")
		waitFor(t, look, fmt.Sprintf("no LISTEN connection of the Store once its last watcher stopped (round %d)", round), followersListening, app, 0)
	}
}

// A watcher's notice waits for it: a write's notice that comes while the
// watcher is not receiving (a follower reading its log) is kept, one,
// until it reads. Notices come in commit order on the one connection
// and the hub hands them over in that order, so once thread b's notice
// (posted after a's) has come, a's was handed over before. (The mutant:
// a watcher's channel with no room, so that a notice sent while the
// watcher was busy was dropped, failed no test; the follower would wait
// for its poll.)
func TestWatcherKeepsANoticeUntilRead(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	s := newStore(t)
	ws := core.NewWorkspace(s, core.SystemClock{})
	watch := map[core.ThreadID]<-chan struct{}{}
	for _, id := range []core.ThreadID{"a", "b"} {
		require.NoError(t, ws.CreateThread(ctx, id))
		ch, err := s.WatchEvents(ctx, id)
		require.NoError(t, err)
		watch[id] = ch
	}
	for _, id := range []core.ThreadID{"a", "b"} {
		_, err := ws.Post(ctx, id, "m")
		require.NoError(t, err)
	}
	recvWithin(t, watch["b"], 30*time.Second, "the notice of the post to b")
	select {
	case <-watch["a"]:
	default:
		t.Fatal("the notice of the post to a, handed over before b's while nobody received, was not kept")
	}
}

// WatchEvents returns the mark's error, and keeps no watcher: with a
// context already ended, and for an id the server refuses (a NUL byte),
// it fails, and the followers' LISTEN connection it opened closes again.
// (The mutant: the mark's error ignored, returning a channel of a thread
// never marked, whose writes notify nobody, failed no test.)
func TestWatchEventsMarkFails(t *testing.T) {
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	look := admin(t)
	ended, cancel := context.WithCancel(testCtx(t))
	cancel()
	_, err := s.WatchEvents(ended, "t")
	require.Error(t, err, "WatchEvents with its context ended")
	_, err = s.WatchEvents(testCtx(t), "t\x00")
	require.Error(t, err, "WatchEvents of an id with a NUL byte, which the server refuses")
	waitFor(t, look, "no LISTEN connection of the Store once its marks failed",
		followersListening, app, 0)
}

// A followed thread's mark is renewed well before it lapses: a follower
// whose mark lapsed would hear none of the thread's writes. (The mutant:
// renewing every 300s a mark that lasts 120s failed no test; no test
// follows a thread for two minutes.)
func TestFollowerMarkRenewedBeforeItLapses(t *testing.T) {
	require.LessOrEqual(t, 2*followerRenew, followerTTL, "the mark lasts %v and is renewed every %v", followerTTL, followerRenew)
}

// Close closes the connection the Store's watchers share, though their
// contexts go on: the server soon lists no LISTEN connection of the
// Store. (The mutant: a hub's close that left its listener running, so
// that the connection stayed open until the watchers' contexts ended,
// failed no test.)
func TestCloseClosesTheWatchersConnection(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	require.NoError(t, core.NewWorkspace(s, core.SystemClock{}).CreateThread(ctx, "t"))
	_, err := s.WatchEvents(ctx, "t")
	require.NoError(t, err)
	look := admin(t)
	waitFor(t, look, "the watchers' LISTEN connection", followersListening, app, 1)
	s.Close()
	waitFor(t, look, "no LISTEN connection of the Store once it was closed, its watcher's context still going", followersListening, app, 0)
}
