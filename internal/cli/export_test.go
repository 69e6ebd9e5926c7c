package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/internal/itf"
)

const (
	tlcFixture = "../explore/testdata/tlc-unfenced-I1.json"
	goFixture  = "../explore/testdata/go-shrunk-I1.ndjson"
)

// export -itf writes a Go trace and a TLC counterexample as ITF that
// passes the format's rules.
func TestExportITF(t *testing.T) {
	dir := t.TempDir()
	for _, in := range []string{tlcFixture, goFixture, "../../tracecheck/testdata/ok-abandon-fenced.ndjson"} {
		out := filepath.Join(dir, filepath.Base(in)+".itf.json")
		code, stdout, errs := runCLI("export", "-itf", out, in)
		require.Equal(t, exitOK, code, "%s\n%s", stdout, errs)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		require.NoError(t, itf.Validate(b), in)
	}
	code, _, errs := runCLI("export", "-itf", filepath.Join(dir, "x"), "no/such/trace")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "no/such/trace")
	code, _, _ = runCLI("export", goFixture)
	require.Equal(t, exitUsage, code, "-itf is required")
	code, _, _ = runCLI("export", "-itf", filepath.Join(dir, "y"), "-thread", "t9", goFixture)
	require.Equal(t, exitUsage, code)
	_, err := os.Stat(filepath.Join(dir, "y"))
	require.True(t, os.IsNotExist(err), "nothing written for bad input")
}

// show reads a TLC counterexample in the same view as a Go trace; one
// that violates an invariant exits 1, as a rejected Go trace does.
func TestShowTLCAndJSON(t *testing.T) {
	page := filepath.Join(t.TempDir(), "tlc.html")
	code, out, errs := runCLI("show", "-html", page, tlcFixture)
	require.Equal(t, exitFailed, code, "%s\n%s", out, errs)
	require.Contains(t, out, "invariant I1_ConsumedAtMostOnce violated in state")
	require.Contains(t, out, "RunStart(p2)")
	require.Contains(t, out, "I1_ConsumedAtMostOnce violated")
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	require.Contains(t, string(b), "RunStart(p) ==", "the page embeds the action's TLA+ text")

	code, out, _ = runCLI("show", "-json", goFixture)
	require.Equal(t, exitFailed, code)
	var s struct {
		Verdict string
		Figures showFigures
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s), out)
	require.Equal(t, "fail", s.Verdict)
	require.Contains(t, s.Figures.Rejected, "RunStart Fenced => HasLease(p)")

	code, out, _ = runCLI("validate", "-json", goFixture)
	require.Equal(t, exitFailed, code)
	var v struct {
		Verdict string
		Figures []validateFigure
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	require.Len(t, v.Figures, 1)
	require.False(t, v.Figures[0].Accepted)

	dir := t.TempDir()
	code, _, _ = runCLI("show", dir)
	require.Equal(t, exitUsage, code, "a directory is bad input")

	// An -html that cannot be written is bad usage, found before the
	// timeline is printed.
	code, out, errs = runCLI("show", "-html", filepath.Join(dir, "no", "such", "dir", "page.html"), goFixture)
	require.Equal(t, exitUsage, code, "%s\n%s", out, errs)
	require.Empty(t, out, "nothing printed before the error")
	require.Contains(t, errs, "-html")
}

// show -lines A:B pages a long trace: only those lines are printed (and
// drawn with -html); a range with no line, or a bad one, is bad usage.
func TestShowLines(t *testing.T) {
	fixture := "../../tracecheck/testdata/ok-run-ask-reply.ndjson"
	code, out, errs := runCLI("show", "-lines", "2:3", fixture)
	require.Equal(t, exitOK, code, "%s%s", out, errs)
	require.Regexp(t, `(?m)^\s+2\s+\d+ │`, out)
	require.Regexp(t, `(?m)^\s+3\s+\d+ │`, out)
	require.NotRegexp(t, `(?m)^\s+1\s+\d+ │`, out)
	require.NotRegexp(t, `(?m)^\s+4\s+\d+ │`, out)
	page := filepath.Join(t.TempDir(), "page.html")
	code, out, errs = runCLI("show", "-lines", "3:", "-html", page, fixture)
	require.Equal(t, exitOK, code, "%s%s", out, errs)
	require.FileExists(t, page)
	for _, bad := range []string{"5:2", "x:3", "3", "9999:"} {
		code, out, errs = runCLI("show", "-lines", bad, fixture)
		require.Equal(t, exitUsage, code, "-lines %s: %s%s", bad, out, errs)
		require.Empty(t, out, "-lines %s: nothing printed", bad)
	}
}

// A TLC counterexample's constants: the cfg -cfg names (or X.cfg beside
// X.json), else what the states reveal; a cfg whose fence a step proves
// off is marked. A -cfg that cannot be read, or given with a Go trace, is
// bad usage, and nothing is printed or written.
func TestShowCfgConstants(t *testing.T) {
	code, out, errs := runCLI("show", tlcFixture)
	require.Equal(t, exitFailed, code, "%s%s", out, errs)
	require.Contains(t, out, `constants (read from the states`)
	require.Contains(t, out, `FenceStart = FALSE (state 8: RunStart by p1 without the lease)`)

	dir := t.TempDir()
	page := filepath.Join(dir, "page.html")
	code, out, errs = runCLI("show", "-cfg", "../../spec/ThreadClaimLapseUnfenced.cfg", "-html", page, tlcFixture)
	require.Equal(t, exitFailed, code, "%s%s", out, errs)
	require.Contains(t, out, `constants (../../spec/ThreadClaimLapseUnfenced.cfg): Procs = {"p1", "p2"}, MaxMsgs = 2, MaxClaims = 3, MaxAsks = 1, FenceStart = FALSE, FenceReply = FALSE, FenceAbandon = TRUE`)
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	require.Contains(t, string(b), `{"name":"FenceAbandon","value":"TRUE"}`)

	// X.cfg beside X.json is the counterexample's cfg.
	data, err := os.ReadFile(tlcFixture)
	require.NoError(t, err)
	cfg, err := os.ReadFile("../../spec/ThreadClaimLapseAbandonUnfenced.cfg")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ce.json"), data, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ce.cfg"), cfg, 0o644))
	code, out, errs = runCLI("show", filepath.Join(dir, "ce.json"))
	require.Equal(t, exitFailed, code, "%s%s", out, errs)
	require.Contains(t, out, "ce.cfg): ")
	require.Contains(t, out, "FenceStart = TRUE (but state 8: RunStart by p1 without the lease: not a counterexample of this cfg?)")

	for _, args := range [][]string{
		{"show", "-cfg", filepath.Join(dir, "nope.cfg"), "-html", filepath.Join(dir, "bad.html"), tlcFixture},
		{"show", "-cfg", "../../spec/ThreadClaimLapseUnfenced.cfg", "-html", filepath.Join(dir, "bad.html"), goFixture},
	} {
		code, out, errs = runCLI(args...)
		require.Equal(t, exitUsage, code, "%v: %s%s", args, out, errs)
		require.Empty(t, out, "%v: nothing printed", args)
		require.Contains(t, errs, "-cfg")
		require.NoFileExists(t, filepath.Join(dir, "bad.html"))
	}
}
