package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// followWait bounds each wait of the Follow cases for an event.
const followWait = 10 * time.Second

// follower follows one thread's events (core.Workspace.Follow) into a
// channel, for a test to read with Next. It is unexported, to keep the
// library's exported identifiers within the house budget; Follow returns
// it, and its methods serve a storage's own tests.
type follower struct {
	events chan core.ThreadEvent
	done   chan struct{} // closed once Follow returned, err then set
	err    error
	cancel context.CancelFunc
}

// Follow starts following the thread from after (0: from its first event)
// through ws. Stop ends it.
func Follow(ws *core.Workspace, id core.ThreadID, after core.Position) *follower {
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{events: make(chan core.ThreadEvent, 1024), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(f.done)
		f.err = ws.Follow(ctx, id, after, func(ev core.ThreadEvent) error {
			select {
			case f.events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return f
}

// Next returns the next n events the follower delivers, failing the test
// when they do not come within followWait each, naming what it waited
// for.
func (f *follower) Next(t testing.TB, n int, what string) []core.ThreadEvent {
	t.Helper()
	out := make([]core.ThreadEvent, 0, n)
	for len(out) < n {
		select {
		case ev := <-f.events:
			out = append(out, ev)
		case <-f.done:
			t.Fatalf("Follow returned %v while waiting for %s (%d of %d events came)", f.err, what, len(out), n)
		case <-time.After(followWait):
			t.Fatalf("no event in %v while waiting for %s (%d of %d events came)", followWait, what, len(out), n)
		}
	}
	return out
}

// Quiet fails the test when the follower delivers an event within d: an
// event seen twice, or one that was never written.
func (f *follower) Quiet(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case ev := <-f.events:
		t.Fatalf("an event no write made, or one delivered twice: %+v", ev)
	case <-time.After(d):
	}
}

// Stop ends the follower and returns Follow's error (nil when it ended
// with its context), also after Next saw it return; a Follow that goes on
// followWait after its context ended is an error, not a hang.
func (f *follower) Stop() error {
	f.cancel()
	select {
	case <-f.done:
		return f.err
	case <-time.After(followWait):
		return fmt.Errorf("Follow did not return within %v of its context's end", followWait)
	}
}

// CheckPositions fails the test unless evs are the thread's events from
// position first on, one after the other, of the kinds given.
func CheckPositions(t testing.TB, evs []core.ThreadEvent, first core.Position, kinds ...core.EventKind) {
	t.Helper()
	got := make([]string, len(evs))
	want := make([]string, len(kinds))
	for i, ev := range evs {
		got[i] = fmt.Sprintf("%d:%s", ev.Position, ev.Kind)
	}
	for i, k := range kinds {
		want[i] = fmt.Sprintf("%d:%s", first+core.Position(i), k)
	}
	require.Equal(t, want, got, "the thread's events, by position")
}

// testFollow: a follower sees every event of the thread in log order with
// its position, the run's output with its end, and the events written
// after it started without polling for them; one resumed from a position
// sees the events after it, none twice; a refused start is noticed.
func testFollow(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	f := Follow(a.ws, id, 0)
	CheckPositions(t, f.Next(t, 1, "the message posted before Follow"), 1, core.MessagePosted)
	c, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	plan(t, a, c, core.PlanRun)
	run, err := a.ws.RunStart(ctx, c, 1)
	require.NoError(t, err)
	_, err = a.ws.Ask(ctx, c, run, "which one?")
	require.NoError(t, err)
	require.NoError(t, a.ws.RunEnd(ctx, c, run, "I need to know which one"))
	evs := f.Next(t, 4, "RunStarted, Asked, RunEnded and RunOutput")
	CheckPositions(t, evs, 2, core.RunStarted, core.Asked, core.RunEnded, core.RunOutput)
	require.Equal(t, "which one?", evs[1].Text)
	require.Equal(t, "I need to know which one", evs[3].Text)
	require.Equal(t, "I need to know which one", Snapshot(t, s, id).Thread.Runs()[0].Output, "the run's output, as the thread shows it")
	_, err = a.ws.Post(ctx, id, "the blue one")
	require.NoError(t, err)
	CheckPositions(t, f.Next(t, 1, "the answer posted"), 6, core.MessagePosted)
	require.NoError(t, f.Stop())

	// Resumed after position 6: the Reply's event, and nothing before.
	g := Follow(a.ws, id, 6)
	p := plan(t, a, c, core.PlanReply)
	require.NoError(t, a.ws.Reply(ctx, c, p.Request, p.Message))
	CheckPositions(t, g.Next(t, 1, "the Reply's Answered"), 7, core.Answered)

	// A run's start that the fence refuses is an event too: a notice,
	// at the version as it stood.
	_, err = a.ws.Post(ctx, id, "m3")
	require.NoError(t, err)
	p = plan(t, a, c, core.PlanRun)
	b := newProc(s, "b", 0)
	b.clock.Advance(ttl)
	_, err = b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err)
	_, err = a.ws.RunStart(ctx, c, p.Message)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	evs = g.Next(t, 2, "the message posted and the refused start's RunRefused")
	CheckPositions(t, evs, 8, core.MessagePosted, core.RunRefused)
	require.Equal(t, core.Holder("ha"), evs[1].Holder, "the refused claim")
	require.Equal(t, p.Message, evs[1].Message, "the refused prompt")
	require.Equal(t, Snapshot(t, s, id).Thread.Version, evs[1].Version, "the notice makes no version: it has the thread's")
	g.Quiet(t, 50*time.Millisecond)
	require.NoError(t, g.Stop())

	// A thread that does not exist is an error, not a wait; so is a
	// position no follower was given: negative, or past the log's end.
	// Each under a deadline: a storage that took a position past the end
	// as the end would have Follow wait for ever (the eighteenth
	// mutation pass), and the deadline makes that a failure, not a hang.
	nop := func(core.ThreadEvent) error { return nil }
	ctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	require.ErrorIs(t, a.ws.Follow(ctx, "no-such-thread", 0, nop), core.ErrUnknownThread)
	require.ErrorIs(t, a.ws.Follow(ctx, id, -1, nop), core.ErrInvalidArgument, "a negative position")
	require.ErrorIs(t, a.ws.Follow(ctx, id, 0, nil), core.ErrInvalidArgument, "no function")
	require.ErrorIs(t, a.ws.Follow(ctx, id, 10, nop), core.ErrInvalidArgument, "a position past the log's end (9 events)")
}

// testWatchEventsClosed: an EventWatcher's channel is closed when the
// watch's context ends (the eighteenth mutation pass: a storage that
// left it open, so that its reader waits for ever, passed the suite).
func testWatchEventsClosed(t *testing.T, s core.Storage) {
	ew, ok := s.(core.EventWatcher)
	if !ok {
		t.Skip("the storage is not a core.EventWatcher")
	}
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := ew.WatchEvents(ctx, id)
	require.NoError(t, err)
	cancel()
	deadline := time.After(followWait)
	for {
		select {
		case _, open := <-ch:
			if !open {
				return
			}
		case <-deadline:
			t.Fatalf("WatchEvents' channel still open %v after its context ended", followWait)
		}
	}
}
