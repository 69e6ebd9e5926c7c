package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpAndUsage(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"run", "-h"}, {"validate", "-h"}, {"show", "-h"}} {
		code, out, _ := runCLI(args...)
		require.Equal(t, exitOK, code, "%v", args)
		require.Contains(t, out, "usage", "%v", args)
	}
	code, _, errs := runCLI()
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "Usage")
	code, _, errs = runCLI("frobnicate")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, `unknown command "frobnicate"`)
	code, _, errs = runCLI("run", "-seeds", "-1")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "must not be negative")
	code, _, errs = runCLI("validate")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "no trace file")
	code, _, errs = runCLI("validate", "no/such/file.ndjson")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "no/such/file.ndjson")
}

// The main job passes with the fences on, exercising every spec action.
func TestRunFenced(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI("run", "-seeds", "40", "-concurrent", "1", "-trace-dir", dir)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, out, "PASS")
	require.Contains(t, out, "accepted every trace")
	require.NotContains(t, out, "never exercised")
	files, err := filepath.Glob(filepath.Join(dir, "ok-*.ndjson"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	bad, err := filepath.Glob(filepath.Join(dir, "bad-*.ndjson"))
	require.NoError(t, err)
	require.Empty(t, bad)

	code, out, _ = runCLI(append([]string{"validate"}, files[:3]...)...)
	require.Equal(t, exitOK, code)
	require.Equal(t, 3, strings.Count(out, "accepted"))
}

// The mutant: with the fences off the main job must fail, naming the
// invariant broken and the first line the trace checker rejects.
func TestRunUnfencedMutantFails(t *testing.T) {
	code, out, errs := runCLI("run", "-seeds", "40", "-concurrent", "0", "-unfenced", "-shrink-dir", t.TempDir())
	require.Equal(t, exitFailed, code, "stdout:\n%s", out)
	require.Contains(t, out, "shrunk to")
	require.Contains(t, errs, "the mutant was caught")
	require.Contains(t, errs, "I1_ConsumedAtMostOnce")
	require.Contains(t, errs, "Fenced => HasLease(p)")
	require.Contains(t, out, "REJECTED")
}

func TestValidateAndShowFixtures(t *testing.T) {
	fixtures := "../../tracecheck/testdata"
	good, err := filepath.Glob(filepath.Join(fixtures, "ok-*.ndjson"))
	require.NoError(t, err)
	require.NotEmpty(t, good)
	code, out, _ := runCLI(append([]string{"validate"}, good...)...)
	require.Equal(t, exitOK, code, out)

	bad, err := filepath.Glob(filepath.Join(fixtures, "bad-*.ndjson"))
	require.NoError(t, err)
	require.NotEmpty(t, bad)
	for _, f := range bad {
		code, out, _ := runCLI("validate", f)
		require.Equal(t, exitFailed, code, "%s was accepted:\n%s", f, out)
		require.Contains(t, out, "REJECTED")
	}

	html := filepath.Join(t.TempDir(), "t.html")
	code, out, _ = runCLI("show", "-html", html, good[0])
	require.Equal(t, exitOK, code, out)
	require.Contains(t, out, "│")
	page, err := os.ReadFile(html)
	require.NoError(t, err)
	require.Contains(t, string(page), `<script type="application/json" id="data">`)

	start := filepath.Join(fixtures, "bad-start-under-other-lease.ndjson")
	code, out, _ = runCLI("show", start)
	require.Equal(t, exitFailed, code)
	require.Contains(t, out, "✗ REJECTED: Fenced => HasLease(p)")
}

// A mutant that no check catches exits 5, not 1: a CI step that expects
// exit 1 from -unfenced fails when the checks are blind. With no scheduled
// operations (only the fair drain) the unfenced code has nothing to race.
func TestRunUnfencedSurvivorExit5(t *testing.T) {
	code, out, errs := runCLI("run", "-seeds", "2", "-steps", "1", "-concurrent", "0", "-unfenced")
	require.Equal(t, exitSurvived, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, errs, "SURVIVED")
}

// The two code mutants the seeded scheduler must catch beyond the fences:
// a fence checked in its own transaction (seen only because steps are
// interleaved between transactions) and a retry after an unknown commit
// (seen only because storage faults are injected). Each exits 1; with the
// feature that exposes it off, each survives (exit 5).
func TestRunCodeMutantsCaught(t *testing.T) {
	for _, tc := range []struct{ mutant, off string }{
		{"fence-own-tx", "-interleave=false"},
		{"retry-commit-unknown", "-faults=0"},
	} {
		code, out, errs := runCLI("run", "-seeds", "40", "-concurrent", "0", "-mutant", tc.mutant)
		require.Equal(t, exitFailed, code, "%s: stdout:\n%s\nstderr:\n%s", tc.mutant, out, errs)
		require.Contains(t, errs, "the mutant was caught")
		code, out, errs = runCLI("run", "-seeds", "40", "-concurrent", "0", "-mutant", tc.mutant, tc.off)
		require.Equal(t, exitSurvived, code, "%s %s: stdout:\n%s\nstderr:\n%s", tc.mutant, tc.off, out, errs)
	}
}
