package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/storetest"
)

func receive(t *testing.T, ch <-chan core.ThreadID) core.ThreadID {
	t.Helper()
	select {
	case id, ok := <-ch:
		require.True(t, ok, "the wake-up channel closed")
		return id
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up")
		return ""
	}
}

// A committed post wakes a listener, from another Store (another process);
// a post whose transaction rolled back does not. Notifications arrive in
// commit order, so the rolled-back post, made first, would be seen first.
func TestListenWakesOnCommittedPost(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	listener := openStore(t, poolConfig(t, "tc"), schema)
	poster := openStore(t, poolConfig(t, "tc"), schema)
	ws := core.NewWorkspace(poster, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "rolled-back"))
	require.NoError(t, ws.CreateThread(ctx, "posted"))
	wake, err := listener.Listen(ctx)
	require.NoError(t, err)

	boom := errors.New("boom")
	err = poster.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		v, err := tx.Bump(ctx, "rolled-back")
		if err != nil {
			return err
		}
		if err := tx.Append(ctx, "rolled-back", core.Event{Version: v, Kind: core.MessagePosted, At: time.Now(), Message: 1, Text: "m"}); err != nil {
			return err
		}
		_, err = tx.Events(ctx, "rolled-back") // the NOTIFY reached the server
		if err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = ws.Post(ctx, "posted", "m")
	require.NoError(t, err)
	require.Equal(t, core.ThreadID("posted"), receive(t, wake))

	cancel()
	for range wake { // closes once ctx ends
	}
}

// When the listening connection breaks, Listen reconnects and says so
// with the empty ThreadID (posts in between were missed), then goes on.
func TestListenReconnects(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	wake, err := s.Listen(ctx)
	require.NoError(t, err)
	look := admin(t)
	var pid int32
	require.NoError(t, look.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&pid))
	terminate(t, look, uint32(pid))
	require.Equal(t, core.ThreadID(""), receive(t, wake), "a reconnect must say that wake-ups may have been missed")
	_, err = ws.Post(ctx, "t", "m")
	require.NoError(t, err)
	require.Equal(t, core.ThreadID("t"), receive(t, wake))
}

// A follower of a thread's events (core.Workspace.Follow, on WatchEvents)
// whose listening connection is terminated reads the log again once
// WatchEvents has reconnected: the events committed meanwhile come, each
// once, in order. A follower stopped and resumed from the last position it
// handled sees the events written while it was away, and none twice. The
// workspace's clock is manual, so Follow's own poll never fires: only
// notices wake it.
func TestFollowAcrossKilledListener(t *testing.T) {
	ctx := testCtx(t)
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	ws := core.NewWorkspace(s, coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)))
	require.NoError(t, ws.CreateThread(ctx, "t"))
	f := storetest.Follow(ws, "t", 0)
	post := func(text string) {
		t.Helper()
		_, err := ws.Post(ctx, "t", text)
		require.NoError(t, err)
	}
	post("m1")
	storetest.CheckPositions(t, f.Next(t, 1, "m1's event"), 1, core.MessagePosted)

	require.NoError(t, ws.CreateThread(ctx, "t2"))
	f2 := storetest.Follow(ws, "t2", 0) // a second follower shares the LISTEN connection
	defer func() { require.NoError(t, f2.Stop()) }()
	look := admin(t)
	var pid int32
	var listeners int
	require.NoError(t, look.QueryRow(ctx, `SELECT count(*), min(pid) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%.events%'`, app).Scan(&listeners, &pid))
	require.Equal(t, 1, listeners, "the Store's followers share one LISTEN connection")
	terminate(t, look, uint32(pid))
	post("m2") // while the listener is gone or reconnecting: its notice may be lost
	post("m3")
	storetest.CheckPositions(t, f.Next(t, 2, "m2's and m3's events after the listener's backend was terminated"), 2, core.MessagePosted, core.MessagePosted)
	post("m4")
	storetest.CheckPositions(t, f.Next(t, 1, "m4's event on the new connection"), 4, core.MessagePosted)
	f.Quiet(t, 300*time.Millisecond)
	require.NoError(t, f.Stop())

	post("m5") // nobody follows
	g := storetest.Follow(ws, "t", 4)
	evs := g.Next(t, 1, "m5's event, resumed after position 4")
	storetest.CheckPositions(t, evs, 5, core.MessagePosted)
	require.Equal(t, "m5", evs[0].Text)
	g.Quiet(t, 300*time.Millisecond)
	require.NoError(t, g.Stop())
}

// Only a followed thread's writes NOTIFY the events channel: a thread
// nobody follows pays for no NOTIFY at commit (migration 0008), and one
// that WatchEvents follows is notified of each write.
func TestEventNoticesOnlyForFollowedThreads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newStore(t)
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "quiet"))
	require.NoError(t, ws.CreateThread(ctx, "followed"))
	raw, err := s.listenOn(ctx, s.schema+".events")
	require.NoError(t, err)
	_, err = ws.Post(ctx, "quiet", "m")
	require.NoError(t, err)
	select {
	case id := <-raw:
		t.Fatalf("a write to a thread nobody follows notified %q", id)
	case <-time.After(300 * time.Millisecond):
	}
	notices, err := s.WatchEvents(ctx, "followed")
	require.NoError(t, err)
	_, err = ws.Post(ctx, "followed", "m")
	require.NoError(t, err)
	require.Equal(t, core.ThreadID("followed"), receive(t, raw), "the followed thread's write, on the channel")
	select {
	case <-notices:
	case <-time.After(30 * time.Second):
		t.Fatal("WatchEvents delivered no notice for the followed thread's write within 30s")
	}
}

// A listener whose context ended closes its connection, whether it was
// waiting for a notification or for its receiver to take a wake-up (more
// of them came than the channel holds): once the channel has closed, the
// server soon lists no LISTEN connection of the Store. (The eighth
// mutation pass: a listener that left its connection open failed no test.
// The connection is outside the pool: ended while waiting, the
// connection's deadline closes it all the same, but ended while handing a
// wake-up over, only the garbage collector would, some time later, when
// it finalises the dropped socket. The collector is off while the test
// looks, so that only the listener's own Close can; the test is not
// parallel, so no other test allocates meanwhile.)
func TestListenClosesItsConnection(t *testing.T) {
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	ws := core.NewWorkspace(s, core.SystemClock{})
	look := admin(t)
	const listeners = `SELECT count(*) = $2 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`
	for _, lagging := range []bool{false, true} {
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		wake, err := s.Listen(ctx)
		require.NoError(t, err)
		waitFor(t, look, "the listener's connection", listeners, app, 1)
		if lagging {
			n := cap(wake) + 1
			for i := range n {
				id := core.ThreadID(fmt.Sprint("t", i))
				require.NoError(t, ws.CreateThread(ctx, id))
				_, err := ws.Post(ctx, id, "m")
				require.NoError(t, err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for s.stats.notices.Load() < int64(n) {
				if time.Now().After(deadline) {
					t.Fatalf("timed out after 30s waiting for the listener to read %d notifications (%d so far): %d in the channel, one it waits to hand over", n, s.stats.notices.Load(), cap(wake))
				}
				time.Sleep(time.Millisecond)
			}
		}
		gc := debug.SetGCPercent(-1)
		defer debug.SetGCPercent(gc)
		cancel()
		closed := make(chan struct{})
		go func() {
			for range wake {
			}
			close(closed)
		}()
		recvWithin(t, closed, 30*time.Second, "the wake-up channel to close once its context ended")
		waitFor(t, look, fmt.Sprintf("no LISTEN connection of the Store once its listener ended (lagging receiver: %v)", lagging), listeners, app, 0)
		debug.SetGCPercent(gc)
	}
}

// A listener's connection whose LISTEN fails is closed, whether it is the
// first (listenAs returns the error) or one after a failure on the
// channels' change (the listener then closes the connection it had and
// connects again). The channels function here names the empty channel,
// which the server refuses, first at the start and then once at a
// change. The collector is off while the test looks, so that only the
// listener's own Close can end a connection it drops; the test is not
// parallel. (The ninth mutation pass: a listener that left either
// connection open failed no test.)
func TestListenClosesAConnectionItLeaves(t *testing.T) {
	s := newStore(t)
	app := randomName("tc-listen-")
	look := admin(t)
	const backends = `SELECT count(*) = $2 FROM pg_stat_activity WHERE application_name = $1`
	gc := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(gc)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()

	var refused atomic.Bool
	channels := func() []string {
		if refused.Swap(false) {
			return []string{""}
		}
		return []string{"tc_leaves"}
	}
	refused.Store(true)
	_, err := s.listenAs(ctx, channels, nil, app, nil, nil)
	require.Error(t, err, "a LISTEN on the empty channel")
	waitFor(t, look, "no connection of the listener whose first LISTEN failed", backends, app, 0)

	mv := &moves{}
	wake, err := s.listenAs(ctx, channels, mv, app, nil, nil)
	require.NoError(t, err)
	waitFor(t, look, "the listener's connection", backends, app, 1)
	refused.Store(true)
	mv.changes.Add(1)
	_, err = look.Exec(ctx, `SELECT pg_notify('tc_leaves', 'x')`)
	require.NoError(t, err)
	require.Equal(t, core.ThreadID("x"), receive(t, wake))
	require.Equal(t, core.ThreadID(""), receive(t, wake), "the listener reconnected once its LISTEN failed")
	waitFor(t, look, "one connection of the listener once it reconnected", backends, app, 1)
}
