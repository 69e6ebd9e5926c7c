package sim

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
)

// At the end of an execution the spec's state of every process agrees
// with Go's rounds; a refusal that leaves no trace line (here: the
// execution's StartFenced lines dropped, as a RunStart refused without
// tracing would leave them) leaves the spec's pc[p] at "planned" while
// Go's round ended, and the check names it.
func TestCheckRoundsCatchesRefusalWithoutLine(t *testing.T) {
	ctx := context.Background()
	for _, drop := range []core.Action{core.ActionStartFenced, core.ActionEndRefused, core.ActionCrash} {
		caught := false
		for seed := uint64(0); seed < 50 && !caught; seed++ {
			s, err := NewSeeded(ctx, Config{Seed: seed, Interleave: true, Faults: 0.05})
			require.NoError(t, err)
			require.NoError(t, s.Run(ctx), "seed %d", seed)
			lines := s.TraceLines()
			require.NoError(t, s.checkRounds(lines), "seed %d: the honest trace agrees", seed)
			at := slices.IndexFunc(lines, func(ev core.TraceEvent) bool { return ev.Action == drop })
			if at < 0 {
				continue
			}
			// Drop the line, and nothing after it from the same process on
			// the same thread, so that the line was the round's last.
			var kept []core.TraceEvent
			for i, ev := range lines {
				if i < at || ev.Proc != lines[at].Proc || ev.Thread != lines[at].Thread {
					kept = append(kept, ev)
				}
			}
			err = s.checkRounds(kept)
			var inv *InvariantError
			require.True(t, errors.As(err, &inv), "seed %d: %s dropped: %v", seed, drop, err)
			require.Equal(t, InvRoundsAgree, inv.Invariant)
			require.Equal(t, lines[at].Thread, inv.Thread)
			require.Contains(t, inv.Detail, lines[at].Proc+" at pc")
			require.Contains(t, inv.Detail, "Go has no open round")
			caught = true
		}
		require.True(t, caught, "no seed of 50 traced %s", drop)
	}
}

// forgetTracer drops the line it is given from the execution's recorder:
// a process that refused without tracing it.
type forgetTracer struct {
	s    **Seeded
	drop core.Action
}

func (f forgetTracer) Trace(ev core.TraceEvent) {
	if ev.Action != f.drop {
		return
	}
	r := (*f.s).rec
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = r.lines[:len(r.lines)-1]
	r.perThread[ev.Thread]--
}

// Run itself fails with InvRoundsAgree when a refused RunStart leaves no
// trace line and the refused round was its process's last on the thread
// (without quiescence, as a shrunk story runs).
func TestRunFailsWhenRefusalLeavesNoLine(t *testing.T) {
	ctx := context.Background()
	caught := 0
	for seed := uint64(0); seed < 200; seed++ {
		var s *Seeded
		s, err := NewSeeded(ctx, Config{Seed: seed, Steps: 40, Interleave: true, NoQuiesce: true, Tracer: forgetTracer{&s, core.ActionStartFenced}})
		require.NoError(t, err)
		err = s.Run(ctx)
		var inv *InvariantError
		if errors.As(err, &inv) && inv.Invariant == InvRoundsAgree {
			require.Contains(t, inv.Detail, `at pc "planned"`)
			caught++
			continue
		}
		require.NoError(t, err, "seed %d", seed)
	}
	require.Positive(t, caught, "no seed of 200 caught")
	t.Logf("%d of 200 seeds caught", caught)
}

// A process whose turn has not claimed its thread yet has no round open
// there: the spec must have it idle on that thread too. Here the trace
// leaves p1 claimed on t1 (a round whose end left no line) while Go's p1
// has a new turn on t1, not yet claimed: the check names it. (The sixth
// mutation pass: the turn's thread passed over whether or not the turn
// had claimed it, and no test failed.)
func TestCheckRoundsTurnNotYetClaimed(t *testing.T) {
	// A turn that has not claimed needs no Runner to say so.
	s := &Seeded{procs: []*simProc{{name: "p1", turn: (*runner.Runner)(nil).NewTurn("t1"), thread: "t1", co: &coroutine{}}}}
	lines := []core.TraceEvent{{Tick: 1, Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: "h1", Lease: "h1"}}
	err := s.checkRounds(lines)
	var inv *InvariantError
	require.True(t, errors.As(err, &inv), "a round open in the spec on the thread of a turn not yet claimed: %v", err)
	require.Equal(t, InvRoundsAgree, inv.Invariant)
	require.Equal(t, core.ThreadID("t1"), inv.Thread)
	require.Contains(t, inv.Detail, "its turn on t1, not yet claimed")
}
