package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// smallCfg writes a fenced cfg with three claims and two messages (7,316
// states), or with the fences off.
func smallCfg(t *testing.T, expect string, fenced bool) string {
	f := "TRUE"
	if !fenced {
		f = "FALSE"
	}
	text := "\\* expect: " + expect + "\nSPECIFICATION Spec\nCONSTANTS\n Procs = {\"p1\", \"p2\"}\n MaxMsgs = 2\n MaxClaims = 3\n MaxAsks = 2\n" +
		" FenceStart = " + f + "\n FenceReply = TRUE\n FenceAbandon = TRUE\nINVARIANTS\n TypeOK\n I1_ConsumedAtMostOnce\n I3_OneActiveRun\n NoLiveAbandon\nCHECK_DEADLOCK FALSE\n"
	p := filepath.Join(t.TempDir(), "small.cfg")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

func TestModelCommand(t *testing.T) {
	code, out, errs := runCLI("model", "../../spec/ThreadClaimLapseLiveness.cfg", "../../spec/ThreadClaimLapseAbandonUnfenced.cfg")
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, out, "158347 distinct states (703501 generated), depth 29")
	require.Contains(t, out, "281 distinct states")
	require.Contains(t, out, "invariant NoLiveAbandon violated at depth 8")
	require.Contains(t, out, "Abandon(p1, 1)")

	// A cfg whose declared outcome is not the model's fails.
	code, out, _ = runCLI("model", smallCfg(t, "ok", false))
	require.Equal(t, exitFailed, code, out)
	require.Contains(t, out, "NOT AS EXPECTED")

	code, out, _ = runCLI("model", "-json", smallCfg(t, "ok", true))
	require.Equal(t, exitOK, code, out)
	// -json is the object every command prints, its figures the cfgs'
	// reports.
	var obj struct {
		Command, Verdict string
		Exit             int
		Figures          []modelReport
	}
	require.NoError(t, json.Unmarshal([]byte(out), &obj), out)
	require.Equal(t, "model", obj.Command)
	require.Equal(t, "pass", obj.Verdict)
	require.Len(t, obj.Figures, 1)
	rep := obj.Figures[0]
	require.Equal(t, 9570, rep.Distinct)
	require.True(t, rep.AsExpected)
	require.Nil(t, rep.Violation)
}

// A cfg that declares a violation of a liveness property, which the model
// does not check, is TLC's to find: the model passes it when no invariant
// breaks on the way, and fails it when one does.
func TestModelCommandTLCOnlyExpectation(t *testing.T) {
	code, out, errs := runCLI("model", "../../spec/ThreadClaimLapseNoFairness.cfg")
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, out, "not checked (temporal): EveryPostConsumed")
	require.Contains(t, out, "a property TLC alone checks; no invariant violated on the way, as expected")

	unfenced := smallCfg(t, "violation EveryPostConsumed", false)
	text, err := os.ReadFile(unfenced)
	require.NoError(t, err)
	text = []byte(strings.Replace(string(text), "CHECK_DEADLOCK", "PROPERTIES\n EveryPostConsumed\nCHECK_DEADLOCK", 1))
	require.NoError(t, os.WriteFile(unfenced, text, 0o644))
	code, out, _ = runCLI("model", unfenced)
	require.Equal(t, exitFailed, code, out)
	require.Contains(t, out, "invariant I1_ConsumedAtMostOnce violated")
	require.Contains(t, out, "NOT AS EXPECTED")
}

func TestModelCommandBadInput(t *testing.T) {
	code, out, _ := runCLI("model", "-h")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "usage: tracecheck model")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"model", "no/such.cfg"}, "no/such.cfg"},
		{[]string{"model", t.TempDir()}, "is a directory"},
		{[]string{"model", "-bogus"}, "flag provided but not defined"},
		{[]string{"model", writeFile(t, "SPECIFICATION Spec\nCONSTANTS Procs = {\"p1\"}\n Foo = 1\n")}, "unknown constant Foo"},
	} {
		code, _, errs := runCLI(tc.args...)
		require.Equal(t, exitUsage, code, "%v", tc.args)
		require.Contains(t, errs, tc.want, "%v", tc.args)
	}
	t.Setenv("TLA2TOOLS_JAR", "")
	t.Setenv("TLC_CACHE_DIR", t.TempDir()) // no local jars
	t.Setenv("TLC_OFFLINE", "1")           // and no release downloaded
	code, _, errs := runCLI("model", "-compare-tlc", smallCfg(t, "ok", true))
	require.Equal(t, exitCouldNotRun, code)
	require.Contains(t, errs, "needs a jar")
}

func writeFile(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "bad.cfg")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

func TestConformCommand(t *testing.T) {
	cfg := smallCfg(t, "ok", true)
	code, out, errs := runCLI("conform", "-cfg", cfg)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, out, "41033 of 41033 edges")
	require.Contains(t, out, "\n0 divergences")

	// The mutant must diverge: exit 1, as the contract says for -unfenced.
	code, out, errs = runCLI("conform", "-cfg", cfg, "-unfenced", "-sample", "400", "-seed", "3")
	require.Equal(t, exitFailed, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	require.Contains(t, out, "400 of 400 sampled edges")
	require.NotContains(t, out, "\n0 divergences")
	require.Contains(t, out, "as it must")

	code, out, _ = runCLI("conform", "-h")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "usage: tracecheck conform")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"conform", "-cfg", "../../spec/ThreadClaimLapseAbandonUnfenced.cfg"}, "violates NoLiveAbandon"},
		{[]string{"conform", "-cfg", cfg, "-storage", "mysql://x"}, "want memory or a postgres"},
		{[]string{"conform", "-cfg", cfg, "-sample", "-1"}, "must not be negative"},
		{[]string{"conform", "-cfg", cfg, "extra"}, "unexpected argument"},
	} {
		code, _, errs := runCLI(tc.args...)
		require.Equal(t, exitUsage, code, "%v", tc.args)
		require.True(t, strings.Contains(errs, tc.want), "%v: %s", tc.args, errs)
	}
	code, _, errs = runCLI("conform", "-cfg", cfg, "-storage", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	require.Equal(t, exitCouldNotRun, code, errs)
}
