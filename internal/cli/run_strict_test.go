package cli

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// A run that never exercises a spec action fails naming it, and the
// floor follows the run's size: the default run is held to it, a narrow
// one is not unless asked.
func TestRunFailsOnActionNeverExercised(t *testing.T) {
	tl := &tally{perAction: map[core.Action]int{}, invariantFails: map[string]int{}, lapses: 3}
	for _, a := range core.Actions() {
		tl.perAction[a] = 5
	}
	require.NoError(t, tl.verdict("", 1, io.Discard))
	delete(tl.perAction, core.ActionStartFenced)
	err := tl.verdict("", 1, io.Discard)
	var f failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, exitFailed, f.code)
	require.Contains(t, f.msg, "StartFenced 0")
	require.NoError(t, tl.verdict("", 0, io.Discard), "-min-actions 0 asks for nothing")

	require.Equal(t, 1, autoMinActions(runFlags{seeds: 200, steps: 300, procs: 3}), "the default run")
	require.Equal(t, 0, autoMinActions(runFlags{seeds: 1, steps: 300, procs: 3}), "-seeds 1")
	require.Equal(t, 0, autoMinActions(runFlags{seeds: 200, steps: 300, procs: 1}), "-procs 1 fences no one")

	// End to end: one process never fences anyone, so -min-actions 1
	// fails naming the fenced actions; without it the run passes.
	code, out, errs := runCLI("run", "-seeds", "3", "-concurrent", "0", "-procs", "1", "-min-actions", "1", "-shrink=false")
	require.Equal(t, exitFailed, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, errs, "AbandonFenced 0")
	code, out, errs = runCLI("run", "-seeds", "3", "-concurrent", "0", "-procs", "1", "-shrink=false")
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	code, _, _ = runCLI("run", "-seeds", "1", "-min-actions", "-2")
	require.Equal(t, exitUsage, code)
}
