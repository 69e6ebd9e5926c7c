package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/internal/tlc"
)

// databaseURL returns DATABASE_URL, failing the test when it is not set.
func databaseURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: the many-process tests need a real PostgreSQL server. " +
			"Run them through scripts/with-postgres (which starts a throwaway cluster) or scripts/test")
	}
	return url
}

// buildSelf builds this command, for fleet to start as worker processes.
func buildSelf(t *testing.T) string {
	t.Helper()
	databaseURL(t)
	bin := filepath.Join(t.TempDir(), "tracecheck")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/tracecheck").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// fleetReport is the part of `fleet -json` the tests read.
type fleetReport struct {
	Posted        int            `json:"posted"`
	ConsumedOnce  int            `json:"consumed_once"`
	ConsumedTwice int            `json:"consumed_twice"`
	Lost          int            `json:"lost"`
	MaxActiveRuns int            `json:"max_active_runs"`
	LiveAbandoned int            `json:"live_runs_abandoned"`
	HandoverP50   *float64       `json:"handover_p50_ms"`
	HandoverP99   *float64       `json:"handover_p99_ms"`
	Nemesis       map[string]int `json:"nemesis"`
	TraceAccepted bool           `json:"trace_accepted"`
	Linearizable  bool           `json:"linearizable"`
	Problems      []string       `json:"problems"`
	TLC           string         `json:"tlc"`
	FusedStarts   int            `json:"fused_starts"`
	SharedCommits int            `json:"shared_commits"`
	CommitUnknown struct {
		Events        *int `json:"events"`
		Disagreements int  `json:"disagreements"`
	} `json:"commit_unknown"`
}

func readReport(t *testing.T, path string) fleetReport {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var rep fleetReport
	require.NoError(t, json.Unmarshal(b, &rep), "%s", b)
	require.NotNil(t, rep.HandoverP50, "handover_p50_ms is in the JSON")
	require.NotNil(t, rep.HandoverP99, "handover_p99_ms is in the JSON")
	require.NotNil(t, rep.CommitUnknown.Events, "commit_unknown.events is in the JSON")
	return rep
}

// The short soak the suite runs, with the fences on: runner processes on
// PostgreSQL under every default nemesis (stop, kill, clock jumps,
// terminated backends, partitions, latency, delayed COMMITs; see
// soakArgs). Every message is consumed exactly once, at most one run
// of a thread is ever active, the whole trace is a behaviour of the spec
// (writes whose commit was unknown included: each is counted, and its
// resolution agrees with storage's log) and the history is linearizable;
// the JSON report says so and the HTML page renders.
func TestFleetSoak(t *testing.T) {
	bin := buildSelf(t)
	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "report.json"), filepath.Join(dir, "report.html")
	args := append([]string{"fleet", "-bin", bin, "-json", jsonPath, "-html", htmlPath}, soakArgs...)
	_, tlcErr := tlc.Find(context.Background(), findConfig("../.."))
	if tlcErr == nil {
		args = append(args, "-tlc-sample", "2", "-root", "../..")
	} else {
		t.Logf("TLC not found (%v): the sample of threads is not replayed through TLC", tlcErr)
	}
	code, out, errs := runCLI(args...)
	t.Logf("\n%s%s", out, errs)
	require.Equal(t, exitOK, code)
	rep := readReport(t, jsonPath)
	if tlcErr == nil {
		require.Equal(t, "2 of 2 threads accepted", rep.TLC)
	}
	require.Equal(t, 600, rep.Posted)
	require.Equal(t, 600, rep.ConsumedOnce)
	require.Zero(t, rep.ConsumedTwice)
	require.Zero(t, rep.Lost)
	require.LessOrEqual(t, rep.MaxActiveRuns, 1)
	require.Zero(t, rep.LiveAbandoned)
	require.True(t, rep.TraceAccepted)
	require.True(t, rep.Linearizable)
	require.Empty(t, rep.Problems)
	kinds := 0
	for _, n := range rep.Nemesis {
		if n > 0 {
			kinds++
		}
	}
	require.GreaterOrEqual(t, kinds, 4, "the nemesis injected several kinds of fault: %v", rep.Nemesis)
	require.Positive(t, rep.Nemesis["terminate"]+rep.Nemesis["partition"], "backends were terminated or partitioned: %v", rep.Nemesis)
	require.Zero(t, rep.CommitUnknown.Disagreements)
	require.Contains(t, out, "commit unknown")
	require.Contains(t, out, "PASS")
	checkHTML(t, htmlPath)
}

// TestFleetSoakBacklog is the soak on 8 threads with no questions of its
// own: backlogs wait behind runs' prompts, so the runners start runs with
// the end of the run before (core.Workspace.RunEndThenStart), under the
// nemesis kinds that take leases from live holders and leave commits
// unknown. The checks pass, and the report counts those starts.
//
// Under SIGKILL (kill) too: a process killed after such a transaction
// committed, before it wrote the transaction's lines to its history,
// leaves storage with the RunEnd, the Plan and the RunStart (migration
// 0012). Before storage kept the Plan, the merged trace's RunStart was
// rejected (pc[p] is not "planned"), in one fresh-clone CI run of five on
// 4 Dec 2026.
func TestFleetSoakBacklog(t *testing.T) {
	bin := buildSelf(t)
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	code, out, errs := runCLI("fleet", "-bin", bin, "-json", jsonPath, "-procs", "4", "-threads", "8", "-messages", "600", "-ttl", "50ms",
		"-max-skew", "200ms", "-ask", "0", "-nemesis", "stop,kill,clock,latency,commit,terminate")
	t.Logf("\n%s%s", out, errs)
	require.Equal(t, exitOK, code)
	rep := readReport(t, jsonPath)
	require.Equal(t, 600, rep.ConsumedOnce)
	require.True(t, rep.TraceAccepted)
	require.True(t, rep.Linearizable)
	require.Empty(t, rep.Problems)
	require.Positive(t, rep.FusedStarts, "no run started with the end of the run before")
	require.Positive(t, rep.SharedCommits, "no transaction wrote two threads' events: no writes shared a round trip's commit")
}

// checkHTML loads the report page in headless chromium, when installed,
// and looks for the timeline in the DOM it built.
func checkHTML(t *testing.T, path string) {
	t.Helper()
	page, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(page), `<svg id="timeline"`)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Logf("chromium is not installed: the HTML report was not rendered")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://"+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "chromium --dump-dom (within 60s): %s", stderr.String())
	dom := stdout.String()
	require.Contains(t, dom, `id="timeline"`, "the timeline is in the rendered DOM")
	require.Contains(t, dom, `id="verdict" class="pass">PASS`)
	require.Regexp(t, `<rect class="ev ev-[a-z]+"`, dom, "nemesis events are drawn")
	require.Regexp(t, `<rect class="tput"`, dom, "throughput is drawn")
}

// soakArgs is the short soak: 4 runner processes, 32 threads, 600
// messages, a 50ms TTL, a fault every TTL on average, lease clocks spread
// over four TTLs (so every faster process can take a slower one's fresh
// lease: lapses under live holders all the time) and a question in half
// the runs (so Replies are many), under every default nemesis (all but
// restart, which TestFleetPostgresRestart runs on a cluster of its own).
// It takes 10-20 s.
var soakArgs = []string{"-procs", "4", "-threads", "32", "-messages", "600", "-ttl", "50ms",
	"-max-skew", "200ms", "-ask", "0.5"}

// killCheckArgs is the short soak with the nemesis kinds that take leases
// from live holders (stop, kill, clock jumps, latency, delayed COMMITs),
// over a mutant run's default of 1,000 messages (fleet.MutantMessages):
// each single fence off is caught in it in at least 19 of 20 seeded runs
// (internal/fleet/BENCH.md has the tallies and the command). Terminated backends and
// partitions end rounds instead (the worker gives its claim up), and with
// them in the draw the Abandon mutant was caught in only 16 of 20 runs.
var killCheckArgs = []string{"-procs", "4", "-threads", "32", "-ttl", "50ms", "-max-skew", "200ms", "-ask", "0.5",
	"-nemesis", "stop,kill,clock,latency,commit"}

// The kill check: with the Abandon fence alone off, the soak catches the
// mutant (exit 1, not 5). A caught mutant is not timing-free, so one miss
// is allowed: two in a row would put the check far below its measured
// rate.
func TestFleetSingleFenceMutantCaught(t *testing.T) {
	bin := buildSelf(t)
	for attempt := 1; attempt <= 2; attempt++ {
		args := append([]string{"fleet", "-bin", bin, "-unfenced=abandon", "-seed", strconv.Itoa(attempt)}, killCheckArgs...)
		code, out, errs := runCLI(args...)
		if code == exitFailed {
			require.Contains(t, out, "the mutant was caught")
			t.Logf("caught on attempt %d:\n%s", attempt, out)
			return
		}
		require.Equal(t, exitSurvived, code, "a mutant run either is caught (1) or survives (5):\n%s%s", out, errs)
		require.Contains(t, out, "SURVIVED")
		t.Logf("attempt %d: the mutant survived", attempt)
	}
	t.Fatal("the Abandon fence was off and two fleet soaks missed it")
}

// B4: a mutant nothing could catch — one process, no fault, so no lease
// is ever taken from a live holder — exits 5, not 1: a CI step that
// expects the mutant to be caught sees that the checks were blind.
func TestFleetMutantSurvivedExits5(t *testing.T) {
	bin := buildSelf(t)
	code, out, errs := runCLI("fleet", "-bin", bin, "-unfenced", "-procs", "1", "-nemesis", "none", "-threads", "1", "-messages", "3")
	require.Equal(t, exitSurvived, code, "%s%s", out, errs)
	require.Contains(t, out, "SURVIVED")
}

// B7: every flag and argument is checked before anything runs: exit 2,
// naming the flag. The storage named is unreachable, so a check that
// came too late would exit 4 instead.
func TestFleetAndWorkerFlagsValidatedUpFront(t *testing.T) {
	dir := t.TempDir()
	unreachable := "postgres://127.0.0.1:1/none?connect_timeout=1"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fleet", "-ttl", "2ns"}, "-ttl 2ns"},
		{[]string{"fleet", "extra"}, "unexpected argument extra"},
		{[]string{"fleet", "-procs", "0"}, "-procs 0"},
		{[]string{"fleet", "-threads", "0"}, "-threads 0"},
		{[]string{"fleet", "-messages", "-5"}, "-messages -5"},
		{[]string{"fleet", "-posters", "0"}, "-posters 0"},
		{[]string{"fleet", "-duration", "-1s"}, "-duration -1s"},
		{[]string{"fleet", "-timeout", "0s"}, "-timeout 0s"},
		{[]string{"fleet", "-turns", "-1"}, "-turns -1"},
		{[]string{"fleet", "-agent", "sleepy"}, `-agent "sleepy"`},
		{[]string{"fleet", "-nemesis", "flood"}, `"flood" is not a kind`},
		{[]string{"fleet", "-unfenced=claim"}, "-unfenced"},
		{[]string{"fleet", "-procs", "1", "-nemesis", "kill"}, "-procs 1"},
		{[]string{"fleet", "-json", dir}, "-json " + dir + ": is a directory"},
		{[]string{"fleet", "-html", dir}, "-html " + dir + ": is a directory"},
		{[]string{"fleet", "-dir", filepath.Dir(dir)}, "is not empty"},
		{[]string{"worker", "-schema", "s", "-name", "p", "-history", "h", "-ttl", "0"}, "-ttl 0s"},
		{[]string{"worker", "-schema", "s", "-name", "p", "-history", "h", "extra"}, "unexpected argument extra"},
		{[]string{"worker", "-name", "p", "-history", "h"}, "-schema"},
		{[]string{"worker", "-schema", "s", "-name", "p", "-history", "h", "-turns", "-2"}, "-turns -2"},
		{[]string{"worker", "-schema", "s", "-name", "p", "-history", "h", "-agent", "sleepy"}, `-agent "sleepy"`},
		{[]string{"worker", "-schema", "s", "-name", "p", "-history", "h", "-unfenced=claim"}, "-unfenced"},
	} {
		args := c.args
		if args[0] == "fleet" {
			args = append([]string{"fleet", "-storage", unreachable}, args[1:]...)
		}
		t.Setenv("DATABASE_URL", unreachable)
		code, out, errs := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v:\n%s%s", c.args, out, errs)
		require.Contains(t, errs, c.want, "%v", c.args)
	}
}

// B6: a fleet that cannot run exits 4, not 2 (bad usage) nor 1 (a check
// failed): the database unreachable; a worker that dies by itself.
func TestFleetCouldNotRunExits4(t *testing.T) {
	code, out, errs := runCLI("fleet", "-storage", "postgres://127.0.0.1:1/none?connect_timeout=2")
	require.Equal(t, exitCouldNotRun, code, "%s%s", out, errs)
	require.Contains(t, errs, "connect")

	databaseURL(t)
	start := time.Now()
	code, out, errs = runCLI("fleet", "-bin", "/bin/false", "-timeout", "10m")
	require.Equal(t, exitCouldNotRun, code, "%s%s", out, errs)
	require.Contains(t, errs, "a worker exited by itself")
	require.Less(t, time.Since(start), 5*time.Minute, "the fleet noticed the dead worker before its -timeout")
}

var (
	startedRE = regexp.MustCompile(`^started (p\d+), pid (\d+)`)
	headerRE  = regexp.MustCompile(`schema (\S+), directory (\S+)`)
)

// B2 and B8: SIGTERM or SIGINT to a running fleet stops its workers and
// drops its schema and temporary directory before it exits (4: it could
// not finish). While it ran, no worker's command line held the database
// URL.
func TestFleetSignalCleansUp(t *testing.T) {
	bin := buildSelf(t)
	url := databaseURL(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "fleet", "-bin", bin, "-procs", "3", "-threads", "4", "-messages", "100000", "-duration", "10m")
			// Files, not buffers: exec then copies nothing in goroutines
			// of its own, and the test reads stdout as the fleet writes.
			stdout, w, err := os.Pipe()
			require.NoError(t, err)
			defer stdout.Close()
			errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
			require.NoError(t, err)
			defer errFile.Close()
			cmd.Stdout, cmd.Stderr = w, errFile
			require.NoError(t, cmd.Start())
			w.Close()
			stderr := func() string { b, _ := os.ReadFile(errFile.Name()); return string(b) }
			var schema, dir string
			var pids []int
			sc := bufio.NewScanner(stdout)
			for len(pids) < 3 && sc.Scan() {
				line := sc.Text()
				if m := headerRE.FindStringSubmatch(line); m != nil {
					schema, dir = m[1], m[2]
				}
				if m := startedRE.FindStringSubmatch(line); m != nil {
					pid, _ := strconv.Atoi(m[2])
					pids = append(pids, pid)
				}
			}
			require.Len(t, pids, 3, "waited for the fleet to print its three workers' pids (stderr: %s)", stderr())
			require.NotEmpty(t, schema)
			require.DirExists(t, dir)
			for _, pid := range pids {
				argv, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				require.NoError(t, err)
				require.NotContains(t, string(argv), url, "worker %d's command line", pid)
			}
			time.Sleep(500 * time.Millisecond) // the workers at work
			require.NoError(t, cmd.Process.Signal(sig))
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			err = cmd.Wait()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the fleet exits by itself after %v (within the test's 2 minutes): %v", sig, err)
			require.Equal(t, exitCouldNotRun, exit.ExitCode(), "stderr: %s", stderr())
			require.Contains(t, stderr(), "interrupted")
			for _, pid := range pids {
				require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "worker %d is gone", pid)
			}
			require.NoDirExists(t, dir)
			conn, err := pgx.Connect(ctx, url)
			require.NoError(t, err)
			defer conn.Close(ctx)
			var n int
			require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", schema).Scan(&n))
			require.Zero(t, n, "schema %s was dropped", schema)
		})
	}
}

// PostgreSQL restarts, fast and immediate, in the middle of a run: the
// fleet restarts a cluster of its own (scripts/with-postgres starts one
// for this test alone, since every session on it is cut off), the
// workers reconnect by themselves, and the checks pass.
// Writes whose commit is unknown are many here (the server goes away
// under them): a Claim that committed unseen and whose lease was taken
// over before the server answered again must still end with a Crash, or
// the process's next Claim of the thread is rejected; that failed before
// a Crash asked storage's log (core.TraceLogReader). It takes 15-20 s.
func TestFleetPostgresRestart(t *testing.T) {
	rep, _, _ := fleetOnOwnCluster(t, "-nemesis", "restart,kill",
		"-nemesis-every", "1s", "-threads", "8", "-messages", "160", "-duration", "4s")
	require.GreaterOrEqual(t, rep.Nemesis["restart"], 1, "PostgreSQL was restarted")
	require.Equal(t, rep.Posted, rep.ConsumedOnce)
	require.Zero(t, rep.ConsumedTwice)
	require.True(t, rep.TraceAccepted)
	require.True(t, rep.Linearizable)
	require.Zero(t, rep.CommitUnknown.Disagreements)
}

// fleetOnOwnCluster runs a fleet with args on a throwaway cluster of the
// test's own (scripts/with-postgres, DATABASE_URL unset, so that the
// nemesis may restart it), which must pass within 4 minutes, and returns
// its report, the report's JSON file and its output.
func fleetOnOwnCluster(t *testing.T, args ...string) (rep fleetReport, jsonPath, out string) {
	t.Helper()
	bin := buildSelf(t)
	jsonPath = filepath.Join(t.TempDir(), "report.json")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	script, err := filepath.Abs("../../scripts/with-postgres")
	require.NoError(t, err)
	args = append(append([]string{bin, "fleet", "-bin", bin}, args...), "-json", jsonPath)
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Env = slicesWithout(os.Environ(), "DATABASE_URL=")
	b, err := cmd.CombinedOutput()
	t.Logf("\n%s", b)
	require.NoError(t, err, "the run, within 4 minutes")
	return readReport(t, jsonPath), jsonPath, string(b)
}

// PostgreSQL that loses acknowledged commits (the lose nemesis:
// synchronous_commit off, then immediate restarts, on a cluster of the
// test's own): the run ends by itself, with every message storage kept
// consumed exactly once; the report counts what storage lost, by action;
// the trace of what storage kept is a behaviour of the spec and its
// history linearizable. Before the Stores dropped a cache ahead of
// storage, threads wedged ("stored log is inconsistent") and the run
// never ended; before the merge knew lost writes, the trace was rejected
// with a misleading story. It takes 15-25 s.
func TestFleetLosesCommits(t *testing.T) {
	rep, jsonPath, out := fleetOnOwnCluster(t, "-nemesis", "lose,kill", "-seed", "1",
		"-nemesis-every", "1s", "-threads", "8", "-messages", "400", "-duration", "6s", "-timeout", "60s")
	var lost struct {
		Writes int            `json:"storage_lost_writes"`
		By     map[string]int `json:"storage_lost"`
		Posts  *int           `json:"posts_lost"`
	}
	b, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &lost))
	require.GreaterOrEqual(t, rep.Nemesis["lose"], 1, "PostgreSQL lost commits")
	require.NotNil(t, lost.Posts, "posts_lost is in the JSON")
	require.Positive(t, lost.Writes, "storage lost no acknowledged write: the nemesis did nothing")
	sum := 0
	for _, n := range lost.By {
		sum += n
	}
	require.Equal(t, lost.Writes, sum, "storage_lost by action adds up")
	require.Contains(t, out, fmt.Sprintf("storage lost        %d acknowledged writes", lost.Writes))
	require.Equal(t, rep.Posted, rep.ConsumedOnce)
	require.Zero(t, rep.ConsumedTwice)
	require.Zero(t, rep.Lost)
	require.True(t, rep.TraceAccepted, "%v", rep.Problems)
	require.True(t, rep.Linearizable, "%v", rep.Problems)
	require.Empty(t, rep.Problems)
}

func slicesWithout(env []string, prefix string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
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
	require.Contains(t, out, "the mutant was caught")
}

// An unparsable database URL is bad input (exit 2), for every command
// that takes -storage, and nothing is written; it exited 4, "could not
// run", from the failed connection.
func TestUnparsableStorageURL(t *testing.T) {
	dir := t.TempDir()
	bad := "postgres://user:secret@%zz/db"
	for _, args := range [][]string{
		{"run", "-storage", bad, "-seeds", "1", "-trace-dir", filepath.Join(dir, "traces")},
		{"fleet", "-storage", bad, "-bin", "/bin/true", "-json", filepath.Join(dir, "fleet.json")},
		{"conform", "-storage", bad, "-cfg", "../../spec/ThreadClaimLapseSmall.cfg"},
	} {
		code, out, errs := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v: %s%s", args, out, errs)
		require.Contains(t, errs, "-storage", "%v names the flag", args)
		require.NotContains(t, out+errs, "secret", "%v shows the password", args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing written")
}
