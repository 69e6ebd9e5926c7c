package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// withPostgres starts scripts/with-postgres on args with no DATABASE_URL,
// so that it starts a throwaway cluster, and returns the command and the
// cluster's directory, read from the script's first line.
func withPostgres(t *testing.T, args ...string) (*exec.Cmd, string, <-chan error) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a cluster of its own")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "../../scripts/with-postgres", args...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dirc := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`throwaway PostgreSQL \S+ in (\S+) `)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				dirc <- m[1]
			}
		}
		close(dirc)
	}()
	var dir string
	select {
	case d, ok := <-dirc:
		if !ok {
			t.Fatal("with-postgres ended without starting a cluster")
		}
		dir = d
	case <-time.After(time.Minute):
		t.Fatal("with-postgres did not say within a minute that its cluster started")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, dir, done
}

// exitCode waits for the script's end and returns its exit code.
func exitCode(t *testing.T, done <-chan error, what string) int {
	t.Helper()
	select {
	case err := <-done:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		}
		t.Fatalf("%s: %v", what, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: with-postgres had not ended 30 s later", what)
	}
	return -1
}

// gone waits for the cluster's directory to be removed.
func gone(t *testing.T, dir, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the cluster's directory %s was still there 30 s later", what, dir)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWithPostgresExitCode: the script exits with the command's own code.
func TestWithPostgresExitCode(t *testing.T) {
	_, dir, done := withPostgres(t, "sh", "-c", "exit 7")
	if code := exitCode(t, done, "a command that exits 7"); code != 7 {
		t.Errorf("with-postgres exited %d, not the command's 7", code)
	}
	gone(t, dir, "after the command's exit")
}

// TestWithPostgresSignalReachesCommand: SIGINT to the script reaches the
// command (which a non-interactive bash would otherwise start with SIGINT
// ignored), and the script exits with the command's code once it has
// handled it.
func TestWithPostgresSignalReachesCommand(t *testing.T) {
	cmd, dir, done := withPostgres(t, "bash", "-c", `trap 'exit 3' INT; while :; do sleep 0.1; done`)
	time.Sleep(500 * time.Millisecond) // the command sets its trap
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, done, "after SIGINT"); code != 3 {
		t.Errorf("with-postgres exited %d after SIGINT, not the command's 3", code)
	}
	gone(t, dir, "after SIGINT")
}

// TestWithPostgresKilledLeavesNothing: after a SIGKILL of the script, its
// watchdog stops the cluster and removes the directory.
func TestWithPostgresKilledLeavesNothing(t *testing.T) {
	cmd, dir, done := withPostgres(t, "sleep", "20")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exitCode(t, done, "after SIGKILL")
	gone(t, dir, "after SIGKILL")
}
