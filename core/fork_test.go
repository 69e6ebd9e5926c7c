package core_test

import (
	"fmt"
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
	require.Equal(t, 22, n, "round has a field more or less: make Workspace.ForkForTesting copy it, and this test see it")
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

// A claim another workspace made is no round of the one forked: the
// fork's claim function hands it back as it is, as it does the zero
// Claim. (The eighth mutation pass: a fork that copied any round it was
// given failed no test.)
func TestWorkspaceForkLeavesOthersClaims(t *testing.T) {
	w := newWorld(t, "m1")
	c, err := w.b.Claim(w.ctx, "t", "hb", ttl)
	require.NoError(t, err)
	_, claim := w.a.ForkForTesting(w.s.Clone(), coretest.NewClock(w.a.Now()), nil)
	require.True(t, core.SameRound(c, claim(c)), "B's claim was mapped to a round of A's fork")
	require.Equal(t, core.Claim{}, claim(core.Claim{}))
}

// A fork remembers the holders its workspace claimed with as the
// workspace does, oldest first: given the same claims, the two refuse the
// same holders, and forget the same one once RecentHolders fresh holders
// came after it (then only storage refuses it, on a thread it held).
// (The eighth mutation pass: a fork that kept the holders but not their
// order failed no test.)
func TestWorkspaceForkRemembersHoldersInOrder(t *testing.T) {
	w := newWorld(t)
	require.NoError(t, w.a.CreateThread(w.ctx, "u"))
	c, err := w.a.Claim(w.ctx, "t", "h-old", ttl)
	require.NoError(t, err)
	require.NoError(t, w.a.Release(w.ctx, c))
	f, _ := w.a.ForkForTesting(w.s.Clone(), coretest.NewClock(w.a.Now()), nil)
	for k, ws := range []*core.Workspace{w.a, f} {
		who := []string{"the workspace", "its fork"}[k]
		fresh := func(i int) {
			t.Helper()
			c, err := ws.Claim(w.ctx, "t", core.Holder(fmt.Sprintf("h%d", i)), ttl)
			require.NoError(t, err)
			require.NoError(t, ws.Release(w.ctx, c))
		}
		for i := range core.RecentHolders - 1 {
			fresh(i)
		}
		_, err := ws.Claim(w.ctx, "u", "h-old", ttl)
		require.ErrorIs(t, err, core.ErrHolderReused, "%s: h-old, %d fresh holders after it", who, core.RecentHolders-1)
		fresh(core.RecentHolders - 1)
		_, err = ws.Claim(w.ctx, "u", "h-old", ttl)
		require.NoError(t, err, "%s: h-old, forgotten after %d fresh holders", who, core.RecentHolders)
	}
}
