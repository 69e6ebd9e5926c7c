package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// portOnly is a storage with the Storage port alone: its transactions
// have no EventsAfter, and it is no EventWatcher, so Follow reads the
// whole log and waits for its poll on the workspace's clock.
type portOnly struct{ core.Storage }

func (s portOnly) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, portOnlyTx{tx})
	})
}

type portOnlyTx struct{ core.Transaction }

// awaitPoll waits, 10 s at most, until something waits on clock (a
// Follow for its poll), and fails naming what it waited for.
func awaitPoll(t *testing.T, clock *coretest.Clock, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clock.Waiters() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for " + what)
		}
		time.Sleep(time.Millisecond)
	}
}

// On a storage that neither reads the log after a position nor tells of
// its growth, a follower resumed at the log's end waits (its end is no
// position past it), and reads again at each poll of the workspace's
// clock: a message posted while it waited comes at the next poll. A
// position past the end is refused. (The eighth mutation pass: Follow's
// own slicing of the log refusing its end, and a poll that read nothing,
// failed no test; both storages of the module read after a position and
// tell of their growth.)
func TestFollowPollsAStorageThatDoesNotTell(t *testing.T) {
	ctx := context.Background()
	clock := coretest.NewClock(epoch)
	ws := core.NewWorkspace(portOnly{memory.New()}, clock)
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err := ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	nop := func(core.ThreadEvent) error { return nil }
	require.ErrorIs(t, ws.Follow(ctx, "t", 2, nop), core.ErrInvalidArgument, "a position past the log's end (1 event)")

	f := storetest.Follow(ws, "t", 1)
	defer func() { require.NoError(t, f.Stop()) }()
	awaitPoll(t, clock, "Follow, resumed at the log's end, to read the log and wait for its poll")
	_, err = ws.Post(ctx, "t", "m2")
	require.NoError(t, err)
	clock.Advance(time.Second) // Follow's poll
	evs := f.Next(t, 1, "m2's event, read at Follow's poll")
	storetest.CheckPositions(t, evs, 2, core.MessagePosted)
	require.Equal(t, "m2", evs[0].Text)
}

// watchSpy is the memory Store, which hands each watch's context to
// watches as WatchEvents begins it.
type watchSpy struct {
	*memory.Store
	watches chan context.Context
}

func (s watchSpy) WatchEvents(ctx context.Context, id core.ThreadID) (<-chan struct{}, error) {
	s.watches <- ctx
	return s.Store.WatchEvents(ctx, id)
}

// A Follow that returns because its function did, its own context still
// live, ends the watch it began: storage stops telling a follower that is
// gone. (The eighth mutation pass: a watch begun on a context Follow does
// not end failed no test.)
func TestFollowEndsItsWatch(t *testing.T) {
	ctx := context.Background()
	s := watchSpy{Store: memory.New(), watches: make(chan context.Context, 1)}
	ws := core.NewWorkspace(s, coretest.NewClock(epoch))
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err := ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	stop := errors.New("enough")
	require.ErrorIs(t, ws.Follow(ctx, "t", 0, func(core.ThreadEvent) error { return stop }), stop)
	var watch context.Context
	select {
	case watch = <-s.watches:
	default:
		t.Fatal("Follow began no watch on an EventWatcher")
	}
	select {
	case <-watch.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("timed out after 10s waiting for the watch's context to end once Follow returned")
	}
}

// endedWatch is the memory Store, whose watches end as they begin (their
// channel closed, as a storage's that stops telling), and which counts
// its transactions.
type endedWatch struct {
	*memory.Store
	txs atomic.Int64
}

func (s *endedWatch) WatchEvents(context.Context, core.ThreadID) (<-chan struct{}, error) {
	ch := make(chan struct{})
	close(ch)
	return ch, nil
}

func (s *endedWatch) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	s.txs.Add(1)
	return s.Store.Update(ctx, fn)
}

// A Follow whose watch has ended (its notice channel closed) polls: it
// reads the log once more and then waits for the poll on the workspace's
// clock, as on a storage that never told; it does not read again and
// again. A message posted then comes at the poll. (The ninth mutation
// pass: a closed notice channel taken for a notice, which made Follow
// read the log without end, failed no test.)
func TestFollowPollsOnceItsWatchEnds(t *testing.T) {
	ctx := context.Background()
	clock := coretest.NewClock(epoch)
	s := &endedWatch{Store: memory.New()}
	ws := core.NewWorkspace(s, clock)
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err := ws.Post(ctx, "t", "m1")
	require.NoError(t, err)

	f := storetest.Follow(ws, "t", 1)
	defer func() { require.NoError(t, f.Stop()) }()
	awaitPoll(t, clock, "Follow, its watch ended, to read the log and wait for its poll")
	// Nothing is to happen before the poll: no event to wait for, so the
	// test looks again after a while.
	txs := s.txs.Load()
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, txs, s.txs.Load(), "Follow read the log again before its poll, its watch ended")
	require.Equal(t, 1, clock.Waiters(), "Follow waits for one poll")

	_, err = ws.Post(ctx, "t", "m2")
	require.NoError(t, err)
	clock.Advance(time.Second) // Follow's poll
	evs := f.Next(t, 1, "m2's event, read at Follow's poll")
	storetest.CheckPositions(t, evs, 2, core.MessagePosted)
	require.Equal(t, "m2", evs[0].Text)
}
