package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// cluster is the fleet's handle on the PostgreSQL server itself, not
// through any worker's proxy: it ends sessions and restarts the server.
type cluster struct {
	url string
	// For restarts: the data directory, pg_ctl, and the user to run it
	// as (empty: this process's user).
	dataDir, pgCtl, runAs string
	// immediate is false when the server acknowledges commits before
	// their WAL is written (synchronous_commit off): an immediate
	// shutdown would then lose acknowledged commits, a fault no
	// deployment that cares accepts, so restarts are fast only.
	immediate bool
}

// admin runs fn on a connection of its own, made for the call: the
// server may have restarted since the last one.
func (c *cluster) admin(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(conn)
}

// terminate ends one session of the application name, picked with rng: one
// inside a transaction when one is seen within window, else any. It
// returns what it ended ("" when the worker had no session).
func (c *cluster) terminate(ctx context.Context, app string, window time.Duration, rng func(n int) int) (string, error) {
	var what string
	err := c.admin(ctx, func(conn *pgx.Conn) error {
		deadline := time.Now().Add(window)
		for {
			var pids []int32
			rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity
				WHERE application_name = $1 AND xact_start IS NOT NULL AND pid <> pg_backend_pid()`, app)
			if err != nil {
				return err
			}
			if pids, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
				return err
			}
			kind := "mid-transaction"
			if len(pids) == 0 && !time.Now().Before(deadline) {
				rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
				if err != nil {
					return err
				}
				if pids, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
					return err
				}
				kind = "idle"
			}
			if len(pids) > 0 {
				pid := pids[rng(len(pids))]
				if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
					return err
				}
				what = fmt.Sprintf("backend %d (%s)", pid, kind)
				return nil
			}
			if !time.Now().Before(deadline) {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	})
	return what, err
}

// ErrNoRestart: the fleet cannot restart the cluster.
var ErrNoRestart = errors.New("cannot restart PostgreSQL")

// prepareRestart finds the data directory (dataDir, else the server's
// SHOW data_directory), pg_ctl (the server's BINDIR, else PATH) and the
// directory's owner, and checks that this process may act as it.
func (c *cluster) prepareRestart(ctx context.Context, dataDir string) error {
	binDir := ""
	err := c.admin(ctx, func(conn *pgx.Conn) error {
		if dataDir == "" {
			if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dataDir); err != nil {
				return fmt.Errorf("SHOW data_directory (needs a superuser; or give -pgdata): %w", err)
			}
		}
		_ = conn.QueryRow(ctx, "SELECT setting FROM pg_config WHERE name = 'BINDIR'").Scan(&binDir)
		var sync string
		if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&sync); err != nil {
			return err
		}
		c.immediate = sync != "off"
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoRestart, err)
	}
	c.pgCtl = filepath.Join(binDir, "pg_ctl")
	if _, err := os.Stat(c.pgCtl); binDir == "" || err != nil {
		if c.pgCtl, err = exec.LookPath("pg_ctl"); err != nil {
			return fmt.Errorf("%w: no pg_ctl on this machine: %w", ErrNoRestart, err)
		}
	}
	fi, err := os.Stat(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("%w: the data directory %s is not a running cluster on this machine: %w", ErrNoRestart, dataDir, err)
	}
	c.dataDir = dataDir
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Geteuid() {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: %s belongs to uid %d, not to this user", ErrNoRestart, dataDir, st.Uid)
	}
	u, err := user.LookupId(strconv.Itoa(int(st.Uid)))
	if err != nil {
		return fmt.Errorf("%w: the owner of %s: %w", ErrNoRestart, dataDir, err)
	}
	c.runAs = u.Username
	return nil
}

// asyncCommits sets synchronous_commit = off on the cluster, and
// wal_writer_delay to a second, so that an immediate restart loses the
// commits of up to three seconds before it (KindLose); restore resets
// both. The server must let this user ALTER SYSTEM (a superuser).
func (c *cluster) asyncCommits(ctx context.Context) (restore func(), err error) {
	set := func(ctx context.Context, stmts ...string) error {
		return c.admin(ctx, func(conn *pgx.Conn) error {
			for _, s := range append(stmts, "SELECT pg_reload_conf()") {
				if _, err := conn.Exec(ctx, s); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			return nil
		})
	}
	if err := set(ctx, "ALTER SYSTEM SET synchronous_commit = off", "ALTER SYSTEM SET wal_writer_delay = '1s'"); err != nil {
		return nil, fmt.Errorf("%w: to lose commits: %w", ErrNoRestart, err)
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for set(rctx, "ALTER SYSTEM RESET synchronous_commit", "ALTER SYSTEM RESET wal_writer_delay") != nil && rctx.Err() == nil {
			hold(rctx, 200*time.Millisecond) // the server may be restarting
		}
	}, nil
}

// restart restarts the server with pg_ctl in mode "fast" or "immediate"
// and waits until it accepts connections again.
func (c *cluster) restart(ctx context.Context, mode string) error {
	args := []string{c.pgCtl, "restart", "-D", c.dataDir, "-m", mode, "-w", "-t", "60",
		"-l", filepath.Join(c.dataDir, "fleet-restart.log")}
	if c.runAs != "" {
		args = append([]string{"runuser", "-u", c.runAs, "--"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = filepath.Dir(c.dataDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl restart -m %s: %w: %s", mode, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// pick returns a function that draws from rng under the run's lock.
func (r *run) pick() func(n int) int {
	return func(n int) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.rng.IntN(n)
	}
}
