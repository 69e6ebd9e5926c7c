package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Misuse of the command line: each test is a finding of probing the
// commands with bad flags and paths, and fails without its fix.

// copyTo copies the file src into dir as name and returns its path.
func copyTo(t *testing.T, src, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// An output flag given the path of the command's input is refused before
// anything runs: writing it would destroy the input (validate -junit
// wrote JUnit XML over the trace it checked, and exited 0).
func TestOutputIsNotAnInput(t *testing.T) {
	dir := t.TempDir()
	trace := copyTo(t, okTrace, dir, "ok.ndjson")
	cfg := copyTo(t, "../../spec/ThreadClaimLapseSmall.cfg", dir, "small.cfg")
	ops := filepath.Join(dir, "seed.ops.ndjson")
	code, out, errs := runCLI("run", "-seeds", "1", "-concurrent", "0", "-steps", "20", "-ops-out", ops)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	// Through another path to the same file, too.
	sameTrace := filepath.Join(dir, ".", "ok.ndjson")
	for _, args := range [][]string{
		{"validate", "-junit", trace, trace},
		{"validate", "-summary", sameTrace, trace},
		{"show", "-html", trace, trace},
		{"export", "-itf", trace, trace},
		{"replay", "-trace-out", ops, ops},
		{"run", "-seeds", "1", "-concurrent", "0", "-cfg", cfg, "-forks=false", "-junit", cfg},
		{"run", "-seeds", "1", "-concurrent", "0", "-cfg", cfg, "-forks=false", "-ops-out", cfg},
		{"conform", "-cfg", cfg, "-sample", "1", "-junit", cfg},
		{"tlc", "-root", "../..", "-junit", trace, "batch", trace},
	} {
		before := map[string][]byte{}
		for _, p := range []string{trace, cfg, ops} {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			before[p] = b
		}
		code, out, errs := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v\nstdout:\n%s\nstderr:\n%s", args, out, errs)
		require.Contains(t, errs, "is the input", "%v", args)
		for p, b := range before {
			after, err := os.ReadFile(p)
			require.NoError(t, err)
			require.Equal(t, string(b), string(after), "%v changed %s", args, p)
		}
	}
}
