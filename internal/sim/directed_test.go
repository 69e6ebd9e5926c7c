package sim

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// directedCover plans every walk of cfg's graph, runs them as directed
// executions of at most per walks each, checks each trace with the Go
// checker, and returns the coverage their traces reach and the walks that
// diverged.
func directedCover(t *testing.T, path string, per int, unfenced bool) (cov *Coverage, pl *Planner, diverged, walks int, rejected error) {
	t.Helper()
	cfg, err := specmodel.ReadConfig(path)
	require.NoError(t, err)
	m := specmodel.New(cfg)
	g := m.ExploreWith(specmodel.Options{Edges: true})
	cov = NewCoverage(g)
	pl, err = NewPlanner(g, 1, RunnerSkips)
	require.NoError(t, err)
	ctx := context.Background()
	for seed := uint64(0); ; seed++ {
		var ws []Walk
		for len(ws) < per {
			w, ok := pl.Next()
			if !ok {
				break
			}
			ws = append(ws, w)
		}
		if len(ws) == 0 {
			return cov, pl, diverged, walks, rejected
		}
		var off core.Fences
		if unfenced {
			off = core.AllFences()
		}
		s, err := NewSeeded(ctx, Config{Seed: seed, Walks: ws, Spec: m, Interleave: true, Unfenced: off})
		require.NoError(t, err)
		var inv *InvariantError
		if err := s.Run(ctx); errors.As(err, &inv) {
			if rejected == nil {
				rejected = err
			}
		} else {
			require.NoError(t, err)
		}
		st := s.Stats()
		diverged += st.Diverged
		walks += st.Walks
		if inv == nil {
			require.Equal(t, len(ws), st.Walks)
		}
		lines := s.TraceLines()
		if _, err := tracecheck.Check(lines); err != nil && rejected == nil {
			rejected = err
		}
		cov.Add(s.CoverageLines())
	}
}

// TestDirectedWalksCoverSmall: the planner's walks, driven through the
// real runner processes, take every one of their steps (no walk leaves its
// plan), their traces are accepted, and together they visit every state
// of the small cfg and every edge a plan can steer the runner along (all
// but the refused abandons with no run to abandon: RunnerSkips).
func TestDirectedWalksCoverSmall(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("drives about 8,000 walks (skipped with -short and under -race; scripts/test runs it without -race)")
	}
	cov, pl, diverged, walks, rejected := directedCover(t, "../../spec/ThreadClaimLapseSmall.cfg", 50, false)
	require.NoError(t, rejected)
	v, n := cov.States()
	e, m := cov.Edges()
	rs, re := pl.Reachable()
	t.Logf("%d walks, %d diverged; %d of %d states, %d of %d edges (%d a plan can steer the runner along)", walks, diverged, v, n, e, m, re)
	require.Zero(t, diverged, "walks that left their plan")
	require.Equal(t, n, v, "states visited")
	require.Equal(t, n, rs, "states the walks can reach")
	require.Equal(t, re, e, "edges visited")
	require.Less(t, re, m, "RunnerSkips left no edge out")
}

// TestDirectedWalksCatchUnfenced: with the fences off, the same walks
// leave their plan (a write the spec refuses goes through) and the Go
// checker rejects the traces.
func TestDirectedWalksCatchUnfenced(t *testing.T) {
	_, _, diverged, walks, rejected := directedCover(t, "../../spec/ThreadClaimLapseSmall.cfg", 50, true)
	t.Logf("%d walks, %d diverged; first rejection: %v", walks, diverged, rejected)
	require.NotZero(t, diverged, "no walk left its plan with the fences off")
	require.Error(t, rejected, "the checker accepted every trace with the fences off")
}

// TestDirectedConfigRefused: walks without their model, with faults or a
// log to replay, or naming a step the model does not have (a process it
// does not name) are refused before anything runs.
func TestDirectedConfigRefused(t *testing.T) {
	cfg, err := specmodel.ReadConfig("../../spec/ThreadClaimLapseSmall.cfg")
	require.NoError(t, err)
	m := specmodel.New(cfg)
	ok := Walk{{Action: "Post", P: -1}}
	ctx := context.Background()
	for name, c := range map[string]Config{
		"no spec":       {Walks: []Walk{ok}},
		"faults":        {Walks: []Walk{ok}, Spec: m, Faults: 0.1},
		"ops":           {Walks: []Walk{ok}, Spec: m, Ops: []Op{}},
		"no walk":       {Walks: []Walk{}, Spec: m},
		"unknown proc":  {Walks: []Walk{{{Action: "Claim", P: 7}}}, Spec: m},
		"unknown step":  {Walks: []Walk{{{Action: "Teleport", P: 0}}}, Spec: m},
		"abandon run 0": {Walks: []Walk{{{Action: "Abandon", P: 0, R: 99}}}, Spec: m},
	} {
		_, err := NewSeeded(ctx, c)
		require.Error(t, err, name)
	}
	g := m.ExploreWith(specmodel.Options{MaxDepth: 3, Edges: true})
	_, err = NewPlanner(g, 1, nil)
	require.ErrorIs(t, err, ErrNoEdges, "a graph cut short has no edges to plan with")
}

// TestDirectedDivergesAndReplays: walks planned with no Skip include
// refused abandons the runner never attempts; those walks leave their plan
// (Stats.Diverged) while the trace stays a behaviour of the spec, and the
// execution's operation log replays it line for line. Under the race
// detector, which slows the seeded executions several times over, it
// plans 100 walks (6 of them diverge) where it plans 300 (44).
func TestDirectedDivergesAndReplays(t *testing.T) {
	walks := 300
	if raceEnabled {
		walks = 100
	}
	cfg, err := specmodel.ReadConfig("../../spec/ThreadClaimLapseSmall.cfg")
	require.NoError(t, err)
	m := specmodel.New(cfg)
	pl, err := NewPlanner(m.ExploreWith(specmodel.Options{Edges: true}), 1, nil)
	require.NoError(t, err)
	var ws []Walk
	for len(ws) < walks {
		w, ok := pl.Next()
		require.True(t, ok)
		ws = append(ws, w)
	}
	ctx := context.Background()
	s, err := NewSeeded(ctx, Config{Seed: 4, Walks: ws, Spec: m, Interleave: true})
	require.NoError(t, err)
	require.NoError(t, s.Run(ctx))
	st := s.Stats()
	t.Logf("%d walks, %d diverged", st.Walks, st.Diverged)
	require.Equal(t, len(ws), st.Walks)
	require.NotZero(t, st.Diverged, "no walk asked the runner for a refused abandon it never attempts")
	lines := s.TraceLines()
	_, err = tracecheck.Check(lines)
	require.NoError(t, err, "a diverged walk's trace is still the spec's")
	r, err := NewSeeded(ctx, s.Log().Config())
	require.NoError(t, err)
	require.NoError(t, r.Run(ctx))
	require.Equal(t, lines, r.TraceLines(), "the log replays the directed execution")
}
