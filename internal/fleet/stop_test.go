package fleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startShell starts sh -c script as a worker process of the run, its done
// channel closed once it exits.
func startShell(t *testing.T, r *run, name, script string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command("sh", "-c", script), done: make(chan struct{})}
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	r.procs = append(r.procs, p)
	return p
}

// A worker that does not stop within the grace of its SIGTERM is killed,
// and is both a kill (its writes in doubt are then settled from storage's
// log, not blamed on its Run's clean stop) and an overrun the report names.
// One that stops on SIGTERM is neither. (At the end of a run it was
// killed before and counted as neither: a write it left in doubt was
// reported as one its Run left open.)
func TestStopWorkersKillsAndNamesAnOverrun(t *testing.T) {
	r := &run{stopGrace: 300 * time.Millisecond}
	ready := filepath.Join(t.TempDir(), "ready")
	stops := startShell(t, r, "p1", "sleep 30")
	ignores := startShell(t, r, "p2", "trap '' TERM; touch "+ready+"; sleep 30")
	waitUntil(t, "p2 to set its trap on SIGTERM", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	begin := time.Now()
	r.stopWorkers()
	require.Less(t, time.Since(begin), 10*time.Second, "stopWorkers waited for a sleep 30")
	select {
	case <-stops.done:
	default:
		t.Fatal("p1 still runs")
	}
	require.Equal(t, []string{"p2"}, r.overran)
	require.Len(t, r.kills, 1)
	require.Equal(t, "p2", r.kills[0].proc.name)
	require.Contains(t, ignores.fate[len(ignores.fate)-1], "did not stop on SIGTERM within 300ms: killed")
	require.Empty(t, stops.fate)
	var rep Report
	rep.stopProblems(r.overran, r.stopGrace)
	require.Equal(t, []string{"clean stop: p2 not gone 300ms after SIGTERM, so killed: a runner's Run ends within two ShutdownGraces once storage answers"}, rep.Problems)
	rep = Report{}
	rep.stopProblems(nil, r.stopGrace)
	require.Empty(t, rep.Problems, "every worker gone in time")
}

// A worker stopped (SIGSTOP) when the run ends is continued before its
// SIGTERM, so that it stops cleanly within the grace: neither killed nor
// an overrun. Written against a mutant of the seventeenth pass that sent
// the SIGTERM alone, which a stopped process holds pending until the
// grace runs out and it is killed.
func TestStopWorkersContinuesAStoppedWorker(t *testing.T) {
	r := &run{stopGrace: 5 * time.Second}
	p := startShell(t, r, "p1", "sleep 30")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGSTOP))
	waitUntil(t, "p1 to stop", func() bool { return procState(t, p.cmd.Process.Pid) == 'T' })
	r.stopWorkers()
	require.Empty(t, r.overran, "a stopped worker killed at the end of the grace")
	require.Empty(t, r.kills)
}
