package sim

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
)

func smallTree(t *testing.T) (*specmodel.Graph, *Tree) {
	t.Helper()
	cfg, err := specmodel.ReadConfig("../../spec/ThreadClaimLapseSmall.cfg")
	require.NoError(t, err)
	g := specmodel.New(cfg).ExploreWith(specmodel.Options{Edges: true})
	tr, err := NewTree(g, RunnerSkips)
	require.NoError(t, err)
	return g, tr
}

// driveAll drives every part of tr cut at cut, and returns the coverage
// and the results summed.
func driveAll(t *testing.T, g *specmodel.Graph, tr *Tree, cut int, cfg TreeConfig) (*Coverage, TreeResult) {
	t.Helper()
	cov := NewCoverage(g)
	var sum TreeResult
	for _, p := range tr.Parts(cut) {
		res, err := tr.Drive(context.Background(), p, cfg)
		require.NoError(t, err)
		cov.Mark(res.Visits)
		sum.Edges += res.Edges
		sum.Diverged += res.Diverged
		sum.Broken += res.Broken
		sum.Rejected += res.Rejected
		sum.Forks += res.Forks
		sum.Lines += res.Lines
		sum.Failed = append(sum.Failed, res.Failed...)
	}
	return cov, sum
}

// TestTreeDrivesEveryEdge: the forks drive the runner along every edge of
// the small cfg's graph it can take (all but the refused abandons with no
// run to abandon, sim.RunnerSkips), each as planned, with every trace
// accepted and every invariant held; however the tree is cut into parts,
// the same edges.
func TestTreeDrivesEveryEdge(t *testing.T) {
	g, tr := smallTree(t)
	states, reach := tr.Reachable()
	require.Equal(t, g.Len(), states)
	var edges []uint64
	for _, cut := range []int{1, 4} {
		cov, sum := driveAll(t, g, tr, cut, TreeConfig{Interleave: true})
		require.Zero(t, sum.Diverged+sum.Broken+sum.Rejected, "cut %d: first failures %+v", cut, sum.Failed)
		require.Equal(t, reach, sum.Edges, "cut %d", cut)
		v, n := cov.States()
		require.Equal(t, n, v, "cut %d: every state", cut)
		e, _ := cov.Edges()
		require.Equal(t, reach, e, "cut %d: every edge a plan can steer the runner along, once", cut)
		// Fewer forks than edges: each state's last edge takes the
		// state's own execution on.
		require.Less(t, sum.Forks, sum.Edges)
		var got []uint64
		for k := range cov.edges {
			got = append(got, k)
		}
		slices.Sort(got)
		if edges != nil {
			require.Equal(t, edges, got, "cut %d drove other edges", cut)
		}
		edges = got
	}
}

// TestForkIsItsLog: a fork is the execution its operation log says. For a
// sample of the forks that took their edge, the log replayed from Init on
// a fresh execution writes the same trace, line for line (holders, ticks,
// expiries), and leaves storage the same.
func TestForkIsItsLog(t *testing.T) {
	g, tr := smallTree(t)
	ctx := context.Background()
	n, compared := 0, 0
	hook := func(f *Seeded) {
		n++
		if n%97 != 0 {
			return
		}
		compared++
		log := f.Log()
		s, err := NewSeeded(ctx, log.Config())
		require.NoError(t, err)
		require.NoError(t, s.Run(ctx))
		require.Equal(t, s.TraceLines(), f.TraceLines(), "fork %d: its log, replayed, traced other lines", n)
		for _, id := range f.threads {
			a, aev, alease, err := snapshot(ctx, f.cfg.Storage, id)
			require.NoError(t, err)
			b, bev, blease, err := snapshot(ctx, s.cfg.Storage, id)
			require.NoError(t, err)
			require.Equal(t, b, a, "fork %d: thread", n)
			require.Equal(t, bev, aev, "fork %d: events", n)
			require.Equal(t, blease, alease, "fork %d: lease", n)
		}
	}
	_, sum := driveAll(t, g, tr, 3, TreeConfig{Interleave: true, hook: hook})
	require.Zero(t, sum.Diverged+sum.Broken+sum.Rejected)
	require.Greater(t, compared, 100)
}

// TestTreeCatchesUnfenced: with the fences off, forks break invariants,
// have their traces rejected and leave their plan; each failing fork kept
// replays from its log.
func TestTreeCatchesUnfenced(t *testing.T) {
	g, tr := smallTree(t)
	_, sum := driveAll(t, g, tr, 3, TreeConfig{Interleave: true, Unfenced: core.AllFences(), Keep: 4})
	t.Logf("fences off: %d edges as planned, %d left their plan, %d broke an invariant, %d rejected", sum.Edges, sum.Diverged, sum.Broken, sum.Rejected)
	require.Positive(t, sum.Broken)
	require.Positive(t, sum.Rejected)
	require.Positive(t, sum.Diverged)
	ctx := context.Background()
	replayed := 0
	for _, f := range sum.Failed {
		if f.Diverged {
			continue
		}
		s, err := NewSeeded(ctx, f.Log.Config())
		require.NoError(t, err)
		runErr := s.Run(ctx)
		if f.Invariant != nil {
			var inv *InvariantError
			require.ErrorAs(t, runErr, &inv, "%s", f.Edge)
			require.Equal(t, f.Invariant.Invariant, inv.Invariant)
		}
		replayed++
	}
	require.Positive(t, replayed)
}

// TestTreeNeedsInterleave: without Interleave a run's second question
// cannot wait for another process's step; Drive says so.
func TestTreeNeedsInterleave(t *testing.T) {
	_, tr := smallTree(t)
	_, err := tr.Drive(context.Background(), tr.Parts(1)[0], TreeConfig{})
	require.ErrorContains(t, err, "Interleave")
}
