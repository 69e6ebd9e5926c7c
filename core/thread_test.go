package core_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// A thread with two messages, run 1 (prompt 1) active with request 1 open.
func sample() *core.Thread {
	t := core.NewThread("t")
	for _, ev := range []core.Event{
		{Version: 1, Kind: core.MessagePosted, Message: 1},
		{Version: 2, Kind: core.MessagePosted, Message: 2},
		{Version: 3, Kind: core.RunStarted, Message: 1, Run: 1, Holder: "h"},
		{Version: 4, Kind: core.Asked, Run: 1, Request: 1},
	} {
		t.Apply(ev)
	}
	return t
}

// Check is where core refuses what no claim can make right: the refusals
// the Workspace returns besides ErrThreadBusy.
func TestThreadCheckRefusals(t *testing.T) {
	cases := []struct {
		name string
		prep func(*core.Thread)
		ev   core.Event
		want error
	}{
		{"post out of order", nil, core.Event{Kind: core.MessagePosted, Message: 5}, core.ErrInvalidArgument},
		{"start of an unknown message", nil, core.Event{Kind: core.RunStarted, Run: 2, Message: 3, Holder: "h"}, core.ErrUnknownMessage},
		{"start with no holder", nil, core.Event{Kind: core.RunStarted, Run: 2, Message: 2}, core.ErrInvalidArgument},
		{"start with a used run id", nil, core.Event{Kind: core.RunStarted, Run: 1, Message: 2, Holder: "h"}, core.ErrInvalidArgument},
		{"answer of an unknown request", nil, core.Event{Kind: core.Answered, Request: 9, Message: 2}, core.ErrUnknownRequest},
		{"second answer", func(t *core.Thread) { t.Apply(core.Event{Kind: core.Answered, Request: 1, Message: 2}) },
			core.Event{Kind: core.Answered, Request: 1, Message: 2}, core.ErrAlreadyAnswered},
		{"end of an abandoned run", func(t *core.Thread) { t.Apply(core.Event{Kind: core.RunAbandoned, Run: 1, Holder: "h2"}) },
			core.Event{Kind: core.RunEnded, Run: 1}, core.ErrRunAbandoned},
		{"ask of an ended run", func(t *core.Thread) { t.Apply(core.Event{Kind: core.RunEnded, Run: 1}) },
			core.Event{Kind: core.Asked, Run: 1, Request: 2}, core.ErrRunNotActive},
		{"end of an unknown run", nil, core.Event{Kind: core.RunEnded, Run: 7}, core.ErrUnknownRun},
		{"unknown kind", nil, core.Event{Kind: "nope"}, core.ErrInvalidArgument},
		{"ask that skips a request id", nil, core.Event{Kind: core.Asked, Run: 1, Request: 3}, core.ErrInvalidArgument},
		{"answer not posted yet", nil, core.Event{Kind: core.Answered, Request: 1, Message: 3}, core.ErrUnknownMessage},
		{"answer of message 0", nil, core.Event{Kind: core.Answered, Request: 1, Message: 0}, core.ErrUnknownMessage},
		{"steering of message 0", nil, core.Event{Kind: core.RunSteered, Run: 1, Message: 0}, core.ErrUnknownMessage},
		{"steering not posted yet", nil, core.Event{Kind: core.RunSteered, Run: 1, Message: 3}, core.ErrUnknownMessage},
		{"output of an active run", nil, core.Event{Kind: core.RunOutput, Run: 1, Text: "early"}, core.ErrOutOfOrder},
		{"output of an unknown run", nil, core.Event{Kind: core.RunOutput, Run: 7, Text: "x"}, core.ErrUnknownRun},
		{"refusal at an older version", nil, core.Event{Version: 3, Kind: core.RunRefused, Message: 2, Holder: "h2"}, core.ErrInvalidArgument},
		{"refusal with no holder", nil, core.Event{Version: 5, Kind: core.RunRefused, Message: 2}, core.ErrInvalidArgument},
		{"refusal of message 0", nil, core.Event{Version: 5, Kind: core.RunRefused, Message: 0, Holder: "h2"}, core.ErrUnknownMessage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := sample()
			if c.prep != nil {
				c.prep(th)
			}
			before := th.Clone()
			require.ErrorIs(t, th.Check(c.ev), c.want)
			require.Equal(t, before, th, "Check changed the thread")
			require.Panics(t, func() { th.Apply(c.ev) }, "Apply of a refused event is a broken invariant")
		})
	}
}

func TestThreadFoldAndConsumed(t *testing.T) {
	th := sample()
	require.Equal(t, uint64(4), th.Version)
	require.Equal(t, []core.Run{{ID: 1, Holder: "h", Prompt: 1, State: core.StateActive}}, th.ActiveRuns())
	require.Equal(t, core.RequestOpen, th.Requests[0].State)
	th.Apply(core.Event{Version: 5, Kind: core.Answered, Request: 1, Message: 2})
	require.Equal(t, core.RequestAnswered, th.Requests[0].State)
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1}, th.Consumed())
	th.Apply(core.Event{Version: 6, Kind: core.RunEnded, Run: 1})
	require.Empty(t, th.ActiveRuns())
	c := th.Clone()
	c.Apply(core.Event{Version: 7, Kind: core.RunOutput, Run: 1, Text: "said"})
	c.Requests[0].State = core.RequestOpen
	r, _ := th.Run(1)
	require.Equal(t, "", r.Output, "Apply on a Clone changed the original's run")
	require.Equal(t, core.RequestAnswered, th.Requests[0].State, "Clone shares the requests")
}

func TestLeaseExpiredAtItsInstant(t *testing.T) {
	at := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	l := core.Lease{Holder: "h", ExpiresAt: at}
	require.False(t, l.Expired(at.Add(-time.Nanosecond)))
	require.True(t, l.Expired(at))
}

// Issue 26: ErrRunAbandoned is what its doc says: every write of an
// abandoned run is refused with it, its end, a question it asks, a
// steering record, and a second abandon; ErrRunNotActive is an ended
// run's.
func TestAbandonedRunRefusesEveryWrite(t *testing.T) {
	writes := []core.Event{
		{Version: 6, Kind: core.RunEnded, Run: 1},
		{Version: 6, Kind: core.Asked, Run: 1, Request: 2},
		{Version: 6, Kind: core.RunSteered, Run: 1, Message: 2},
		{Version: 6, Kind: core.RunAbandoned, Run: 1, Holder: "h3"},
	}
	for _, c := range []struct {
		end  core.EventKind
		want error
	}{{core.RunAbandoned, core.ErrRunAbandoned}, {core.RunEnded, core.ErrRunNotActive}} {
		th := sample()
		th.Apply(core.Event{Version: 5, Kind: c.end, Run: 1, Holder: "h2"})
		for _, ev := range writes {
			require.ErrorIs(t, th.Check(ev), c.want, "%s after %s", ev.Kind, c.end)
		}
	}
}

// Check refuses the events whose ids or messages are not the next ones
// from below as well as from above: a post of a seq already posted, a
// start on message 0, an Ask under a request id already used. Each is
// refused with the thread unchanged, and Apply panics on it.
// (the tenth mutation pass: Check's post test as ev.Message > Last()+1,
// its prompt test without ev.Message < 1, and its request test as
// ev.Request > len(Requests)+1 failed no test)
func TestCheckRefusesIDsFromBelow(t *testing.T) {
	cases := []struct {
		name string
		ev   core.Event
		want error
	}{
		{"post of a seq already posted", core.Event{Kind: core.MessagePosted, Message: 2}, core.ErrInvalidArgument},
		{"post of seq 0", core.Event{Kind: core.MessagePosted, Message: 0}, core.ErrInvalidArgument},
		{"start on message 0", core.Event{Kind: core.RunStarted, Run: 2, Message: 0, Holder: "h"}, core.ErrUnknownMessage},
		{"ask under a used request id", core.Event{Kind: core.Asked, Run: 1, Request: 1}, core.ErrInvalidArgument},
		{"ask under request id 0", core.Event{Kind: core.Asked, Run: 1, Request: 0}, core.ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := sample()
			before := th.Clone()
			require.ErrorIs(t, th.Check(c.ev), c.want)
			require.Equal(t, before, th, "Check changed the thread")
			require.Panics(t, func() { th.Apply(c.ev) }, "Apply of a refused event is a broken invariant")
		})
	}
}

// Consumed counts only answered requests' answers: an open request, whose
// Answer is still 0, consumes nothing (no count for message 0).
// (the tenth mutation pass: Consumed counting every request's Answer,
// open ones too, failed no test)
func TestConsumedSkipsOpenRequests(t *testing.T) {
	th := sample() // request 1 open
	require.Equal(t, map[core.Seq]int{1: 1}, th.Consumed())
}

// A request id below 1 is no request: Check refuses an answer to request
// 0 with ErrUnknownRequest (not a panic), and so does the Workspace's
// Answer. (the tenth mutation pass: request's bound as id < 0 failed no
// test)
func TestRequestZeroIsUnknown(t *testing.T) {
	th := sample()
	require.ErrorIs(t, th.Check(core.Event{Kind: core.Answered, Request: 0, Message: 2}), core.ErrUnknownRequest)

	w := newWorld(t, "m1")
	_, _, err := w.a.Answer(w.ctx, "t", 0)
	require.ErrorIs(t, err, core.ErrUnknownRequest)
}

// A run's StartedAt is its RunStarted event's time: the starting
// workspace's clock. (the tenth mutation pass: the fold leaving
// StartedAt zero failed no test)
func TestRunStartedAtIsTheStartsClock(t *testing.T) {
	w := newWorld(t, "m1")
	c, err := w.a.Claim(w.ctx, "t", "ha", ttl)
	require.NoError(t, err)
	p, err := w.a.Plan(w.ctx, c)
	require.NoError(t, err)
	run, err := w.a.RunStart(w.ctx, c, p.Message)
	require.NoError(t, err)
	th, err := w.a.Thread(w.ctx, "t")
	require.NoError(t, err)
	r, ok := th.Run(run)
	require.True(t, ok)
	require.Equal(t, epoch, r.StartedAt)
}

// Apply never takes a thread's version back (Version counts the
// thread's committed writes): an event stamped below it leaves Version
// where it was. (the tenth mutation pass: Apply setting Version to the
// event's unconditionally failed no test)
func TestApplyKeepsTheNewerVersion(t *testing.T) {
	th := sample() // version 4
	th.Apply(core.Event{Version: 2, Kind: core.MessagePosted, Message: 3})
	require.Equal(t, uint64(4), th.Version)
	require.Equal(t, core.Seq(3), th.Last())
}
