package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// A write decided from the cache is one statement (save_unchanged,
// migration 0006), sent autocommitted in one round trip. Its check is what
// makes that safe: when the thread's row or its lease changed behind the
// Store's back (here, with plain SQL, so the Store's cache is stale
// without knowing it), the statement raises, nothing of it is kept, and
// the write runs again with locking reads — and is refused when the lease
// is no longer the claim's.
func TestOneStatementCheck(t *testing.T) {
	t.Parallel() // schemas of their own
	for _, tt := range []struct {
		name   string
		change string // SQL on the thread "t"; %s is the schema
		busy   bool   // the write is refused (the claim lost the lease)
	}{
		{"unchanged", ``, false},
		{"version", `UPDATE %s.threads SET version = version + 1 WHERE id = 't'`, false},
		{"holder", `UPDATE %s.leases SET holder = 'hx' WHERE key = 't'`, true},
		{"expiry", `UPDATE %s.leases SET expires_at = expires_at + interval '1 second' WHERE key = 't'`, false},
		{"lease gone", `DELETE FROM %s.leases WHERE key = 't'`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, checkOneStatement(t, newStore(t), tt.change, tt.busy))
		})
	}
}

// The check's mutants are caught: each lets a write under a lease that
// changed hands (behind the Store's back, with SQL) commit. The write's
// statement with no check at all; with the row's check but not the
// lease's; and the right statement over a schema whose trigger no longer
// copies the lease onto the thread's row (migration 0007), dropped after
// the claim. (Dropped before it, every check fails, as the copy never
// names the claim's holder: slow, but safe.)
func TestOneStatementCheckMutant(t *testing.T) {
	t.Parallel() // schemas of their own
	for _, tt := range []struct {
		name   string
		mutate func(t *testing.T, s *Store)
		change string // SQL run behind the Store's back after the claim
	}{
		{"no check", func(t *testing.T, s *Store) {
			mutateStatement(s, &s.q.saveUnchanged, fmt.Sprintf(`WITH w AS (
				UPDATE %[1]s.threads SET version = $6, taken = $7, last_message = $8, active_runs = $9
				 WHERE id = $1 AND $2::bigint IS NOT NULL AND $3::bigint IS NOT NULL AND $4::text IS NOT NULL AND $5::timestamptz IS NOT NULL
				RETURNING id
			)
			INSERT INTO %[1]s.events (thread_id, seq, version, kind, at, message, text, run, request, holder)
			SELECT id, $10::bigint, $11::bigint, $12::text, $13::timestamptz, $14::bigint, $15::text, $16::bigint, $17::bigint, $18::text
			  FROM w WHERE $10::bigint IS NOT NULL`, pgx.Identifier{s.Schema()}.Sanitize()))
		}, changeHolder},
		{"no lease check", func(t *testing.T, s *Store) {
			mutateStatement(s, &s.q.saveUnchanged, strings.Replace(s.q.saveUnchanged,
				`AND coalesce(lease_holder, '') = $4 AND (lease_holder IS NULL OR lease_expires = $5)`,
				`AND $4::text IS NOT NULL AND $5::timestamptz IS NOT NULL`, 1))
		}, changeHolder},
		{"no lease copy", func(*testing.T, *Store) {}, `DROP TRIGGER lease_copy ON %[1]s.leases; ` + changeHolder},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			tt.mutate(t, s)
			err := checkOneStatement(t, s, tt.change, true)
			require.Error(t, err, "the mutant went unnoticed")
			t.Logf("caught: %v", err)
		})
	}
}

// changeHolder hands the lease of thread "t" to another holder.
const changeHolder = `UPDATE %[1]s.leases SET holder = 'hx' WHERE key = 't'`

// mutateStatement makes s send sql where it sent *stmt.
func mutateStatement(s *Store, stmt *string, sql string) {
	s.q.names[sql] = "tc_mutant"
	*stmt = sql
}

// checkOneStatement claims thread "t" on s, runs change (unless empty)
// behind the Store's back, and starts a run under the claim. It returns
// an error when the outcome is not the expected one: unchanged, one round
// trip and the run started; changed, one failed check, then the run
// started, or refused when busy, and in that case nothing written.
func checkOneStatement(t *testing.T, s *Store, change string, busy bool) error {
	ctx := context.Background()
	a := newProc(s, "a")
	require.NoError(t, a.ws.CreateThread(ctx, "t"))
	_, err := a.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	c, err := a.ws.Claim(ctx, "t", "ha", ttl)
	require.NoError(t, err)
	if change != "" {
		_, err := admin(t).Exec(ctx, fmt.Sprintf(change, pgx.Identifier{s.Schema()}.Sanitize()))
		require.NoError(t, err)
	}
	trips, conflicts := s.stats.roundTrips.Load(), s.stats.conflicts.Load()
	_, err = a.ws.RunStart(ctx, c, 1)
	trips, conflicts = s.stats.roundTrips.Load()-trips, s.stats.conflicts.Load()-conflicts
	th, terr := newProc(s, "b").ws.Thread(ctx, "t")
	require.NoError(t, terr)
	switch {
	case change == "" && (err != nil || trips != 1 || conflicts != 0):
		return fmt.Errorf("unchanged thread: RunStart %v in %d round trips, %d failed checks; want one round trip", err, trips, conflicts)
	case change != "" && conflicts != 1:
		return fmt.Errorf("%d failed checks (RunStart: %v, runs %d); want 1", conflicts, err, len(th.Runs))
	case busy && !errors.Is(err, core.ErrThreadBusy):
		return fmt.Errorf("RunStart under a lease that changed hands: %v (runs %d); want ErrThreadBusy", err, len(th.Runs))
	case busy && len(th.Runs) != 0:
		return fmt.Errorf("a refused RunStart left %d runs", len(th.Runs))
	case !busy && (err != nil || len(th.Runs) != 1):
		return fmt.Errorf("RunStart: %v, runs %d; want the run started", err, len(th.Runs))
	}
	return nil
}

// A write sent as one pipeline without BEGIN or COMMIT is one implicit
// transaction: when its second statement fails (here a Renew's lease
// upsert, which a trigger refuses), the first one's update of the thread
// row is rolled back with it, and the error is the server's, not an
// unknown outcome.
func TestOnePipelineOneTransaction(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := context.Background()
	s := newStore(t)
	a := newProc(s, "a")
	require.NoError(t, a.ws.CreateThread(ctx, "t"))
	_, err := a.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	c, err := a.ws.Claim(ctx, "t", "ha", ttl)
	require.NoError(t, err)
	q := pgx.Identifier{s.Schema()}.Sanitize()
	_, err = admin(t).Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION %[1]s.refuse() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'lease write refused'; END $$;
		CREATE TRIGGER refuse BEFORE UPDATE ON %[1]s.leases FOR EACH ROW EXECUTE FUNCTION %[1]s.refuse();`, q))
	require.NoError(t, err)
	_, _, version0, _ := rowCounts(t, admin(t), s.Schema(), "t")
	trips := s.stats.roundTrips.Load()
	err = a.ws.Renew(ctx, c, ttl)
	require.ErrorContains(t, err, "lease write refused")
	require.NotErrorIs(t, err, core.ErrCommitUnknown)
	require.Equal(t, int64(1), s.stats.roundTrips.Load()-trips, "the Renew under the Store's own lease: one pipeline")
	_, _, version, _ := rowCounts(t, admin(t), s.Schema(), "t")
	require.Equal(t, version0, version, "the thread row's update outlived the failed lease write")
}
