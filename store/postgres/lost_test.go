package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// rowState is a thread's row as storage keeps it, every column a write
// changes.
type rowState struct {
	version, taken, lastMessage, activeRuns int64
	holder                                  *string
	expires                                 any
	events, messages                        int64
}

func readRow(t *testing.T, conn *pgx.Conn, schema string, id core.ThreadID) rowState {
	t.Helper()
	q := pgx.Identifier{schema}.Sanitize()
	var r rowState
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT version, taken, last_message, active_runs, lease_holder, lease_expires,
		(SELECT count(*) FROM `+q+`.events WHERE thread_id = $1), (SELECT count(*) FROM `+q+`.events WHERE thread_id = $1 AND kind = $2)
		FROM `+q+`.threads WHERE id = $1`, string(id), string(core.MessagePosted)).Scan(&r.version, &r.taken, &r.lastMessage, &r.activeRuns,
		&r.holder, &r.expires, &r.events, &r.messages))
	return r
}

// loseCommits puts the thread back as r recorded it, as a server that
// acknowledged the commits since and then lost them (synchronous_commit
// = off and a crash, a failover to an asynchronous replica, a restore)
// leaves it: the events since gone (the messages among them), the row's columns back
// (all of them).
func loseCommits(t *testing.T, conn *pgx.Conn, schema string, id core.ThreadID, r rowState) {
	t.Helper()
	ctx := testCtx(t)
	q := pgx.Identifier{schema}.Sanitize()
	_, err := conn.Exec(ctx, `DELETE FROM `+q+`.events WHERE thread_id = $1 AND seq > $2`, string(id), r.events)
	require.NoError(t, err)
	// The log's end on the row (log_n, log_at) goes back with the rest of
	// the row: a post decided in the server (PostMessage) appends after it.
	_, err = conn.Exec(ctx, `UPDATE `+q+`.threads SET version = $2, taken = $3, last_message = $4, active_runs = $5,
		lease_holder = $6, lease_expires = $7, log_n = $8,
		log_at = (SELECT at FROM `+q+`.events WHERE thread_id = $1 AND seq = $8) WHERE id = $1`,
		string(id), r.version, r.taken, r.lastMessage, r.activeRuns, r.holder, r.expires, r.events)
	require.NoError(t, err)
}

// A Store whose cache is ahead of storage — storage lost commits the
// Store saw acknowledged — sees it (the row's version lower than its
// cache's, or the log without the event the cache ended on), drops the
// thread's cached state and folds the log storage has: its next write
// lands right after storage's last event, never past a gap, and every
// other Store can still read and write the thread. Without the check, the
// write went after the cache's count, and every fresh Store failed on the
// thread for good with "stored log is inconsistent".
func TestLostCommitsSurvived(t *testing.T) {
	t.Parallel() // a schema of its own
	eachReadMode(t, func(t *testing.T, opts Options) {
		for _, lost := range []string{"run_started and a post", "a post only", "overtaken by another Store"} {
			t.Run(lost, func(t *testing.T) {
				testLostCommits(t, opts, lost == "a post only", lost == "overtaken by another Store")
			})
		}
	})
}

// overtaken: after the loss, another Store posts until the row's version
// is back where the first Store's cache has it, so that only the log's
// last event tells the cache is not storage's.
func testLostCommits(t *testing.T, opts Options, postOnly, overtaken bool) {
	ctx := testCtx(t)
	s := newStoreWith(t, opts)
	look := admin(t)
	a, c := claimedThread(t, s)
	id := c.Thread
	if postOnly {
		_, err := a.ws.RunStart(ctx, c, 1)
		require.NoError(t, err)
	}
	kept := readRow(t, look, s.Schema(), id)
	if !postOnly {
		_, err := a.ws.RunStart(ctx, c, 1)
		require.NoError(t, err)
	}
	_, err := a.ws.Post(ctx, id, "m2")
	require.NoError(t, err)
	seen := readRow(t, look, s.Schema(), id)
	loseCommits(t, look, s.Schema(), id, kept)
	cfg, err := pgxpool.ParseConfig(databaseURL(t))
	require.NoError(t, err)
	s2 := openStore(t, cfg, s.Schema())
	b := newProc(s2, "b")
	if overtaken {
		b.clock.Advance(time.Millisecond) // b's events are b's: their times are not a's
		for readRow(t, look, s.Schema(), id).version < seen.version {
			_, err := b.ws.Post(ctx, id, "by b")
			require.NoError(t, err)
			kept.events++
			kept.messages++
		}
	}

	// The Store that saw the lost commits writes the thread again.
	seq, err := a.ws.Post(ctx, id, "m3")
	require.NoError(t, err, "a post through the Store whose cache is ahead of storage")
	require.Equal(t, core.Seq(kept.messages+1), seq, "the post's number follows storage's last message, not the lost one")
	after := readRow(t, look, s.Schema(), id)
	require.Equal(t, kept.events+1, after.events, "the post's event follows storage's last event")

	// Another Store reads the thread and writes it.
	evs := events(t, s2, id)
	for i, ev := range evs {
		if i > 0 {
			require.Greater(t, ev.Version, evs[i-1].Version, "event %d", i+1)
		}
	}
	require.Len(t, evs, int(kept.events)+1)
	require.Equal(t, "m3", evs[len(evs)-1].Text)
	_, err = b.ws.Post(ctx, id, "m4")
	require.NoError(t, err, "a fresh Store posts on the thread")
	b.clock.Advance(2 * ttl)
	cb, err := b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err, "a fresh Store claims the thread")
	p, err := b.ws.Plan(ctx, cb)
	require.NoError(t, err)
	if postOnly {
		require.NoError(t, b.ws.Abandon(ctx, cb, 1), "the kept run, left by a's lapsed claim")
		p, err = b.ws.Plan(ctx, cb)
		require.NoError(t, err)
		require.Equal(t, [2]int{int(core.PlanRun), 2}, [2]int{int(p.Kind), int(p.Message)})
	} else {
		require.Equal(t, [2]int{int(core.PlanRun), 1}, [2]int{int(p.Kind), int(p.Message)}, "the lost run's prompt is unconsumed in storage")
	}
	_, err = b.ws.RunStart(ctx, cb, p.Message)
	require.NoError(t, err, "a fresh Store starts a run on the thread")

	// And the first Store, again, reads what storage has.
	_, err = a.ws.Post(ctx, id, "m5")
	require.NoError(t, err, "the first Store posts again")
	require.Equal(t, events(t, s2, id), events(t, s, id), "both Stores read the same log")
}

// events reads the thread's whole log through s.
func events(t *testing.T, s *Store, id core.ThreadID) []core.Event {
	t.Helper()
	var evs []core.Event
	require.NoError(t, s.Update(context.Background(), func(ctx context.Context, tx core.Transaction) error {
		var err error
		evs, err = tx.Events(ctx, id)
		return err
	}))
	return evs
}

// Migration 0009 sets each thread's log end (log_n, log_at) from its
// events, and a write decided from the cache on a migrated thread is one
// round trip.
func TestMigrationLogEnd(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	schema, pool := schemaAt(ctx, t, 7)
	q := pgx.Identifier{schema}.Sanitize()
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	execEach(ctx, t, pool, at,
		`INSERT INTO `+q+`.threads (id, version, taken, last_message) VALUES ('t', 2, 0, 2), ('v', 0, 0, 0)`,
		`INSERT INTO `+q+`.events (thread_id, seq, version, kind, at, message, text) VALUES ('t', 1, 1, 'message_posted', now(), 1, 'm1'),
			('t', 2, 2, 'message_posted', $1, 2, 'm2')`,
		`INSERT INTO `+q+`.messages (thread_id, seq, text, posted_at) VALUES ('t', 1, 'm1', now()), ('t', 2, 'm2', $1)`)
	s := openStore(t, poolConfig(t, "tc"), schema)
	require.Equal(t, allMigrations(t), appliedMigrations(t, schema))
	for id, want := range map[string][2]any{"t": {int64(2), &at}, "v": {int64(0), (*time.Time)(nil)}} {
		var n int64
		var last *time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT log_n, log_at FROM `+q+`.threads WHERE id = $1`, id).Scan(&n, &last))
		require.Equal(t, want[0], n, "thread %s", id)
		if want[1].(*time.Time) == nil {
			require.Nil(t, last, "thread %s", id)
		} else {
			require.True(t, last.Equal(at), "thread %s: log_at %v", id, last)
		}
	}
	runStartInOneTrip(ctx, t, s)
}

// A thread whose row is behind its own log — at a version below its last
// event's, which neither writes nor the loss of the newest of them can
// leave (each write moves the row to its event's version in the event's
// own transaction) — is refused as inconsistent by every write that
// reads it, and nothing is written. Written on, it took a refused start's
// RunRefused notice at the row's version, below the log's: a log no fold
// accepts after.
func TestRowBehindItsLogRefused(t *testing.T) {
	t.Parallel() // a schema of its own
	eachReadMode(t, func(t *testing.T, opts Options) {
		ctx := testCtx(t)
		s := newStoreWith(t, opts)
		look := admin(t)
		a, c := claimedThread(t, s)
		id := c.Thread
		_, err := a.ws.Post(ctx, id, "m2") // an event at the row's version
		require.NoError(t, err)
		_, err = look.Exec(ctx, `UPDATE `+pgx.Identifier{s.Schema()}.Sanitize()+`.threads SET version = version - 1 WHERE id = $1`, string(id))
		require.NoError(t, err)
		before := readRow(t, look, s.Schema(), id)

		_, err = a.ws.RunStart(ctx, c, 1)
		require.ErrorIs(t, err, core.ErrInconsistentLog, "a write by the Store whose cache has the thread")
		cfg, err := pgxpool.ParseConfig(databaseURL(t))
		require.NoError(t, err)
		b := newProc(openStore(t, cfg, s.Schema()), "b")
		b.clock.Advance(2 * ttl)
		_, err = b.ws.Claim(ctx, id, "hb", ttl)
		require.ErrorIs(t, err, core.ErrInconsistentLog, "a write by a fresh Store")
		require.Equal(t, before, readRow(t, look, s.Schema(), id), "nothing written")
	})
}

// A Claim in one round trip (no BEGIN, no COMMIT: ClaimLease) through a
// Store whose cache no longer folds with storage's log — storage lost
// the commits the cache ended on, or the thread was made again under
// its id — writes nothing in that round trip (claimSQL finds the row
// unsound for the cache), and is made again in a transaction that reads
// the whole log: the claim succeeds, and plans from what storage has.
// Committed in the one round trip, the claim could not have read the
// log it needs (a second round trip would be another transaction), and
// would have returned the claim in doubt.
func TestClaimOneTripOnStaleCache(t *testing.T) {
	t.Parallel() // a schema of its own
	for _, stale := range []string{"commits lost", "thread made again"} {
		t.Run(stale, func(t *testing.T) {
			ctx := testCtx(t)
			s := newStore(t)
			look := admin(t)
			a, c := claimedThread(t, s)
			id := c.Thread
			if stale == "commits lost" {
				kept := readRow(t, look, s.Schema(), id)
				_, err := a.ws.RunStart(ctx, c, 1)
				require.NoError(t, err)
				_, err = a.ws.Post(ctx, id, "m2")
				require.NoError(t, err)
				loseCommits(t, look, s.Schema(), id, kept)
			} else {
				// The new thread's first event has the old one's seq,
				// version and time (both clocks at epoch): only the row's
				// created tells the two apart.
				q := pgx.Identifier{s.Schema()}.Sanitize()
				for _, sql := range []string{`DELETE FROM ` + q + `.events WHERE thread_id = $1`, `DELETE FROM ` + q + `.threads WHERE id = $1`} {
					_, err := look.Exec(ctx, sql, string(id))
					require.NoError(t, err)
				}
				other := newProc(openOther(t, s), "other")
				require.NoError(t, other.ws.CreateThread(ctx, id))
				_, err := other.ws.Post(ctx, id, "new m1")
				require.NoError(t, err)
			}
			b := newProc(s, "b") // the same Store: its cache has the thread as a left it
			b.clock.Advance(2 * ttl)
			trips := s.stats.oneTripClaims.Load()
			cb, p, err := b.ws.ClaimThenPlan(ctx, id, "hb", ttl)
			require.NoError(t, err, "a claim through the Store whose cache is stale")
			require.Equal(t, trips+1, s.stats.oneTripClaims.Load(), "the claim tried one round trip first")
			require.Equal(t, [2]int{int(core.PlanRun), 1}, [2]int{int(p.Kind), int(p.Message)}, "message 1, its run's start lost or never made")
			_, err = b.ws.RunStart(ctx, cb, 1)
			require.NoError(t, err)
			th, err := b.ws.Thread(ctx, id)
			require.NoError(t, err)
			require.Equal(t, map[string]string{"commits lost": "m1", "thread made again": "new m1"}[stale], th.Messages[0].Text)
			row := readRow(t, look, s.Schema(), id)
			require.Equal(t, "hb", *row.holder)
		})
	}
}

// openOther opens a second Store on s's schema.
func openOther(t *testing.T, s *Store) *Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(databaseURL(t))
	require.NoError(t, err)
	return openStore(t, cfg, s.Schema())
}

// Storage that lost a write this claim's round saw acknowledged (a
// RunStart, a Reply, a SteerRecord, a RunEnd), while it kept the claim's
// lease, so that the fence passes: the round's next write, planned from
// what it saw, would consume the message after a lost consumption's, and
// leave the lost one behind the taken cursor, never consumed, on a thread
// whose row says no work is left; or, after a lost RunEnd, start a second
// run beside the one storage still has active. The write is refused
// instead (core.ErrInconsistentLog), writing nothing; the round's Crash
// ends it, and the next claim plans the lost message (after abandoning
// the run the lost write left active). Before the refusal, the fleet's
// lose nemesis left a message unconsumed once (internal/fleet/BENCH.md).
func TestWriteAfterLostCommitRefused(t *testing.T) {
	t.Parallel() // a schema of its own
	eachReadMode(t, func(t *testing.T, opts Options) {
		for _, lost := range []string{"RunStart", "Reply", "SteerRecord", "RunEnd", "Ask"} {
			t.Run("lost="+lost, func(t *testing.T) { testWriteAfterLost(t, opts, lost) })
		}
	})
}

func testWriteAfterLost(t *testing.T, opts Options, write string) {
	ctx := testCtx(t)
	s := newStoreWith(t, opts)
	look := admin(t)
	a, c := claimedThread(t, s) // message 1, claimed, a run of it planned
	id := c.Thread
	post := func(text string) {
		_, err := a.ws.Post(ctx, id, text)
		require.NoError(t, err)
	}
	var kept rowState
	var next func() error // the round's next consuming write, planned before the loss
	switch write {
	case "RunStart":
		post("m2")
		kept = readRow(t, look, s.Schema(), id)
		run, err := a.ws.RunStart(ctx, c, 1)
		require.NoError(t, err)
		require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
		p, err := a.ws.Plan(ctx, c)
		require.NoError(t, err)
		require.Equal(t, [2]int{int(core.PlanRun), 2}, [2]int{int(p.Kind), int(p.Message)})
		next = func() error { _, err := a.ws.RunStart(ctx, c, 2); return err }
	case "Reply":
		run, err := a.ws.RunStart(ctx, c, 1)
		require.NoError(t, err)
		for _, q := range []string{"q1", "q2"} {
			_, err := a.ws.Ask(ctx, c, run, q)
			require.NoError(t, err)
		}
		require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
		post("a1")
		post("a2")
		p, err := a.ws.Plan(ctx, c)
		require.NoError(t, err)
		require.Equal(t, [3]int{int(core.PlanReply), 1, 2}, [3]int{int(p.Kind), int(p.Request), int(p.Message)})
		kept = readRow(t, look, s.Schema(), id)
		require.NoError(t, a.ws.Reply(ctx, c, 1, 2))
		p, err = a.ws.Plan(ctx, c)
		require.NoError(t, err)
		require.Equal(t, [3]int{int(core.PlanReply), 2, 3}, [3]int{int(p.Kind), int(p.Request), int(p.Message)})
		next = func() error { return a.ws.Reply(ctx, c, 2, 3) }
	case "RunEnd":
		post("m2")
		run, err := a.ws.RunStart(ctx, c, 1)
		require.NoError(t, err)
		kept = readRow(t, look, s.Schema(), id)
		require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
		p, err := a.ws.Plan(ctx, c)
		require.NoError(t, err)
		require.Equal(t, [2]int{int(core.PlanRun), 2}, [2]int{int(p.Kind), int(p.Message)})
		next = func() error { _, err := a.ws.RunStart(ctx, c, 2); return err }
	case "Ask":
		post("m2")
		run, err := a.ws.RunStart(ctx, c, 1)
		require.NoError(t, err)
		kept = readRow(t, look, s.Schema(), id)
		q, err := a.ws.Ask(ctx, c, run, "q1")
		require.NoError(t, err)
		require.Equal(t, core.RequestID(1), q)
		next = func() error { _, err := a.ws.Ask(ctx, c, run, "q2"); return err } // it would be request 1 again
	case "SteerRecord":
		run, err := a.ws.RunStart(ctx, c, 1)
		require.NoError(t, err)
		post("s2")
		post("s3")
		m, ok, err := a.ws.Steer(ctx, c, run)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "s2", m.Text)
		kept = readRow(t, look, s.Schema(), id)
		require.NoError(t, a.ws.SteerRecord(ctx, c, run, 2))
		m, ok, err = a.ws.Steer(ctx, c, run)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "s3", m.Text)
		next = func() error { return a.ws.SteerRecord(ctx, c, run, 3) }
	}
	loseCommits(t, look, s.Schema(), id, kept)

	err := next()
	require.ErrorIs(t, err, core.ErrInconsistentLog, "a write built on what storage lost")
	require.Equal(t, kept, readRow(t, look, s.Schema(), id), "nothing written")
	require.NoError(t, a.ws.Crash(ctx, c))

	// The next claim plans the message whose consumption storage lost.
	a.clock.Advance(2 * ttl)
	c2, err := a.ws.Claim(ctx, id, "ha2", ttl)
	require.NoError(t, err)
	p, err := a.ws.Plan(ctx, c2)
	require.NoError(t, err)
	if write == "SteerRecord" || write == "RunEnd" || write == "Ask" {
		require.Equal(t, core.PlanAbandon, p.Kind, "the crashed round's run is left active: %+v", p)
		for _, run := range p.Runs {
			require.NoError(t, a.ws.Abandon(ctx, c2, run))
		}
		p, err = a.ws.Plan(ctx, c2)
		require.NoError(t, err)
	}
	require.Equal(t, kept.taken+1, int64(p.Message), "the plan after the loss: %+v", p)
}
