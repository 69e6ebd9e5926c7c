package sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// TestCheckAtEndFindsBrokenInvariant: a concurrent execution's check at
// the end reads every thread from storage and reports a message consumed
// twice or two runs active (catches pass 13's mutant 50: the storage's
// invariants not checked). The broken storage is an unfenced seeded
// execution's, stopped at its broken invariant.
func TestCheckAtEndFindsBrokenInvariant(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(80) {
		st := memory.New()
		s, err := NewSeeded(ctx, Config{Seed: seed, Unfenced: core.AllFences(), Storage: st})
		require.NoError(t, err)
		var broke *InvariantError
		if !errors.As(s.Run(ctx), &broke) || (broke.Invariant != core.InvConsumedAtMostOnce && broke.Invariant != core.InvOneActiveRun) {
			continue
		}
		res := &ConcurrentResult{Threads: s.threads}
		err = checkAtEnd(ctx, ConcurrentConfig{Storage: st}, res, &firstDefect{}, &timedRecorder{start: time.Now()}, nil)
		var inv *InvariantError
		require.True(t, errors.As(err, &inv), "seed %d broke %s; checkAtEnd = %v", seed, broke.Invariant, err)
		require.Equal(t, broke.Invariant, inv.Invariant)
		require.Equal(t, broke.Thread, inv.Thread)
		return
	}
	t.Fatal("no unfenced seed of 80 broke I1_ConsumedAtMostOnce or I3_OneActiveRun")
}

// TestCheckThreadTwoActiveRuns: two runs active at once break
// I3_OneActiveRun (catches pass 13's mutant 34: only three or more do).
func TestCheckThreadTwoActiveRuns(t *testing.T) {
	th := core.NewThread("t1")
	at := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	for i, ev := range []core.Event{
		{Kind: core.MessagePosted, Message: 1, Text: "one"},
		{Kind: core.MessagePosted, Message: 2, Text: "two"},
		{Kind: core.RunStarted, Run: 1, Message: 1, Holder: "p1.1.a"},
		{Kind: core.RunStarted, Run: 2, Message: 2, Holder: "p2.1.b"},
	} {
		ev.Version, ev.At = uint64(i+1), at
		th.Apply(ev)
	}
	err := checkThread(th, nil, core.Lease{}, 7)
	var inv *InvariantError
	require.True(t, errors.As(err, &inv), "two active runs: %v", err)
	require.Equal(t, core.InvOneActiveRun, inv.Invariant)
	require.Equal(t, 7, inv.Op)
}

// TestCheckRoundsOpenRoundElsewhere: a process whose open round (here a
// step paused in flight) is on t1 has no round on t2, so a trace that
// leaves it claimed on t2 disagrees (catches pass 13's mutant 49: an open
// round on any thread passes every thread over).
func TestCheckRoundsOpenRoundElsewhere(t *testing.T) {
	s := &Seeded{procs: []*simProc{{name: "p1", turn: (*runner.Runner)(nil).NewTurn("t1"), thread: "t1", co: &coroutine{active: true}}}}
	lines := []core.TraceEvent{{Tick: 1, Action: core.ActionClaim, Thread: "t2", Proc: "p1", Holder: "h1", Lease: "h1"}}
	err := s.checkRounds(lines)
	var inv *InvariantError
	require.True(t, errors.As(err, &inv), "a round open in the spec on a thread Go's process has no round on: %v", err)
	require.Equal(t, InvRoundsAgree, inv.Invariant)
	require.Equal(t, core.ThreadID("t2"), inv.Thread)
	require.Contains(t, inv.Detail, "its only turn on t1")
}
