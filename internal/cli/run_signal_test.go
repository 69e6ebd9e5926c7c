//go:build unix

package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// run -storage on Ctrl-C: the executions are cancelled and each one's
// schema is dropped before run exits (4: it could not finish); none of
// the schemas it had made is left.
func TestRunStorageSignalDropsSchemas(t *testing.T) {
	bin := buildSelf(t)
	url := databaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	schemas := func() []string {
		rows, err := conn.Query(ctx, "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'tcrun\\_%'")
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	before := map[string]bool{}
	for _, s := range schemas() {
		before[s] = true
	}
	cmd := exec.CommandContext(ctx, bin, "run", "-storage", url, "-seeds", "100000", "-concurrent", "0", "-workers", "2", "-shrink-dir", t.TempDir())
	errFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer errFile.Close()
	cmd.Stderr = errFile
	require.NoError(t, cmd.Start())
	var seen []string
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) == 0 {
		require.True(t, time.Now().Before(deadline), "waited 30 s for run to make a schema of its own")
		for _, s := range schemas() {
			if !before[s] {
				seen = append(seen, s)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "run exits by itself after SIGINT (within the test's 2 minutes): %v", err)
	b, _ := os.ReadFile(errFile.Name())
	require.Equal(t, exitCouldNotRun, exit.ExitCode(), "stderr: %s", b)
	require.Contains(t, string(b), "stopped: interrupt signal received", "stderr names the signal, not only a canceled context")
	left := map[string]bool{}
	for _, s := range schemas() {
		left[s] = true
	}
	for _, s := range seen {
		require.False(t, left[s], "schema %s is left after SIGINT", s)
	}
}
