package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/internal/sim/shrink"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// fleetStories is the part of `fleet -json` the shrinking tests read.
type fleetStories struct {
	Stories []struct {
		Failure string   `json:"failure"`
		From    int      `json:"from"`
		Shrunk  int      `json:"shrunk"`
		States  int      `json:"states"`
		Files   []string `json:"files"`
		Error   string   `json:"error"`
	} `json:"stories"`
}

// A fleet with one fence off — OS processes on PostgreSQL — is caught,
// and its rejected trace shrinks to a story no longer than TLC's
// shortest counterexample for the property that fence guards (a RunStart
// past its fence: I1, 9 states; an Abandon past its fence:
// NoLiveAbandon, 8), rejected again at the same action and guard when the
// story's file is checked; its non-linearizable history shrinks to a few
// operations, not linearizable when read back from its file.
// fleetStorySlack is how many states longer than TLC's shortest a
// fleet's story may be (see TestFleetFailuresShrink).
const fleetStorySlack = 4

func TestFleetFailuresShrink(t *testing.T) {
	bin := buildSelf(t)
	for _, c := range []struct {
		fence, failure string
		states         int
	}{
		{"start", "trace: RunStart rejected, Fenced => HasLease(p)", 9},
		{"abandon", "trace: Abandon rejected, FenceAbandon => HasLease(p)", 8},
	} {
		t.Run(c.fence, func(t *testing.T) {
			for attempt := 1; ; attempt++ {
				dir := t.TempDir()
				report := filepath.Join(dir, "report.json")
				args := append([]string{"fleet", "-bin", bin, "-unfenced=" + c.fence, "-seed", strconv.Itoa(attempt),
					"-json", report, "-shrink-dir", dir}, killCheckArgs...)
				code, out, errs := runCLI(args...)
				if code == exitSurvived && attempt < 2 {
					t.Logf("attempt %d: the mutant survived", attempt)
					continue
				}
				require.Equal(t, exitFailed, code, "%s%s", out, errs)
				b, err := os.ReadFile(report)
				require.NoError(t, err)
				var rep fleetStories
				require.NoError(t, json.Unmarshal(b, &rep))
				require.NotEmpty(t, rep.Stories, "a caught mutant's failures are shrunk")
				sawTrace := false
				for _, st := range rep.Stories {
					require.Empty(t, st.Error)
					t.Logf("%s: %d -> %d (%d states)", st.Failure, st.From, st.Shrunk, st.States)
					if st.Failure == "not linearizable" {
						requireHistoryStory(t, st.Files[1], st.Shrunk)
						continue
					}
					if st.Failure != c.failure {
						continue // the trace was rejected elsewhere first
					}
					sawTrace = true
					// A fleet's failure comes from real processes, not a
					// seeded log: its story is not the same run to run, and
					// the shortest one its lines hold can be longer than
					// TLC's (an Abandon past its fence by a process that
					// claimed after the run started needs a second Lapse:
					// 10 states, against TLC's 8). The bound leaves that
					// room. Deletion alone once stopped at 16 states for a
					// RunStart (CI); the subset search after it
					// (shrink.fewestStates) finds 7 in the lines of such a
					// story (shrink's TestShrinkTraceFewestStates).
					require.LessOrEqual(t, st.States, c.states+fleetStorySlack, "%s: %d states, TLC's shortest is %d", st.Failure, st.States, c.states)
					require.True(t, strings.HasPrefix(filepath.Base(st.Files[1]), "trace.shrunk-"))
					_, err := tracecheck.CheckFile(st.Files[1])
					var v *tracecheck.Violation
					require.ErrorAs(t, err, &v)
					require.Equal(t, c.failure, shrink.Failure{Check: shrink.CheckTrace, Action: v.Action, Rule: v.Rule}.String())
					require.Contains(t, out+errs, "shrunk to "+strconv.Itoa(st.Shrunk)+" lines")
				}
				if !sawTrace && attempt < 2 {
					continue
				}
				require.True(t, sawTrace, "no story of %s", c.failure)
				return
			}
		})
	}
}

// requireHistoryStory reads a shrunk history file back: porcupine finds
// its n operations not linearizable.
func requireHistoryStory(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	lines, err := tracecheck.ReadHistory(f, path)
	require.NoError(t, err)
	ops := tracecheck.OperationsFromTrace(lines)
	require.Len(t, ops, n)
	_, err = tracecheck.CheckLinearizable(ops, time.Minute, "")
	require.True(t, errors.Is(err, tracecheck.ErrNotLinearizable), "%s: %v", path, err)
	require.LessOrEqual(t, n, 6)
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(tracecheck.LeaseModel(), ops, 0))
}

// validate -shrink: a rejected trace file's story is written to
// -shrink-dir, never beside it (there it would be read as a fixture),
// rejected again at the same action and rule, and no longer; an accepted
// file is not shrunk (nothing written). A failure of the order rule keeps
// its line out of order in the story.
func TestValidateShrink(t *testing.T) {
	dir, outDir := t.TempDir(), t.TempDir()
	fixtures, err := filepath.Abs("../../tracecheck/testdata")
	require.NoError(t, err)
	copyFixture := func(name string) string {
		b, err := os.ReadFile(filepath.Join(fixtures, name))
		require.NoError(t, err)
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, b, 0o644))
		return path
	}
	for _, c := range []struct {
		file, story string
		lines       int
	}{
		{"bad-consumed-twice.ndjson", "bad-consumed-twice.shrunk-RunStart-Fenced-HasLease-p.ndjson", 5},
		{"bad-tick-gap.ndjson", "bad-tick-gap.shrunk-Ask-tick.ndjson", 5},
	} {
		path := copyFixture(c.file)
		_, err := tracecheck.CheckFile(path)
		var want *tracecheck.Violation
		require.ErrorAs(t, err, &want)
		code, out, errs := runCLI("validate", "-shrink", "-shrink-dir", outDir, path)
		require.Equal(t, exitFailed, code, "%s%s", out, errs)
		require.Contains(t, out, "shrunk to "+strconv.Itoa(c.lines)+" lines")
		story := filepath.Join(outDir, c.story)
		lines, err := tracecheck.ReadFile(story)
		require.NoError(t, err)
		require.Len(t, lines, c.lines)
		_, err = tracecheck.CheckFile(story)
		var v *tracecheck.Violation
		require.ErrorAs(t, err, &v)
		require.Equal(t, []any{want.Action, want.Rule}, []any{v.Action, v.Rule})
		require.Equal(t, c.lines, v.Line, "the story ends at its rejected line")
	}

	ok := copyFixture("ok-run-ask-reply.ndjson")
	code, out, errs := runCLI("validate", "-shrink", "-shrink-dir", outDir, ok)
	require.Equal(t, 0, code, "%s%s", out, errs)
	require.NotContains(t, out, "shrunk")
	written, err := filepath.Glob(filepath.Join(outDir, "*.shrunk-*"))
	require.NoError(t, err)
	require.Len(t, written, 2, "only the rejected files' stories: %v", written)
	beside, err := filepath.Glob(filepath.Join(dir, "*.shrunk-*"))
	require.NoError(t, err)
	require.Empty(t, beside, "nothing is written beside the input")

	// Without -shrink-dir the story goes to ./tracecheck-out, not beside
	// the input.
	t.Chdir(t.TempDir())
	code, out, errs = runCLI("validate", "-shrink", copyFixture("bad-consumed-twice.ndjson"))
	require.Equal(t, exitFailed, code, "%s%s", out, errs)
	beside, err = filepath.Glob(filepath.Join(dir, "*.shrunk-*"))
	require.NoError(t, err)
	require.Empty(t, beside, "nothing is written beside the input")
	_, err = os.Stat(filepath.Join("tracecheck-out", "bad-consumed-twice.shrunk-RunStart-Fenced-HasLease-p.ndjson"))
	require.NoError(t, err)
}

// -shrink-dir is checked before the fleet runs: a file is bad usage
// (exit 2), even with the database unreachable.
func TestFleetShrinkDirValidated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
	code, out, errs := runCLI("fleet", "-shrink-dir", file)
	require.Equal(t, exitUsage, code, "%s%s", out, errs)
	require.Contains(t, errs, "-shrink-dir")
}
