package core_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// A fork of a Workspace goes on from the round its claim is in, over a
// copy of storage, and the two go their own ways: the fork's RunStart
// commits in the copy and ends nothing of the original's round, which
// then takes a RunStart of its own. Every field of a round that says where
// it is is copied (the count of fields guards one added later).
func TestWorkspaceFork(t *testing.T) {
	w := newWorld(t, "m1", "m2")
	c, err := w.a.Claim(w.ctx, "t", "h1", ttl)
	require.NoError(t, err)
	p, err := w.a.Plan(w.ctx, c)
	require.NoError(t, err)
	require.Equal(t, core.PlanRun, p.Kind)

	store := w.s.Clone()
	rec := &tracecheck.Recorder{}
	f, claim := w.a.ForkForTesting(store, coretest.NewClock(w.a.Now()), rec)
	fc := claim(c)
	require.Equal(t, c.Thread, fc.Thread)
	require.Equal(t, c.Holder, fc.Holder)
	require.False(t, core.SameRound(c, fc), "the fork's claim names the original's round")
	want, n := core.RoundFields(c)
	got, _ := core.RoundFields(fc)
	require.Equal(t, want, got)
	require.Equal(t, 21, n, "round has a field more or less: make Workspace.ForkForTesting copy it, and this test see it")
	require.Equal(t, "A", f.Process())

	// The fork consumes m1 in the copy: its line goes to its own tracer.
	run, err := f.RunStart(w.ctx, fc, p.Message)
	require.NoError(t, err)
	require.Equal(t, core.RunID(1), run)
	require.Equal(t, 1, rec.Len())
	th, err := w.a.Thread(w.ctx, "t")
	require.NoError(t, err)
	require.Zero(t, th.Taken, "the fork wrote to the original's storage")
	// The original's round is still planned: its own RunStart commits.
	lines := w.rec.Len()
	run, err = w.a.RunStart(w.ctx, c, p.Message)
	require.NoError(t, err)
	require.Equal(t, core.RunID(1), run)
	require.Equal(t, lines+1, w.rec.Len())
	w.valid(t)
	// The fork's claim is the fork's: the original refuses it.
	require.ErrorIs(t, w.a.RunEnd(w.ctx, fc, run, ""), core.ErrInvalidArgument)

	// A round in doubt is copied in doubt: only Crash may follow.
	core.MarkRoundInDoubt(c)
	_, claim = w.a.ForkForTesting(w.s.Clone(), coretest.NewClock(w.a.Now()), rec)
	want, _ = core.RoundFields(c)
	got, _ = core.RoundFields(claim(c))
	require.Equal(t, want, got)
}
