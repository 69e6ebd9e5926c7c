package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/internal/sim/shrink"
)

// run -seed N -ops-out writes the seed's operations; replay reproduces the
// same trace, byte for byte, and the same verdict — for a passing seed and
// for a failing one.
func TestReplayReproducesRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags []string
		code  int
	}{
		{"fenced", nil, exitOK},
		{"unfenced", []string{"-unfenced", "-shrink=false"}, exitFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ops := filepath.Join(dir, "seed.ops.ndjson")
			args := append([]string{"run", "-seeds", "1", "-seed", "57", "-concurrent", "0", "-ops-out", ops, "-trace-dir", dir}, c.flags...)
			code, out, errs := runCLI(args...)
			require.Contains(t, []int{exitOK, exitFailed, exitSurvived}, code, "%s\n%s", out, errs)
			replayed := filepath.Join(dir, "replayed.ndjson")
			rcode, rout, rerrs := runCLI("replay", "-trace-out", replayed, ops)
			require.Equal(t, c.code, rcode, "%s\n%s", rout, rerrs)
			if c.code == exitOK {
				require.Equal(t, exitOK, code)
			}
			// The run wrote one file per thread; the replay's trace holds
			// the same lines.
			got, err := os.ReadFile(replayed)
			require.NoError(t, err)
			files, err := filepath.Glob(filepath.Join(dir, "*-seed-57-*.ndjson"))
			require.NoError(t, err)
			require.NotEmpty(t, files)
			for _, f := range files {
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				for _, line := range strings.SplitAfter(strings.TrimSpace(string(b)), "\n") {
					require.Contains(t, string(got), strings.TrimSpace(line), "%s: a line the replay did not write", f)
				}
			}
		})
	}
}

func TestReplayBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.ops.ndjson")
	require.NoError(t, os.WriteFile(bad, []byte(`{"seed":1,"procs":2,"threads":1,"messages":1,"ttl":"10s"}`+"\n"+`{"op":"step","proc":"p3","thread":"t1"}`+"\n"), 0o644))
	code, _, errs := runCLI("replay", bad)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, bad+":2:")
	require.Contains(t, errs, `proc "p3"`)
	code, _, _ = runCLI("replay", dir)
	require.Equal(t, exitUsage, code, "a directory is bad input")
	code, _, _ = runCLI("replay", filepath.Join(dir, "missing"))
	require.Equal(t, exitUsage, code)
	for _, cmd := range []string{"replay", "export"} {
		code, out, _ := runCLI(cmd, "-h")
		require.Equal(t, exitOK, code, cmd)
		require.Contains(t, out, "usage", cmd)
	}
}

var timeLine = regexp.MustCompile(`(?m)^time .*$`)

// The seeds spread over workers fold in seed order: the output is the same
// for 1 worker and for 4, shrunk stories included.
func TestRunOutputSameForAnyWorkers(t *testing.T) {
	outs := map[string]string{}
	shrinkDir := t.TempDir()
	for _, w := range []string{"1", "4"} {
		dir := t.TempDir()
		code, out, errs := runCLI("run", "-seeds", "30", "-concurrent", "0", "-unfenced", "-workers", w,
			"-shrink-dir", shrinkDir, "-trace-dir", dir)
		require.Equal(t, exitFailed, code, "%s\n%s", out, errs)
		outs[w] = timeLine.ReplaceAllString(out, "time X") + errs
		expected, err := os.ReadFile(filepath.Join(dir, "expected-lines"))
		require.NoError(t, err)
		outs[w+"expected"] = string(expected)
	}
	require.Contains(t, outs["1"], "shrunk to")
	require.Equal(t, outs["1"], outs["4"])
	require.Equal(t, outs["1expected"], outs["4expected"])
}

// -json prints one object whose verdict and exit are the command's.
func TestRunJSON(t *testing.T) {
	code, out, _ := runCLI("run", "-seeds", "5", "-concurrent", "0", "-json")
	require.Equal(t, exitOK, code)
	var s struct {
		Command, Verdict string
		Exit             int
		Figures          runFigures
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	require.Equal(t, "run", s.Command)
	require.Equal(t, "pass", s.Verdict)
	require.Equal(t, 5, s.Figures.Executions)
	require.Positive(t, s.Figures.Lines)

	code, out, _ = runCLI("run", "-seeds", "20", "-concurrent", "0", "-unfenced", "-json", "-shrink-dir", t.TempDir())
	require.Equal(t, exitFailed, code)
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	require.Equal(t, "fail", s.Verdict)
	require.NotEmpty(t, s.Figures.Stories)
	require.Positive(t, s.Figures.InvariantsBroken["I1_ConsumedAtMostOnce"])
}

// A fold that fails ends the run at once: runSeeds returns its error and
// leaves no worker behind (the test would hang, or -race flag a leak).
func TestRunSeedsStopsOnError(t *testing.T) {
	f := runFlags{seeds: 50, steps: 50, procs: 2, threads: 1, messages: 2, workers: 3}
	seen := 0
	stop := errors.New("stop")
	err := runSeeds(context.Background(), f, nil, func(seed uint64, _ *shrink.Execution, _ *sim.Visits) error {
		require.Equal(t, uint64(seen), seed, "folded out of seed order")
		seen++
		if seen == 5 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 5, seen)
}
