package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// buildSelf builds this command, for fleet to start as worker processes.
func buildSelf(t *testing.T) string {
	t.Helper()
	if os.Getenv("DATABASE_URL") == "" {
		t.Fatal("DATABASE_URL is not set: the many-process test needs a real PostgreSQL server. " +
			"Run it through scripts/with-postgres (which starts a throwaway cluster) or scripts/test")
	}
	bin := filepath.Join(t.TempDir(), "tracecheck")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// Runner OS processes against one PostgreSQL, with skewed lease clocks, a
// SIGSTOP held past the TTL then SIGCONT, and a SIGKILL: every message is
// consumed exactly once, the trace is a behaviour of the spec (no two runs
// active, no live run abandoned, after every line), and the history is
// linearizable. The summary is printed with its counts.
func TestFleetManyProcesses(t *testing.T) {
	bin := buildSelf(t)
	code, out, errs := runCLI("fleet", "-bin", bin, "-procs", "4", "-threads", "4", "-messages", "6")
	t.Logf("\n%s%s", out, errs)
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "SIGSTOP for")
	require.Contains(t, out, "SIGKILL")
	require.Contains(t, out, "24 posted, 24 consumed exactly once, 0 more than once")
	require.Contains(t, out, "Go trace checker    accepted")
	require.Contains(t, out, "porcupine           linearizable")
	require.Contains(t, out, "PASS")
}

// The mutant across OS processes: with the fences off, a fleet run is
// caught (a message consumed twice, a rejected trace, a history that is not
// linearizable). One run misses it about one time in three; eight runs
// all missing it would mean the checks are blind.
func TestFleetUnfencedMutantCaught(t *testing.T) {
	bin := buildSelf(t)
	for attempt := 1; attempt <= 8; attempt++ {
		code, out, errs := runCLI("fleet", "-bin", bin, "-unfenced", "-procs", "4", "-threads", "4", "-messages", "6")
		require.Equal(t, exitFailed, code, "the mutant must never pass:\n%s%s", out, errs)
		if strings.Contains(errs, "the mutant was caught") {
			t.Logf("caught on attempt %d:\n%s", attempt, errs)
			return
		}
	}
	t.Fatal("eight fleet runs with the fences off went uncaught")
}

// The main job on PostgreSQL: seeded and concurrent executions, each in a
// fresh schema, checked as on the in-memory storage; the mutant is caught.
func TestRunOnPostgres(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: run through scripts/with-postgres or scripts/test")
	}
	code, out, errs := runCLI("run", "-storage", url, "-seeds", "5", "-concurrent", "2")
	require.Equal(t, exitOK, code, "%s%s", out, errs)
	require.Contains(t, out, "PostgreSQL storage")
	require.Contains(t, out, "accepted every trace")
	code, out, errs = runCLI("run", "-storage", url, "-seeds", "5", "-concurrent", "0", "-unfenced")
	require.Equal(t, exitFailed, code, "%s%s", out, errs)
	require.Contains(t, errs, "the mutant was caught")
}
