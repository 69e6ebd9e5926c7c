package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/internal/fleet"
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

// sort -o (and replay -trace-out, mutate's files) through a symbolic link
// writes the file the link names and keeps the link, where the rename
// that replaces a file whole put a regular file in the link's place (and,
// run as root, in the place of a device: sort -o /dev/full replaced it).
func TestTraceOutputThroughASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.ndjson")
	require.NoError(t, os.WriteFile(target, []byte("old\n"), 0o644))
	link := filepath.Join(dir, "link.ndjson")
	require.NoError(t, os.Symlink(target, link))
	code, out, errs := runCLI("sort", "-o", link, okTrace)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink, "the link is kept")
	want, err := os.ReadFile(okTrace)
	require.NoError(t, err)
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "the sorted trace (already in order) is in the file the link names")

}

// sort -o and replay -trace-out refuse a directory, or a file in a
// directory that is not there, as bad usage before anything runs, where
// they failed after the work with exit 4 (which their usage did not
// name) and a message about a temporary file.
func TestTraceOutputFileChecked(t *testing.T) {
	dir := t.TempDir()
	ops := filepath.Join(dir, "seed.ops.ndjson")
	code, out, errs := runCLI("run", "-seeds", "1", "-concurrent", "0", "-steps", "20", "-ops-out", ops)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	missing := filepath.Join(dir, "no", "x.ndjson")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sort", "-o", dir, okTrace}, "-o " + dir + ": is a directory"},
		{[]string{"sort", "-o", missing, okTrace}, "no directory"},
		{[]string{"replay", "-trace-out", dir, ops}, "-trace-out " + dir + ": is a directory"},
		{[]string{"replay", "-trace-out", missing, ops}, "no directory"},
	} {
		code, out, errs := runCLI(c.args...)
		require.Equal(t, exitUsage, code, "%v\nstdout:\n%s\nstderr:\n%s", c.args, out, errs)
		require.Empty(t, out, "%v: nothing run", c.args)
		require.Contains(t, errs, c.want, "%v", c.args)
	}
	require.NoDirExists(t, filepath.Join(dir, "no"))
}

// replay -json's stdout is the one JSON object, passing or failing, where
// it began with the replay's text lines (the log's summary, PASS).
func TestReplayJSONIsOneObject(t *testing.T) {
	dir := t.TempDir()
	for _, unfenced := range []bool{false, true} {
		ops := filepath.Join(dir, fmt.Sprintf("unfenced-%v.ops.ndjson", unfenced))
		args := []string{"run", "-seeds", "1", "-concurrent", "0", "-ops-out", ops, "-shrink=false", "-shrink-dir", dir}
		if unfenced {
			args = append(args, "-unfenced", "-seed", "2") // a seed the mutant fails
		}
		runCLI(args...)
		require.FileExists(t, ops)
		code, out, errs := runCLI("replay", "-json", ops)
		s := jsonOf(t, out)
		require.Equal(t, code, s.Exit, "stderr:\n%s", errs)
		require.Equal(t, "replay", s.Command)
		want := exitOK
		if unfenced {
			want = exitFailed
		}
		require.Equal(t, want, code, "stdout:\n%s\nstderr:\n%s", out, errs)
	}
}

// A probability or a percentage flag refuses NaN, which the range checks
// (x < 0 || x > 1) let through: run -faults NaN ran, and passed.
func TestFloatFlagsRefuseNaN(t *testing.T) {
	for _, args := range [][]string{
		{"run", "-seeds", "1", "-concurrent", "0", "-faults", "NaN"},
		{"run", "-seeds", "1", "-concurrent", "0", "-min-coverage", "NaN"},
		{"run", "-seeds", "1", "-concurrent", "0", "-min-edge-coverage", "NaN"},
		{"fleet", "-storage", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1", "-ask", "NaN"},
	} {
		code, out, errs := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v\nstdout:\n%s\nstderr:\n%s", args, out, errs)
		require.Contains(t, errs, "NaN", "%v", args)
		require.Empty(t, out, "%v: nothing run", args)
	}
}

// A worker whose DATABASE_URL does not parse exits 2 at once, naming it,
// and leaves no history file: it retried for ever (reconnecting cannot
// mend a URL), having created the history. Its -ask refuses NaN too.
func TestWorkerRefusesABadURL(t *testing.T) {
	dir := t.TempDir()
	history := filepath.Join(dir, "w.history")
	for _, c := range []struct{ url, ask, want string }{
		{"postgres://u:secret@localhost:notaport/db", "0", "DATABASE_URL"},
		{"postgres://nobody@127.0.0.1:1/none?connect_timeout=1", "NaN", "-ask NaN"},
	} {
		t.Setenv("DATABASE_URL", c.url)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out, errs bytes.Buffer
		code := Main(ctx, []string{"worker", "-schema", "s", "-name", "w1", "-history", history, "-ask", c.ask}, &out, &errs)
		cancel()
		require.Equal(t, exitUsage, code, "%s: waited 10s for the worker to refuse\nstdout:\n%s\nstderr:\n%s", c.url, out.String(), errs.String())
		require.Contains(t, errs.String(), c.want)
		require.NotContains(t, errs.String(), "secret", "no password shown")
		require.NoFileExists(t, history)
	}
}

// A -storage server that takes the connection and never answers is could
// not run (exit 4) within fleet.ConnectDeadline, saying so, where run, conform
// and fleet waited for ever. (All three open it with fleet.OpenStore;
// run is left out: it opens its stores as conform does.)
func TestStorageThatNeverAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn // taken, never answered
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	url := "postgres://nobody@" + ln.Addr().String() + "/none?sslmode=disable"
	for name, args := range map[string][]string{
		"conform": {"conform", "-cfg", "../../spec/ThreadClaimLapseSmall.cfg", "-storage", url},
		"fleet":   {"fleet", "-bin", "/bin/true", "-storage", url},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), fleet.ConnectDeadline+15*time.Second)
			defer cancel()
			start := time.Now()
			var out, errs bytes.Buffer
			code := Main(ctx, args, &out, &errs)
			require.Equal(t, exitCouldNotRun, code, "waited %v for %s to give up on a server that never answers\nstdout:\n%s\nstderr:\n%s", time.Since(start), name, out.String(), errs.String())
			require.Less(t, time.Since(start), fleet.ConnectDeadline+10*time.Second)
			require.Contains(t, errs.String(), "no answer within")
		})
	}
}

// tlc refuses -keep-logs naming a file and -mutated below 1 before it
// looks for TLC (it ran TLC, printing its version, and then dropped every
// log without a word, or refused -mutated), and model -compare-tlc
// refuses a -jar that is not there by name (java said it found no class).
func TestTLCAndModelFlagsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := copyTo(t, okTrace, dir, "ok.ndjson")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tlc", "-root", "../..", "-keep-logs", file, "batch", okTrace}, "-keep-logs " + file + ": not a directory"},
		{[]string{"tlc", "-root", "../..", "-mutated", "0", "differential"}, "-mutated must be at least 1"},
		{[]string{"model", "-compare-tlc", "-jar", filepath.Join(dir, "nope.jar"), "../../spec/ThreadClaimLapseSmall.cfg"}, "nope.jar: no such file"},
	} {
		code, out, errs := runCLI(c.args...)
		require.Equal(t, exitUsage, code, "%v\nstdout:\n%s\nstderr:\n%s", c.args, out, errs)
		require.Empty(t, out, "%v: nothing run", c.args)
		require.Contains(t, errs, c.want, "%v", c.args)
	}
}

// run refuses -ops-out naming a directory, -shrink-dir naming a file and
// a negative -porcupine-timeout (which porcupine took as no limit), and
// validate -shrink a -shrink-dir naming a file, before anything runs:
// they ran the executions (or checked the files) and then failed with
// exit 4, which validate's usage did not name.
func TestRunAndValidateOutputsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := copyTo(t, okTrace, dir, "ok.ndjson")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-seeds", "1", "-concurrent", "0", "-ops-out", dir}, "-ops-out " + dir + ": is a directory"},
		{[]string{"run", "-seeds", "1", "-concurrent", "0", "-shrink-dir", file}, "-shrink-dir " + file + ": not a directory"},
		{[]string{"run", "-seeds", "0", "-concurrent", "1", "-porcupine-timeout", "-1s"}, "-porcupine-timeout -1s must not be negative"},
		{[]string{"validate", "-shrink", "-shrink-dir", file, "../../tracecheck/testdata/bad-consumed-twice.ndjson"}, "-shrink-dir " + file + ": not a directory"},
	} {
		code, out, errs := runCLI(c.args...)
		require.Equal(t, exitUsage, code, "%v\nstdout:\n%s\nstderr:\n%s", c.args, out, errs)
		require.Empty(t, out, "%v: nothing run", c.args)
		require.Contains(t, errs, c.want, "%v", c.args)
	}
}

// fullWriter fails every write, as /dev/full does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// A command whose checks passed but whose verdict could not be written to
// stdout could not run (exit 4), saying so on stderr, where it exited 0;
// a check that failed keeps its exit code (1) whatever stdout did.
func TestStdoutNotWritable(t *testing.T) {
	for _, args := range [][]string{
		{"validate", "../../tracecheck/testdata/ok-run-output.ndjson"},
		{"show", "../../tracecheck/testdata/ok-run-output.ndjson"},
		{"-h"},
	} {
		var errs bytes.Buffer
		code := Main(context.Background(), args, fullWriter{}, &errs)
		require.Equal(t, exitCouldNotRun, code, "%v\nstderr:\n%s", args, errs.String())
		require.Contains(t, errs.String(), "writing standard output: no space left on device", "%v", args)
	}
	var errs bytes.Buffer
	code := Main(context.Background(), []string{"validate", "../../tracecheck/testdata/bad-tick-gap.ndjson"}, fullWriter{}, &errs)
	require.Equal(t, exitFailed, code, "stderr:\n%s", errs.String())
}

// sort -o - writes to stdout, as without -o; export -itf - is bad usage
// (stdout carries export's summary). Neither writes a file named "-".
func TestDashIsStdoutOrRefused(t *testing.T) {
	b, err := os.ReadFile("../../tracecheck/testdata/ok-run-output.ndjson")
	require.NoError(t, err)
	dir := t.TempDir()
	t.Chdir(dir)
	trace := filepath.Join(dir, "t.ndjson")
	require.NoError(t, os.WriteFile(trace, b, 0o644))
	code, out, errs := runCLI("sort", "-o", "-", trace)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, `"action":"RunStart"`)
	code, _, errs = runCLI("export", "-itf", "-", trace)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "-itf -")
	require.NoFileExists(t, filepath.Join(dir, "-"))
}
