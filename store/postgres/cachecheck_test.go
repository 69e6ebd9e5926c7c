package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// The checks of what a transaction read from the Store's cache
// (checkedSQL, checkedWriteSQL, the one-trip claim's): tests from the
// ninth mutation pass (7 Dec 2026), each of which fails with the mutant
// its comment names, where no test failed before.

// A transaction that read a thread from the Store's cache and then needs
// a round trip sends the check alone (checkedSQL) with its BEGIN
// (txn.batch): when the row's version, its lease's holder or its log's
// end changed behind the Store's back, the check fails, and the
// transaction runs again reading under lock, where it sees the change.
// (The ninth mutation pass: checkedSQL without `version = $3`, without
// `lease_holder = $4`, and without its log_at comparison, each failed no
// test.)
func TestCheckAloneWithTheFirstRoundTrip(t *testing.T) {
	t.Parallel() // schemas of their own
	for _, tt := range []struct {
		name, change string // change: SQL on thread "t"; %s is the schema
	}{
		{"version", `UPDATE %s.threads SET version = version + 1 WHERE id = 't'`},
		{"holder", `UPDATE %s.leases SET holder = 'hx' WHERE key = 't'`},
		{"log end", `UPDATE %s.threads SET log_at = log_at + interval '1 second' WHERE id = 't'`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			s := newStore(t)
			_, c := claimedThread(t, s)
			q := pgx.Identifier{s.Schema()}.Sanitize()
			_, err := admin(t).Exec(ctx, fmt.Sprintf(tt.change, q))
			require.NoError(t, err)
			var version int64
			require.NoError(t, admin(t).QueryRow(ctx, `SELECT version FROM `+q+`.threads WHERE id = 't'`).Scan(&version))
			conflicts := s.stats.conflicts.Load()
			var seen uint64
			var holds bool
			require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
				th, err := tx.Thread(ctx, c.Thread) // from the cache, on the first run
				if err != nil {
					return err
				}
				ok, _, err := tx.HoldsLease(ctx, c.Thread, c.Holder)
				if err != nil {
					return err
				}
				if _, err := tx.ThreadIDs(ctx); err != nil { // a round trip: the check goes with it
					return err
				}
				seen, holds = th.Version, ok
				return nil
			}))
			require.Equal(t, int64(1), s.stats.conflicts.Load()-conflicts, "failed checks")
			require.Equal(t, uint64(version), seen, "the thread's version as the transaction read it")
			require.Equal(t, tt.name != "holder", holds, "HoldsLease for the claim's holder")
		})
	}
}

// A write decided from the cache on a thread whose log is empty (a post
// under the Store's own lease, the thread's first message) passes its
// check: the row's log_at and the cache's are both NULL, which the check
// compares with IS NOT DISTINCT FROM. One round trip, no failed check.
// (The ninth mutation pass: checkedWriteSQL's `log_at IS NOT DISTINCT
// FROM $20` as `log_at = $20` failed no test.)
func TestWriteOnAnEmptyLogPassesItsCheck(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	a := newProc(s, "a")
	require.NoError(t, a.ws.CreateThread(ctx, "t"))
	_, err := a.ws.Claim(ctx, "t", "ha", ttl)
	require.NoError(t, err)
	trips, conflicts := s.stats.roundTrips.Load(), s.stats.conflicts.Load()
	_, err = a.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	require.Equal(t, []int64{1, 0}, []int64{s.stats.roundTrips.Load() - trips, s.stats.conflicts.Load() - conflicts},
		"round trips and failed checks of the post under the Store's own lease")
}

// A write decided from the cache checks the row's log_n, not only its
// version, lease and log_at: storage that lost a notice the Store wrote
// (a RunRefused, which bumps no version, stamped with the last event's
// time) is back at the cache's version, lease and log_at, one event
// short. The next write then fails its check and lands right after
// storage's last event; without the log_n check it went one seq further,
// past a gap, and no Store could fold the thread again. (The ninth
// mutation pass: checkedWriteSQL without `log_n = $19` failed no test;
// the events' key catches only a log that grew.)
func TestWriteAfterALostNotice(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	look := admin(t)
	a, c := claimedThread(t, s)
	q := pgx.Identifier{s.Schema()}.Sanitize()
	var at time.Time
	require.NoError(t, look.QueryRow(ctx, `SELECT log_at FROM `+q+`.threads WHERE id = 't'`).Scan(&at))
	kept := readRow(t, look, s.Schema(), c.Thread)
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		th, err := tx.Thread(ctx, c.Thread) // from the cache
		if err != nil {
			return err
		}
		return tx.Append(ctx, c.Thread, core.Event{Version: th.Version, Kind: core.RunRefused, At: at, Message: 1, Holder: "hz"})
	}))
	loseCommits(t, look, s.Schema(), c.Thread, kept)
	_, err := a.ws.RunStart(ctx, c, 1)
	require.NoError(t, err)
	var n, last int64
	require.NoError(t, look.QueryRow(ctx, `SELECT count(*), max(seq) FROM `+q+`.events WHERE thread_id = 't'`).Scan(&n, &last))
	require.Equal(t, n, last, "the log's seqs after the start: no gap")
	th, err := newProc(openOther(t, s), "b").ws.Thread(ctx, c.Thread)
	require.NoError(t, err, "a fresh Store folds the thread")
	require.Len(t, th.Runs(), 1)
}

// A Claim in one round trip writes only when storage's log still holds
// the event the Store's cache ended on, compared by seq, version and
// time: storage that lost the cache's run_started (event 2, version 3)
// and then took another Store's claim and post has an event 2 of version
// 3 too, a second later. The one round trip writes nothing, and the
// claim is made again reading the log: it plans message 1, which no run
// took. Committed in the one round trip, the claim's log did not fold
// onto the cache, and the claim came back in doubt. (The ninth mutation
// pass: claimSQL without `e.at = $8` failed no test.)
func TestClaimOneTripOnAnEventOfAnotherTime(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	look := admin(t)
	a := newProc(s, "a")
	require.NoError(t, a.ws.CreateThread(ctx, "t"))
	_, err := a.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	kept := readRow(t, look, s.Schema(), "t")
	a.startRun(t, "t", "ha") // the cache ends on run_started: event 2, version 3
	loseCommits(t, look, s.Schema(), "t", kept)
	b := newProc(openOther(t, s), "b")
	b.clock.Advance(time.Second)
	_, err = b.ws.Claim(ctx, "t", "hb", ttl)
	require.NoError(t, err)
	_, err = b.ws.Post(ctx, "t", "m2") // event 2, version 3, a second later
	require.NoError(t, err)
	c := newProc(s, "c") // the same Store: its cache has the thread as a left it
	c.clock.Advance(2 * ttl)
	trips := s.stats.oneTripClaims.Load()
	_, p, err := c.ws.ClaimThenPlan(ctx, "t", "hc", ttl)
	require.NoError(t, err)
	require.Equal(t, trips+1, s.stats.oneTripClaims.Load(), "the claim tried one round trip first")
	require.Equal(t, [2]int{int(core.PlanRun), 1}, [2]int{int(p.Kind), int(p.Message)}, "the plan of the claim: %+v", p)
}

// A claim that starts its run (ClaimThenStart) decides the start from the
// Store's cache only when storage's log still holds the event the cache
// ended on, compared by seq, version and time. With KeepTrace the claim
// is made in a transaction, where that is the only comparison before the
// start: storage that lost the cache's run (events 2 and 3, a start and
// an end) and then took two notices and a post, event 3 at the cache's
// version a second later, has message 1 not taken and no run. The claim
// plans run 1 for it; started from the cache, it was run 2, which core's
// plan refused (core.ErrInconsistentLog). (The ninth mutation pass:
// claimSQL without `e.at = $12` failed no test.)
func TestClaimStartOnAnEventOfAnotherTime(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStoreWith(t, Options{KeepTrace: true})
	look := admin(t)
	a := newProc(s, "a")
	require.NoError(t, a.ws.CreateThread(ctx, "t"))
	_, err := a.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	c, run := a.startRun(t, "t", "ha")
	require.NoError(t, a.ws.RunEnd(ctx, c, run, "")) // the cache ends on run_ended: event 3, version 4
	q := pgx.Identifier{s.Schema()}.Sanitize()
	var version int64
	var at time.Time
	require.NoError(t, look.QueryRow(ctx, `SELECT version, at FROM `+q+`.events WHERE thread_id = 't' AND seq = 3`).Scan(&version, &at))
	require.Equal(t, int64(4), version)
	later := at.Add(time.Second)
	for _, sql := range []string{
		`DELETE FROM ` + q + `.events WHERE thread_id = 't' AND seq > 1`,
		`INSERT INTO ` + q + `.events (thread_id, seq, version, kind, at, message, text, run, request, holder) VALUES
			('t', 2, 2, 'run_refused', $1, 1, '', 0, 0, 'hx'),
			('t', 3, 4, 'run_refused', $2, 1, '', 0, 0, 'hy'),
			('t', 4, 5, 'message_posted', $2, 2, 'm2', 0, 0, '')`,
		`UPDATE ` + q + `.threads SET version = 5, taken = 0, last_message = 2, active_runs = 0,
			lease_holder = NULL, lease_expires = NULL, log_n = 4, log_at = $2 WHERE id = 't' AND $1::timestamptz IS NOT NULL`,
	} {
		args := []any{at, later}
		if !strings.Contains(sql, "$1") {
			args = nil
		}
		_, err := look.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	b := newProc(s, "b") // the same Store: its cache has the thread as a left it
	b.clock.Advance(2 * ttl)
	cb, p, started, err := b.ws.ClaimThenStart(ctx, "t", "hb", ttl)
	require.NoError(t, err)
	require.Equal(t, [2]int{int(core.PlanRun), 1}, [2]int{int(p.Kind), int(p.Message)}, "the plan of the claim: %+v", p)
	if started == 0 { // the claim started nothing: the plan's run follows
		started, err = b.ws.RunStart(ctx, cb, p.Message)
		require.NoError(t, err)
	}
	require.Equal(t, core.RunID(1), started, "the run for message 1")
	th, err := newProc(openOther(t, s), "o").ws.Thread(ctx, "t")
	require.NoError(t, err, "a fresh Store folds the thread")
	require.Equal(t, core.Seq(1), th.Taken)
}
