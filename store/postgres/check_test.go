package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// A write decided from the cache is one statement (checkedWriteSQL),
// sent autocommitted in one round trip. Its check is what
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
		{"log end", logEndNotice, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, checkOneStatement(t, newStore(t), tt.change, tt.busy))
		})
	}
}

// logEndNotice appends a notice to the thread's log (a refused start's
// RunRefused, which bumps no version) stamped with the log's last time, as
// a writer whose clock reads no later would: of the row, only the log's end
// (log_n) tells it moved, and behind it the events' key (thread_id, seq)
// refuses the write's event at the notice's seq. Either way the check
// fails once and the start, read again, goes through after the notice.
const logEndNotice = `WITH e AS (
	INSERT INTO %[1]s.events (thread_id, seq, version, kind, at, message, text, run, request, holder)
	SELECT id, log_n + 1, version, 'run_refused', log_at, 1, '', 0, 0, 'hx' FROM %[1]s.threads WHERE id = 't')
	UPDATE %[1]s.threads SET log_n = log_n + 1 WHERE id = 't'`

// The check's mutants are caught: each lets a write under a lease that
// changed hands (behind the Store's back, with SQL) commit. The write's
// statement with no check at all, and with the row's check but not the
// lease's.
func TestOneStatementCheckMutant(t *testing.T) {
	t.Parallel() // schemas of their own
	for _, tt := range []struct {
		name   string
		mutant func(t *testing.T, s *Store) string // t: the subtest's
	}{
		{"no check", func(_ *testing.T, s *Store) string {
			return fmt.Sprintf(`WITH w AS (
				UPDATE %[1]s.threads SET version = $6, taken = $7, last_message = $8, active_runs = $9
				 WHERE id = $1 AND $2::bigint IS NOT NULL AND $3::bigint IS NOT NULL AND $4::text IS NOT NULL AND $5::timestamptz IS NOT NULL
				RETURNING id
			)
			INSERT INTO %[1]s.events (thread_id, seq, version, kind, at, message, text, run, request, holder)
			SELECT id, $10::bigint, $11::bigint, $12::text, $13::timestamptz, $14::bigint, $15::text, $16::bigint, $17::bigint, $18::text
			  FROM w WHERE $10::bigint IS NOT NULL`, pgx.Identifier{s.Schema()}.Sanitize())
		}},
		{"no lease check", func(t *testing.T, s *Store) string {
			return mustReplace(t, s.q.saveUnchanged, `AND lease_holder = $4 AND lease_expires = $5`,
				`AND $4::text IS NOT NULL AND $5::timestamptz IS NOT NULL`)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			mutateStatement(s, &s.q.saveUnchanged, tt.mutant(t, s))
			err := checkOneStatement(t, s, `UPDATE %s.leases SET holder = 'hx' WHERE key = 't'`, true)
			require.Error(t, err, "the mutant went unnoticed")
			t.Logf("caught: %v", err)
		})
	}
}

// The one-statement write and the check alone hold the thread's row —
// and with it the lease, which lives on that row (migration 0007) —
// locked until their transaction ends: run by hand in a transaction left
// open, under a claim, another connection can lock neither the row nor
// the lease through the leases view (FOR UPDATE NOWAIT fails with
// lock_not_available). The check's mutant without FOR UPDATE is caught.
func TestOneStatementLocks(t *testing.T) {
	t.Parallel() // schemas of their own
	for _, tt := range []struct {
		name   string
		stmt   func(t *testing.T, q *queries) string // t: the subtest's
		mutant bool
	}{
		{"write", func(_ *testing.T, q *queries) string { return q.saveUnchanged }, false},
		{"check", func(_ *testing.T, q *queries) string { return q.unchanged }, false},
		{"check unlocked", func(t *testing.T, q *queries) string { return mustReplace(t, q.unchanged, `FOR UPDATE`, ``) }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkStatementLocks(t, newStore(t), func(q *queries) string { return tt.stmt(t, q) })
			if tt.mutant {
				require.Error(t, err, "the mutant went unnoticed")
				t.Logf("caught: %v", err)
				return
			}
			require.NoError(t, err)
		})
	}
}

// checkStatementLocks claims thread "t" on s, runs stmt(&s.q) with the
// check of the claim's state, in a transaction it leaves open, and
// returns an error unless another connection then finds both the thread's
// row and its lease's row locked.
func checkStatementLocks(t *testing.T, s *Store, stmt func(q *queries) string) error {
	ctx := testCtx(t)
	claimedThread(t, s)
	q := pgx.Identifier{s.Schema()}.Sanitize()
	var created, version int64
	var holder string
	var expires time.Time
	require.NoError(t, admin(t).QueryRow(ctx, `SELECT t.created, t.version, l.holder, l.expires_at FROM `+q+`.threads t
		JOIN `+q+`.leases l ON l.key = t.id WHERE t.id = 't'`).Scan(&created, &version, &holder, &expires))
	tx, err := admin(t).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	sql := stmt(&s.q)
	args := []any{"t", created, version, holder, expires}
	if strings.Contains(sql, "$18") {
		// The write: the thread row's new columns, and no event.
		args = append(args, version+1, int64(0), int64(1), int64(0), nil, nil, nil, nil, nil, nil, nil, nil, nil)
	}
	var logN int64
	var logAt *time.Time
	require.NoError(t, admin(t).QueryRow(ctx, `SELECT log_n, log_at FROM `+q+`.threads WHERE id = 't'`).Scan(&logN, &logAt))
	args = append(args, logN, logAt) // the log's end, checked
	if strings.Contains(sql, "$18") {
		args = append(args, logN, logAt) // and left as it is
	}
	_, err = tx.Exec(ctx, sql, args...)
	require.NoError(t, err, "the statement, under the claim it checks")
	for _, row := range []struct{ name, sql string }{
		{"the thread's row", `SELECT 1 FROM ` + q + `.threads WHERE id = 't' FOR UPDATE NOWAIT`},
		{"the lease's row", `SELECT 1 FROM ` + q + `.leases WHERE key = 't' FOR UPDATE NOWAIT`},
	} {
		var pgErr *pgconn.PgError
		_, err := admin(t).Exec(ctx, row.sql)
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			return fmt.Errorf("%s, locked from another connection while the statement's transaction is open: %v; want lock_not_available", row.name, err)
		}
	}
	return nil
}

// mutateStatement makes s send sql where it sent *stmt.
func mutateStatement(s *Store, stmt *string, sql string) {
	s.q.names[sql] = "tc_mutant"
	*stmt = sql
}

// mustReplace returns s with old replaced by new, once, failing t when s
// does not hold old (a mutant of a statement that changed would be no
// mutant).
func mustReplace(t *testing.T, s, old, new string) string {
	t.Helper()
	require.Contains(t, s, old, "the statement to mutate")
	return strings.Replace(s, old, new, 1)
}

// checkOneStatement claims thread "t" on s, runs change (unless empty)
// behind the Store's back, and starts a run under the claim. It returns
// an error when the outcome is not the expected one: unchanged, one round
// trip and the run started; changed, one failed check, then the run
// started, or refused when busy, and in that case nothing written.
func checkOneStatement(t *testing.T, s *Store, change string, busy bool) error {
	ctx := testCtx(t)
	a, c := claimedThread(t, s)
	if change != "" {
		_, err := admin(t).Exec(ctx, fmt.Sprintf(change, pgx.Identifier{s.Schema()}.Sanitize()))
		require.NoError(t, err)
	}
	trips, conflicts := s.stats.roundTrips.Load(), s.stats.conflicts.Load()
	_, err := a.ws.RunStart(ctx, c, 1)
	trips, conflicts = s.stats.roundTrips.Load()-trips, s.stats.conflicts.Load()-conflicts
	th, terr := newProc(s, "b").ws.Thread(ctx, "t")
	require.NoError(t, terr)
	switch {
	case change == "" && (err != nil || trips != 1 || conflicts != 0):
		return fmt.Errorf("unchanged thread: RunStart %v in %d round trips, %d failed checks; want one round trip", err, trips, conflicts)
	case change != "" && conflicts != 1:
		return fmt.Errorf("%d failed checks (RunStart: %v, runs %d); want 1", conflicts, err, len(th.Runs()))
	case busy && !errors.Is(err, core.ErrThreadBusy):
		return fmt.Errorf("RunStart under a lease that changed hands: %v (runs %d); want ErrThreadBusy", err, len(th.Runs()))
	case busy && len(th.Runs()) != 0:
		return fmt.Errorf("a refused RunStart left %d runs", len(th.Runs()))
	case !busy && (err != nil || len(th.Runs()) != 1):
		return fmt.Errorf("RunStart: %v, runs %d; want the run started", err, len(th.Runs()))
	}
	return nil
}

// A write sent as one pipeline without BEGIN or COMMIT is one implicit
// transaction: when its second statement fails (here a Post's NOTIFY,
// under the Store's own lease, on a channel whose name the server refuses
// as too long; the thread has no work before it, so the post wakes), the
// first one's update of the thread row and its event are rolled back
// with it, and the error is the server's, not an unknown outcome.
func TestOnePipelineOneTransaction(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	a, c := claimedThread(t, s)
	run, err := a.ws.RunStart(ctx, c, 1)
	require.NoError(t, err)
	require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
	s.shards = strings.Repeat("c", 64) // NAMEDATALEN is 64: at most 63 bytes
	events0, _, version0, _ := rowCounts(t, admin(t), s.Schema(), "t")
	trips := s.stats.roundTrips.Load()
	_, err = a.ws.Post(ctx, "t", "m2")
	require.ErrorContains(t, err, "channel name too long")
	require.NotErrorIs(t, err, core.ErrCommitUnknown)
	require.Equal(t, int64(1), s.stats.roundTrips.Load()-trips, "the Post under the Store's own lease: one pipeline")
	events, _, version, _ := rowCounts(t, admin(t), s.Schema(), "t")
	require.Equal(t, []int64{int64(events0), version0}, []int64{int64(events), version}, "the thread row's update or the event outlived the failed message insert")
}

// A Renew and a Release under the Store's own lease are one statement
// each (checkedLeaseSQL: the thread row's UPDATE, with the check, writing
// or clearing the lease on the row), with no failed check.
// Under a lease that changed hands behind the Store's back, the check
// fails, and the write, run again with locking reads, leaves the other
// holder's lease alone (the Renew is refused; the Release releases
// nothing, which is no error). With the mutant without the lease's
// check, each rewrites or deletes the other holder's lease: caught.
func TestOneStatementLeaseWrites(t *testing.T) {
	t.Parallel() // schemas of their own
	// t is the subtest's: a missing text fails the subtest that mutates.
	noLeaseCheck := func(t *testing.T, sql string) string {
		return mustReplace(t, sql, `AND lease_holder = $4 AND lease_expires = $5`, `AND $4::text IS NOT NULL AND $5::timestamptz IS NOT NULL`)
	}
	for _, tt := range []struct {
		name string
		stmt func(q *queries) *string
		op   func(ctx context.Context, ws *core.Workspace, c core.Claim) error
		busy bool // the op is refused under a lease that changed hands
		gone bool // the op, unrefused, leaves no lease
	}{
		{name: "renew", busy: true,
			op: func(ctx context.Context, ws *core.Workspace, c core.Claim) error { return ws.Renew(ctx, c, 2*ttl) }},
		{name: "release", gone: true,
			op: func(ctx context.Context, ws *core.Workspace, c core.Claim) error { return ws.Release(ctx, c) }},
	} {
		for _, mutant := range []bool{false, true} {
			name := tt.name
			if mutant {
				name += " without the lease check"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				err := checkLeaseWrite(t, func(s *Store) {
					if mutant {
						mutateStatement(s, &s.q.saveLease, noLeaseCheck(t, s.q.saveLease))
					}
				}, tt.op, tt.busy, tt.gone)
				if mutant {
					require.Error(t, err, "the mutant went unnoticed")
					t.Logf("caught: %v", err)
					return
				}
				require.NoError(t, err)
			})
		}
	}
}

// checkLeaseWrite runs op under a claim of thread "t" on a Store that
// setup prepares, first as it is (want: one round trip, no failed check,
// the lease gone or still the claim's), then, on a second thread, after
// its lease went to holder hx behind the Store's back (want: one failed
// check, op refused when busy, and hx's lease left as it was).
func checkLeaseWrite(t *testing.T, setup func(s *Store), op func(ctx context.Context, ws *core.Workspace, c core.Claim) error, busy, gone bool) error {
	ctx := testCtx(t)
	s := newStore(t)
	setup(s)
	a := newProc(s, "a")
	q := pgx.Identifier{s.Schema()}.Sanitize()
	lease := func(id string) string {
		var h string
		err := admin(t).QueryRow(ctx, `SELECT holder FROM `+q+`.leases WHERE key = $1`, id).Scan(&h)
		if errors.Is(err, pgx.ErrNoRows) {
			return "-"
		}
		require.NoError(t, err)
		return h
	}
	for _, changed := range []bool{false, true} {
		id := core.ThreadID(fmt.Sprintf("t%v", changed))
		require.NoError(t, a.ws.CreateThread(ctx, id))
		c, err := a.ws.Claim(ctx, id, core.Holder("h"+string(id)), ttl)
		require.NoError(t, err)
		if changed {
			_, err := admin(t).Exec(ctx, `UPDATE `+q+`.leases SET holder = 'hx' WHERE key = $1`, string(id))
			require.NoError(t, err)
		}
		trips, conflicts := s.stats.roundTrips.Load(), s.stats.conflicts.Load()
		err = op(ctx, a.ws, c)
		trips, conflicts = s.stats.roundTrips.Load()-trips, s.stats.conflicts.Load()-conflicts
		got := lease(string(id))
		want := string(c.Holder)
		switch {
		case changed:
			want = "hx"
		case gone:
			want = "-"
		}
		switch {
		case !changed && (err != nil || trips != 1 || conflicts != 0):
			return fmt.Errorf("unchanged thread: %v in %d round trips, %d failed checks; want one round trip", err, trips, conflicts)
		case changed && conflicts != 1:
			return fmt.Errorf("%d failed checks (%v, lease %s); want 1", conflicts, err, got)
		case changed && busy && !errors.Is(err, core.ErrThreadBusy):
			return fmt.Errorf("under a lease that changed hands: %v (lease %s); want ErrThreadBusy", err, got)
		case changed && !busy && err != nil:
			return fmt.Errorf("under a lease that changed hands: %v (lease %s); want no error", err, got)
		case got != want:
			return fmt.Errorf("lease of %s after the write (changed behind its back: %v): %s; want %s", id, changed, got, want)
		}
	}
	return nil
}

// A run's end with its Release (RunEndThenStart with release, nothing left
// to plan) under the Store's own lease is one statement
// (checkedWriteSQL with writeLeaseSet: the thread row's UPDATE with the check, the
// end's event, and the lease cleared on the row) in one round trip, with
// no failed check. Under a lease that changed hands behind the Store's
// back, the check fails, the transaction runs again with locking reads,
// and the other holder's lease stays (the end stands; the Release is a
// read). With the mutant without the lease's check, the statement clears
// the other holder's lease: caught.
func TestOneStatementRunEndRelease(t *testing.T) {
	t.Parallel() // schemas of their own
	for _, mutant := range []bool{false, true} {
		t.Run(fmt.Sprintf("mutant=%v", mutant), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			s := newStore(t)
			if mutant {
				mutateStatement(s, &s.q.saveEventLease, mustReplace(t, s.q.saveEventLease,
					`AND lease_holder = $4 AND lease_expires = $5`, `AND $4::text IS NOT NULL AND $5::timestamptz IS NOT NULL`))
			}
			a := newProc(s, "a")
			q := pgx.Identifier{s.Schema()}.Sanitize()
			var failures []string
			for _, changed := range []bool{false, true} {
				id := core.ThreadID(fmt.Sprintf("t%v", changed))
				require.NoError(t, a.ws.CreateThread(ctx, id))
				_, err := a.ws.Post(ctx, id, "m1")
				require.NoError(t, err)
				c, run := a.startRun(t, id, core.Holder("h"+string(id)))
				if changed {
					_, err := admin(t).Exec(ctx, `UPDATE `+q+`.leases SET holder = 'hx' WHERE key = $1`, string(id))
					require.NoError(t, err)
				}
				trips, conflicts := s.stats.roundTrips.Load(), s.stats.conflicts.Load()
				p, _, err := a.ws.RunEndThenStart(ctx, c, run, "", 0, true)
				require.NoError(t, err)
				require.Equal(t, core.PlanNothing, p.Kind)
				trips, conflicts = s.stats.roundTrips.Load()-trips, s.stats.conflicts.Load()-conflicts
				l, err := a.ws.Lease(ctx, id)
				require.NoError(t, err)
				th, err := a.ws.Thread(ctx, id)
				require.NoError(t, err)
				r, _ := th.Run(run)
				require.Equal(t, core.StateEnded, r.State, "the end stands either way")
				switch {
				case !changed && (trips != 1 || conflicts != 0 || l.Holder != ""):
					failures = append(failures, fmt.Sprintf("own lease: %d round trips, %d failed checks, lease %q after; want 1, 0 and none", trips, conflicts, l.Holder))
				case changed && (conflicts != 1 || l.Holder != "hx"):
					failures = append(failures, fmt.Sprintf("lease changed hands: %d failed checks, lease %q after; want 1 and hx's", conflicts, l.Holder))
				}
			}
			if mutant {
				require.NotEmpty(t, failures, "the mutant went unnoticed")
				t.Logf("caught: %v", failures)
				return
			}
			require.Empty(t, failures)
		})
	}
}

// A Renew and a Release under the Store's own lease (checkedLeaseSQL)
// check the row's version too, as a consuming write does
// (TestOneStatementCheck, "version"): when the row's version moved on
// behind the Store's back with its lease and log as they were, the check
// fails once, the write runs again reading under lock, and the row's
// version moves past the changed one. A check that let a later version
// through (version >= $3) would write the cache's stale row over the
// newer one, its counts with it, and leave two row states under one
// version: no check failed, and the version stayed where it was.
func TestLeaseWriteChecksVersion(t *testing.T) {
	t.Parallel() // schemas of their own
	for _, tt := range []struct {
		name string
		op   func(ctx context.Context, ws *core.Workspace, c core.Claim) error
	}{
		{"renew", func(ctx context.Context, ws *core.Workspace, c core.Claim) error { return ws.Renew(ctx, c, 2*ttl) }},
		{"release", func(ctx context.Context, ws *core.Workspace, c core.Claim) error { return ws.Release(ctx, c) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			s := newStore(t)
			a := newProc(s, "a")
			q := pgx.Identifier{s.Schema()}.Sanitize()
			require.NoError(t, a.ws.CreateThread(ctx, "t"))
			c, err := a.ws.Claim(ctx, "t", "h-t", ttl)
			require.NoError(t, err)
			version := func() int64 {
				var v int64
				require.NoError(t, admin(t).QueryRow(ctx, `SELECT version FROM `+q+`.threads WHERE id = 't'`).Scan(&v))
				return v
			}
			_, err = admin(t).Exec(ctx, `UPDATE `+q+`.threads SET version = version + 1 WHERE id = 't'`)
			require.NoError(t, err)
			changed := version()
			conflicts := s.stats.conflicts.Load()
			require.NoError(t, tt.op(ctx, a.ws, c))
			require.Equal(t, int64(1), s.stats.conflicts.Load()-conflicts,
				"failed checks of the %s after the row's version moved behind the Store's back", tt.name)
			require.Equal(t, changed+1, version(), "the row's version after the %s", tt.name)
		})
	}
}
