package tracecheck_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// A clone of a checker checks what follows the lines its original saw as
// the original would, and the two go their own ways: a line one rejects
// leaves the other's verdict and state as they were. Many processes (more
// than the few the checker finds by comparing names) and threads.
func TestCheckerClone(t *testing.T) {
	lines := newTraceGen(t, genConfig{seed: 7, threads: 3, procs: 10, fences: core.AllFences()}).run(t, 3000)
	wantStats, err := tracecheck.Check(lines)
	require.NoError(t, err)
	for _, at := range []int{0, 1, 500, 1500, len(lines)} {
		c := tracecheck.NewChecker()
		for i := range lines[:at] {
			require.NoError(t, c.Step(i+1, &lines[i]))
		}
		d := c.Clone()
		for i := at; i < len(lines); i++ {
			require.NoError(t, d.Step(i+1, &lines[i]), "clone at %d, line %d", at, i+1)
		}
		require.Equal(t, wantStats, d.Stats(), "clone at %d", at)
		if at == len(lines) {
			continue
		}
		// A line the spec does not allow, given to the original only: the
		// clone, a copy of it before, still accepts the rest.
		e := c.Clone()
		bad := lines[at]
		bad.Tick += 5
		require.Error(t, c.Step(at+1, &bad))
		for i := at; i < len(lines); i++ {
			require.NoError(t, e.Step(i+1, &lines[i]), "clone at %d after its original rejected a line, line %d", at, i+1)
		}
		require.NoError(t, e.Err())
		require.Error(t, c.Err())
	}
}
