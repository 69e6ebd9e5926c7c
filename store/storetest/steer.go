package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// testSteerRecord: messages posted while a run works are given to it as
// steering (Steer, a read that writes nothing) and then recorded
// (SteerRecord): each record is a RunSteered event that consumes its
// message, moves the taken cursor to it and lists it in the run's
// Steering; a follower sees the records; the pending listing keeps the
// thread while a message is unconsumed, and then for its active run alone.
func testSteerRecord(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	f := Follow(a.ws, id, 0)
	defer func() { require.NoError(t, f.Stop()) }()
	c, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	plan(t, a, c, core.PlanRun)
	run, err := a.ws.RunStart(ctx, c, 1)
	require.NoError(t, err)
	CheckPositions(t, f.Next(t, 2, "the message and the run's start"), 1, core.MessagePosted, core.RunStarted)

	_, ok, err := a.ws.Steer(ctx, c, run)
	require.NoError(t, err)
	require.False(t, ok, "steering given with no message posted after the prompt")

	for _, m := range []string{"m2", "m3"} {
		_, err := a.ws.Post(ctx, id, m)
		require.NoError(t, err)
	}
	before := Snapshot(t, s, id)
	m, ok, err := a.ws.Steer(ctx, c, run)
	require.NoError(t, err)
	require.True(t, ok, "the oldest message posted after the prompt is given")
	require.Equal(t, core.Message{Seq: 2, Text: "m2", PostedAt: epoch}, m)
	require.Equal(t, before, Snapshot(t, s, id), "Steer is a read: it wrote")
	require.NoError(t, a.ws.SteerRecord(ctx, c, run, m.Seq))

	st := Snapshot(t, s, id)
	require.Equal(t, core.Seq(2), st.Thread.Taken, "the record moves the taken cursor to its message")
	require.Equal(t, []core.Seq{2}, st.Thread.Runs()[0].Steering)
	require.Equal(t, before.Thread.Version+1, st.Thread.Version, "the record is one write")
	last := st.Events[len(st.Events)-1]
	require.Equal(t, core.Event{Version: st.Thread.Version, Kind: core.RunSteered, At: epoch, Message: 2, Run: run}, last)
	pending, err := a.ws.Pending(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, pendingIDs(pending), "m3 is unconsumed")

	m, ok, err = a.ws.Steer(ctx, c, run)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, core.Seq(3), m.Seq, "steering is given oldest first")
	require.NoError(t, a.ws.SteerRecord(ctx, c, run, m.Seq))
	_, ok, err = a.ws.Steer(ctx, c, run)
	require.NoError(t, err)
	require.False(t, ok, "every message was consumed")

	evs := f.Next(t, 4, "the two posts and the two RunSteered events")
	CheckPositions(t, evs, 3, core.MessagePosted, core.MessagePosted, core.RunSteered, core.RunSteered)
	require.Equal(t, []core.Seq{2, 3}, []core.Seq{evs[2].Message, evs[3].Message})

	th, err := a.ws.Thread(ctx, id)
	require.NoError(t, err)
	require.Equal(t, core.Seq(3), th.Taken)
	require.Equal(t, []core.Seq{2, 3}, th.Runs()[0].Steering)
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1, 3: 1}, th.Consumed())
	pending, err = a.ws.Pending(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, pendingIDs(pending), "the run is still active")
	scan := core.NewWorkspace(hidden{s}, a.clock)
	pending, err = scan.Pending(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, pendingIDs(pending), "read thread by thread, the run is still active")

	require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
	require.Equal(t, core.PlanNothing, plan(t, a, c, core.PlanNothing).Kind)
	require.NoError(t, a.ws.Release(ctx, c))
	pending, err = a.ws.Pending(ctx)
	require.NoError(t, err)
	require.Empty(t, pending, "nothing is left to consume: the steering consumed it")
}

// testSteerRefusedWhenAbandoned: steering given to a run that a later claim
// abandons before its record is refused (SteerRefused), with nothing
// written, and ends the round; the message stays unconsumed, and the next
// holder gives it again: given twice, consumed once.
func testSteerRefusedWhenAbandoned(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a, b := newProc(s, "a", 0), newProc(s, "b", ttl)
	id := newThread(t, a, "m1")
	ca, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	plan(t, a, ca, core.PlanRun)
	run, err := a.ws.RunStart(ctx, ca, 1)
	require.NoError(t, err)
	_, err = a.ws.Post(ctx, id, "m2")
	require.NoError(t, err)
	m, ok, err := a.ws.Steer(ctx, ca, run)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, core.Seq(2), m.Seq)

	// a stalls; its claim lapses, and b takes the thread and abandons a's run.
	cb, err := b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err)
	require.Equal(t, []core.RunID{run}, plan(t, b, cb, core.PlanAbandon).Runs)
	require.NoError(t, b.ws.Abandon(ctx, cb, run))

	before := Snapshot(t, s, id)
	require.ErrorIs(t, a.ws.SteerRecord(ctx, ca, run, m.Seq), core.ErrRunAbandoned)
	require.Equal(t, before, Snapshot(t, s, id), "a refused steering record changed storage")
	require.ErrorIs(t, a.ws.RunEnd(ctx, ca, run, ""), core.ErrRoundOver, "the refused record ends the round")

	p := plan(t, b, cb, core.PlanRun)
	require.Equal(t, core.Seq(2), p.Message, "the next holder gives the message again")
	run2, err := b.ws.RunStart(ctx, cb, p.Message)
	require.NoError(t, err)
	th, err := b.ws.Thread(ctx, id)
	require.NoError(t, err)
	require.Empty(t, th.Runs()[run-1].Steering, "the abandoned run recorded no steering")
	require.Equal(t, core.Seq(2), th.Runs()[run2-1].Prompt)
	require.Equal(t, map[core.Seq]int{1: 1, 2: 1}, th.Consumed(), "given twice, consumed once")
}
