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
