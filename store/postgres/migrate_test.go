package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/storetest"
)

func appliedMigrations(t *testing.T, schema string) []int {
	t.Helper()
	rows, err := admin(t).Query(context.Background(),
		`SELECT version FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_migrations ORDER BY version`)
	require.NoError(t, err)
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	return vs
}

func allMigrations(t *testing.T) []int {
	ms, err := migrations()
	require.NoError(t, err)
	var vs []int
	for _, m := range ms {
		vs = append(vs, m.version)
	}
	return vs
}

// Opening a schema a second time applies nothing again, and keeps its data.
func TestMigrationsTwice(t *testing.T) {
	ctx := testCtx(t)
	schema := testSchema(t)
	s1 := openStore(t, poolConfig(t, "tc"), schema)
	require.NoError(t, core.NewWorkspace(s1, core.SystemClock{}).CreateThread(ctx, "kept"))
	s2 := openStore(t, poolConfig(t, "tc"), schema)
	require.Equal(t, allMigrations(t), appliedMigrations(t, schema))
	ids, err := core.NewWorkspace(s2, core.SystemClock{}).Threads(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{"kept"}, ids)
}

// Several Opens of one new schema at once, each with its own connections
// (separate server backends, as separate processes would have): all
// succeed, and each migration is applied once.
func TestMigrationsConcurrent(t *testing.T) {
	schema := testSchema(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := open(context.Background(), poolConfig(t, "tc"), Options{Schema: schema})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	waitWithin(t, &wg, time.Minute, fmt.Sprintf("%d Opens at once migrating schema %s", n, schema))
	for i, err := range errs {
		require.NoError(t, err, "open %d", i)
	}
	require.Equal(t, allMigrations(t), appliedMigrations(t, schema))
}

// Opening a schema that is up to date takes no lock and writes nothing:
// it opens while another session holds the migrations' lock on the
// schema (as a process applying a migration would), where the locked
// path would wait for it.
func TestMigrationsCurrentSchemaTakesNoLock(t *testing.T) {
	ctx := testCtx(t)
	schema := testSchema(t)
	openStore(t, poolConfig(t, "tc"), schema)
	conn, err := pgx.Connect(ctx, databaseURL(t))
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	// The key every released binary takes (migrateLockClass), so that two
	// versions' Opens of one schema through a rolling upgrade serialise.
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext($2))`, int32(0x7463), schema)
	require.NoError(t, err)
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := open(octx, poolConfig(t, "tc"), Options{Schema: schema})
	require.NoError(t, err, "open an up-to-date schema while its migrations' lock is held (waited for the lock?)")
	s.Close()
	require.Equal(t, allMigrations(t), appliedMigrations(t, schema))
	// An older schema does take the lock: the opener waits for it.
	_, err = admin(t).Exec(ctx, `DELETE FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_migrations WHERE version = (SELECT max(version) FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_migrations)`)
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer wcancel()
	_, err = open(wctx, poolConfig(t, "tc"), Options{Schema: schema})
	require.ErrorContains(t, err, "lock migrations", "an older schema opened while its migrations' lock was held, or failed before the lock")
}

// A schema a newer binary migrated is refused, not written to.
func TestMigrationsNewerSchemaRefused(t *testing.T) {
	schema := testSchema(t)
	openStore(t, poolConfig(t, "tc"), schema)
	_, err := admin(t).Exec(context.Background(),
		`INSERT INTO `+pgx.Identifier{schema}.Sanitize()+`.schema_migrations (version, name) VALUES (999, '0999_future.sql')`)
	require.NoError(t, err)
	_, err = open(context.Background(), poolConfig(t, "tc"), Options{Schema: schema})
	require.ErrorContains(t, err, "newer than this binary")
}

// The schema's name is an identifier, quoted wherever it is used.
func TestSchemaNameQuoted(t *testing.T) {
	ctx := testCtx(t)
	schema := testSchema(t) + `; DROP TABLE "x" --Q`
	s := openStore(t, poolConfig(t, "tc"), schema)
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	_, err := ws.Post(ctx, "t", "m")
	require.NoError(t, err)
	_, err = open(ctx, poolConfig(t, "tc"), Options{Schema: string(make([]byte, maxSchemaLen+1))})
	require.Error(t, err)
}

// commitError tells a rolled-back commit from one whose outcome is unknown.
func TestCommitErrorClassification(t *testing.T) {
	for _, tt := range []struct {
		name    string
		err     error
		unknown bool
	}{
		{"server ERROR: rolled back", &pgconn.PgError{Severity: "ERROR", Code: "40001"}, false},
		{"server FATAL: session ended", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, true},
		{"connection broke", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"context ended while waiting", context.Canceled, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := commitError(tt.err)
			require.Equal(t, tt.unknown, errors.Is(err, core.ErrCommitUnknown), "%v", err)
			require.ErrorIs(t, err, tt.err)
		})
	}
}

// A commit the server refuses (a deferred trigger raises at COMMIT) is a
// known outcome: nothing was kept, and the error is not ErrCommitUnknown.
func TestCommitRefusedByServer(t *testing.T) {
	ctx := testCtx(t)
	s := newStore(t)
	a, c := claimedThread(t, s)
	q := pgx.Identifier{s.Schema()}.Sanitize()
	_, err := admin(t).Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION %[1]s.refuse() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
		CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON %[1]s.events
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %[1]s.refuse();`, q))
	require.NoError(t, err)
	before := storetest.Snapshot(t, s, "t")
	_, err = a.ws.RunStart(ctx, c, 1)
	require.ErrorContains(t, err, "refused at commit")
	require.NotErrorIs(t, err, core.ErrCommitUnknown)
	require.Equal(t, before, storetest.Snapshot(t, s, "t"))
}

// Migrations 0003 (the poll's columns) and 0005 (holders) fill what they
// add from the rows an older schema holds: a schema at version 2, with
// threads in every state written as that version wrote them, is opened by
// this binary; each thread's row then has its newest message and its
// active runs, the poll lists exactly the threads with work, the threads
// read back whole, and every holder that had claimed a thread is refused
// a second claim.
func TestMigrationBackfillsFromOlderSchema(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	schema, pool := schemaAt(ctx, t, 2)
	require.Equal(t, []int{1, 2}, appliedMigrations(t, schema))

	type ev struct {
		kind         string
		msg, run     int64
		holder, text string
	}
	threads := []struct {
		id     string
		taken  int64
		events []ev
		lease  string
		// what the migration must fill in
		last, active int64
	}{
		{id: "empty"},
		{id: "idle", taken: 2, last: 2, events: []ev{{kind: "message_posted", msg: 1}, {kind: "message_posted", msg: 2},
			{kind: "run_started", msg: 1, run: 1, holder: "h1"}, {kind: "run_ended", run: 1},
			{kind: "run_started", msg: 2, run: 2, holder: "h2"}, {kind: "run_ended", run: 2}}},
		{id: "waiting", taken: 1, last: 3, events: []ev{{kind: "message_posted", msg: 1}, {kind: "message_posted", msg: 2},
			{kind: "message_posted", msg: 3}, {kind: "run_started", msg: 1, run: 1, holder: "h1"}, {kind: "run_ended", run: 1}}},
		{id: "running", taken: 1, last: 1, active: 1, lease: "h3", events: []ev{{kind: "message_posted", msg: 1},
			{kind: "run_started", msg: 1, run: 1, holder: "h3"}}},
		{id: "abandoned", taken: 2, last: 2, active: 1, events: []ev{{kind: "message_posted", msg: 1},
			{kind: "run_started", msg: 1, run: 1, holder: "h1"}, {kind: "message_posted", msg: 2},
			{kind: "run_abandoned", run: 1, holder: "h2"}, {kind: "run_started", msg: 2, run: 2, holder: "h2"}}},
	}
	q := pgx.Identifier{schema}.Sanitize()
	at := epoch
	for _, th := range threads {
		_, err := pool.Exec(ctx, `INSERT INTO `+q+`.threads (id, version, taken) VALUES ($1, $2, $3)`, th.id, len(th.events), th.taken)
		require.NoError(t, err)
		for i, e := range th.events {
			_, err := pool.Exec(ctx, `INSERT INTO `+q+`.events (thread_id, seq, version, kind, at, message, text, run, holder)
				VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8)`, th.id, i+1, e.kind, at, e.msg, e.text, e.run, e.holder)
			require.NoError(t, err)
			if e.kind == "message_posted" {
				_, err := pool.Exec(ctx, `INSERT INTO `+q+`.messages (thread_id, seq, text, posted_at) VALUES ($1, $2, '', $3)`, th.id, e.msg, at)
				require.NoError(t, err)
			}
		}
		if th.lease != "" {
			_, err := pool.Exec(ctx, `INSERT INTO `+q+`.leases (key, holder, expires_at) VALUES ($1, $2, $3)`, th.id, th.lease, at.Add(ttl))
			require.NoError(t, err)
		}
	}

	s := openStore(t, poolConfig(t, "tc"), schema)
	require.Equal(t, allMigrations(t), appliedMigrations(t, schema))
	ws := core.NewWorkspace(s, core.SystemClock{})
	var pending []core.ThreadID
	for _, th := range threads {
		var last, active int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT last_message, active_runs FROM `+q+`.threads WHERE id = $1`, th.id).Scan(&last, &active))
		require.Equal(t, []int64{th.last, th.active}, []int64{last, active}, "thread %s: last_message, active_runs", th.id)
		got, err := ws.Thread(ctx, core.ThreadID(th.id))
		require.NoError(t, err)
		require.Equal(t, core.Seq(th.last), got.Last(), th.id)
		require.Len(t, got.ActiveRuns(), int(th.active), th.id)
		if th.taken < th.last || th.active > 0 {
			pending = append(pending, core.ThreadID(th.id))
		}
		for _, e := range th.events {
			if e.holder == "" {
				continue
			}
			_, err := ws.Claim(ctx, core.ThreadID(th.id), core.Holder(e.holder), ttl)
			require.ErrorIs(t, err, core.ErrInvalidArgument, "thread %s: a claim by %s, who held it before the migration", th.id, e.holder)
		}
	}
	got, err := s.PendingThreads(ctx)
	require.NoError(t, err)
	var gotIDs []core.ThreadID
	for _, p := range got {
		gotIDs = append(gotIDs, p.ID)
	}
	require.Equal(t, pending, gotIDs)
	_, err = ws.Claim(ctx, "empty", "fresh", ttl)
	require.NoError(t, err, "a fresh holder's claim")
}

// Migrations 0006 and 0007 on a schema at version 5 with a thread written
// there: the thread's next write under a claim, decided from a
// new Store's cache once it claims it, is one statement, and the foreign
// keys it drops are gone (an event of another thread's name would have
// been refused by them; the Store never writes one).
func TestMigrationToOneStatement(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	schema, pool := schemaAt(ctx, t, 5)
	q := pgx.Identifier{schema}.Sanitize()
	_, err := pool.Exec(ctx, `INSERT INTO `+q+`.threads (id, version, taken, last_message) VALUES ('t', 1, 0, 1);
		INSERT INTO `+q+`.events (thread_id, seq, version, kind, at, message, text) VALUES ('t', 1, 1, 'message_posted', now(), 1, 'm1');
		INSERT INTO `+q+`.messages (thread_id, seq, text, posted_at) VALUES ('t', 1, 'm1', now())`)
	require.NoError(t, err)

	s := openStore(t, poolConfig(t, "tc"), schema)
	require.Equal(t, allMigrations(t), appliedMigrations(t, schema))
	var fks int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE contype = 'f'
		AND connamespace = $1::regnamespace`, q).Scan(&fks))
	require.Zero(t, fks, "foreign keys left on events or messages")
	runStartInOneTrip(ctx, t, s)
	th, err := newProc(s, "b").ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Len(t, th.Runs(), 1)
	require.Equal(t, core.Seq(1), th.Taken)
}

// Migration 0007 on a schema at version 6 with leases in it: each lease
// moves onto its thread's row and reads back through the leases view; a
// lease whose key names no thread is not kept; the statements of the
// binary before, on the view, still work (its save_unchanged(), its
// lease upsert, its lease delete, which clears the lease and keeps the
// thread); and a write under a claim made after the migration is one
// statement.
func TestMigrationLeaseOnThread(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	schema, pool := schemaAt(ctx, t, 6)
	q := pgx.Identifier{schema}.Sanitize()
	exp := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	_, err := pool.Exec(ctx, `INSERT INTO `+q+`.threads (id, version, taken, last_message) VALUES ('t', 1, 0, 1), ('u', 1, 0, 1), ('v', 0, 0, 0);
		INSERT INTO `+q+`.events (thread_id, seq, version, kind, at, message, text) VALUES ('t', 1, 1, 'message_posted', now(), 1, 'm1'),
			('u', 1, 1, 'message_posted', now(), 1, 'm1');
		INSERT INTO `+q+`.messages (thread_id, seq, text, posted_at) VALUES ('t', 1, 'm1', now()), ('u', 1, 'm1', now());
		INSERT INTO `+q+`.leases (key, holder, expires_at) VALUES ('t', 'h0', '2030-01-02 03:04:05.123456+00'), ('nothread', 'h9', now())`)
	require.NoError(t, err)

	s := openStore(t, poolConfig(t, "tc"), schema)
	require.Equal(t, allMigrations(t), appliedMigrations(t, schema))
	leases := func() map[string]string {
		rows, err := pool.Query(ctx, `SELECT key, holder FROM `+q+`.leases`)
		require.NoError(t, err)
		got := map[string]string{}
		for rows.Next() {
			var k, h string
			require.NoError(t, rows.Scan(&k, &h))
			got[k] = h
		}
		require.NoError(t, rows.Err())
		return got
	}
	require.Equal(t, map[string]string{"t": "h0"}, leases(), "after the migration")
	var l core.Lease
	require.NoError(t, s.View(ctx, func(ctx context.Context, tx core.Transaction) (err error) {
		l, err = tx.Lease(ctx, "t")
		return err
	}))
	require.Equal(t, core.Lease{Thread: "t", Holder: "h0", ExpiresAt: exp}, l)

	// The binary before: its one-statement write under t's lease, its
	// lease upsert and its lease delete.
	_, err = pool.Exec(ctx, `SELECT `+q+`.save_unchanged('t', (SELECT created FROM `+q+`.threads WHERE id = 't'), 1, 'h0', $1,
		2, 0, 1, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`, exp)
	require.NoError(t, err, "0006's save_unchanged under the lease it checks")
	_, err = pool.Exec(ctx, `INSERT INTO `+q+`.leases (key, holder, expires_at) VALUES ('u', 'h1', now())
		ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at`)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"t": "h0", "u": "h1"}, leases(), "after the lease upsert of the binary before")
	_, err = pool.Exec(ctx, `DELETE FROM `+q+`.leases WHERE key = 't'`)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"u": "h1"}, leases(), "after the lease delete of the binary before")
	var threads int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+q+`.threads`).Scan(&threads))
	require.Equal(t, 3, threads, "threads left after a lease delete")

	runStartInOneTrip(ctx, t, s)
	require.Equal(t, map[string]string{"t": "ha", "u": "h1"}, leases())
}

// schemaAt returns a schema of the test's own with the first n migrations
// applied, and a pool on its database (closed when the test ends).
func schemaAt(ctx context.Context, t *testing.T, n int) (string, *pgxpool.Pool) {
	t.Helper()
	schema := testSchema(t)
	ms, err := migrations()
	require.NoError(t, err)
	require.Greater(t, len(ms), n, "migrations after the first %d", n)
	pool, err := pgxpool.NewWithConfig(ctx, poolConfig(t, "tc"))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, migrateTo(ctx, pool, schema, ms[:n]))
	return schema, pool
}

// execEach runs each statement on pool, with at as its $1 when it has one.
func execEach(ctx context.Context, t *testing.T, pool *pgxpool.Pool, at time.Time, sqls ...string) {
	t.Helper()
	for _, sql := range sqls {
		var args []any
		if strings.Contains(sql, "$1") {
			args = []any{at}
		}
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
}

// runStartInOneTrip claims thread "t", whose first message is not yet
// taken, as process "a", and checks that a RunStart under that claim is
// one round trip.
func runStartInOneTrip(ctx context.Context, t *testing.T, s *Store) {
	t.Helper()
	a := newProc(s, "a")
	c, err := a.ws.Claim(ctx, "t", "ha", ttl)
	require.NoError(t, err)
	planRun(t, a, c)
	trips := s.stats.roundTrips.Load()
	_, err = a.ws.RunStart(ctx, c, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.stats.roundTrips.Load()-trips, "round trips of a RunStart under the Store's own claim")
}

// droppedChecks are the CHECK constraints migration 0010 dropped from
// the rows every message writes, as the migrations before it declared
// them: those of the tables the schema still has (0010 dropped a tenth,
// messages_seq_check, from the messages table, which 0011 dropped).
var droppedChecks = []struct{ table, name, cond string }{
	{"threads", "threads_id_check", "id <> ''"},
	{"threads", "threads_version_check", "version >= 0"},
	{"threads", "threads_taken_check", "taken >= 0"},
	{"threads", "threads_last_message_check", "last_message >= 0"},
	{"threads", "threads_active_runs_check", "active_runs >= 0"},
	{"threads", "threads_lease_holder_check", "lease_holder <> ''"},
	{"threads", "threads_lease_whole", "(lease_holder IS NULL) = (lease_expires IS NULL)"},
	{"threads", "threads_log_n_check", "log_n >= 0"},
	{"events", "events_seq_check", "seq > 0"},
}

// checkedTables are the tables of droppedChecks.
var checkedTables = []string{"threads", "events"}

// brokenRowsSQL counts the rows of table, in the schema q (quoted), that
// break a condition of droppedChecks. A CHECK is broken by a row for
// which its condition is false (not null).
func brokenRowsSQL(q, table string) string {
	var conds []string
	for _, c := range droppedChecks {
		if c.table == table {
			conds = append(conds, "("+c.cond+")")
		}
	}
	return fmt.Sprintf("SELECT count(*) FROM %s.%s WHERE (%s) IS FALSE", q, table, strings.Join(conds, " AND "))
}

// addDroppedChecksSQL puts droppedChecks back on the schema q (quoted).
func addDroppedChecksSQL(q string) string {
	var stmts []string
	for _, c := range droppedChecks {
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s.%s ADD CONSTRAINT %s CHECK (%s)", q, c.table, c.name, c.cond))
	}
	return strings.Join(stmts, ";\n")
}

// brokenRows counts, table by table, the rows of schema that break a
// condition of droppedChecks (no key: none broken).
func brokenRows(ctx context.Context, tb testing.TB, pool *pgxpool.Pool, schema string) map[string]int {
	tb.Helper()
	broken := map[string]int{}
	for _, table := range checkedTables {
		var n int
		require.NoError(tb, pool.QueryRow(ctx, brokenRowsSQL(pgx.Identifier{schema}.Sanitize(), table)).Scan(&n), "count the %s rows that break what its checks said", table)
		if n > 0 {
			broken[table] = n
		}
	}
	return broken
}

// keepsRowChecks makes tb, once it ends (before s closes), check that
// every row s's schema holds keeps what the CHECK constraints migration
// 0010 dropped said: TestConformance runs it after each of its cases, so
// that whatever the suite writes is checked.
func keepsRowChecks(tb testing.TB, s *Store) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.Empty(tb, brokenRows(ctx, tb, s.pool, s.schema), "rows that break what the dropped CHECK constraints said")
	})
}

// Migration 0010 drops every CHECK constraint of threads, events and
// messages (it names each, IF EXISTS: a name it got wrong would leave
// its constraint; 0011 then drops messages), on a schema at version 9
// with rows in it; and brokenRows, which TestConformance runs in their
// place, finds a row that breaks any of their conditions.
func TestMigrationDropsRowChecks(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	schema, pool := schemaAt(ctx, t, 9)
	q := pgx.Identifier{schema}.Sanitize()
	checks := func(tables ...string) []string {
		var names []string
		for _, table := range tables {
			names = append(names, q+"."+table)
		}
		rows, err := pool.Query(ctx, `SELECT conname FROM pg_constraint
			WHERE contype = 'c' AND conrelid = ANY($1::regclass[]) ORDER BY 1`, names)
		require.NoError(t, err)
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	require.Len(t, checks("threads", "events", "messages"), len(droppedChecks)+1, "the CHECK constraints of threads, events and messages before 0010")
	s := openStore(t, poolConfig(t, "tc"), schema)
	require.Equal(t, allMigrations(t), appliedMigrations(t, schema))
	require.Empty(t, checks(checkedTables...), "CHECK constraints left on threads or events")
	p := newProc(s, "a")
	require.NoError(t, p.ws.CreateThread(ctx, "t"))
	_, err := p.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	runStartInOneTrip(ctx, t, s)
	require.Empty(t, brokenRows(ctx, t, pool, schema), "rows the Store wrote")

	for _, c := range []struct{ table, breakIt string }{
		{"threads", `UPDATE %[1]s.threads SET active_runs = -1 WHERE id = 't'`},
		{"threads", `UPDATE %[1]s.threads SET lease_expires = NULL WHERE id = 't'`},
		{"threads", `UPDATE %[1]s.threads SET lease_holder = '' WHERE id = 't'`},
		{"events", `UPDATE %[1]s.events SET seq = 0 WHERE thread_id = 't' AND seq = 1`},
	} {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, fmt.Sprintf(c.breakIt, q))
		require.NoError(t, err, c.breakIt)
		var n int
		require.NoError(t, tx.QueryRow(ctx, brokenRowsSQL(q, c.table)).Scan(&n))
		require.Equal(t, 1, n, "rows counted broken after %s", c.breakIt)
		require.NoError(t, tx.Rollback(ctx))
	}
}

// Migration 0011 on a schema at version 10 with posted messages in it:
// the messages table is gone, and nothing with it: the Store reads each
// message (its number, its text, its time) from its message_posted event,
// numbers the next post after them, and runs the first in one trip.
func TestMigrationDropsMessagesTable(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	schema, pool := schemaAt(ctx, t, 10)
	q := pgx.Identifier{schema}.Sanitize()
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	execEach(ctx, t, pool, at,
		`INSERT INTO `+q+`.threads (id, version, taken, last_message, log_n, log_at) VALUES ('t', 2, 0, 2, 2, $1)`,
		`INSERT INTO `+q+`.events (thread_id, seq, version, kind, at, message, text) VALUES ('t', 1, 1, 'message_posted', $1, 1, 'm1'),
			('t', 2, 2, 'message_posted', $1, 2, 'm2')`,
		`INSERT INTO `+q+`.messages (thread_id, seq, text, posted_at) VALUES ('t', 1, 'm1', $1), ('t', 2, 'm2', $1)`)

	s := openStore(t, poolConfig(t, "tc"), schema)
	require.Equal(t, allMigrations(t), appliedMigrations(t, schema))
	var table *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1)::text`, q+".messages").Scan(&table))
	require.Nil(t, table, "the messages table after 0011")
	p := newProc(s, "b")
	th, err := p.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, []core.Message{{Seq: 1, Text: "m1", PostedAt: at}, {Seq: 2, Text: "m2", PostedAt: at}}, th.Messages)
	seq, err := p.ws.Post(ctx, "t", "m3")
	require.NoError(t, err)
	require.Equal(t, core.Seq(3), seq)
	runStartInOneTrip(ctx, t, s)
	th, err = p.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Len(t, th.Messages, 3)
	require.Equal(t, "m3", th.Messages[2].Text)
	require.Equal(t, core.Seq(1), th.Taken)
}

// A schema one version newer than this binary's, or many, is refused with
// an error (not a panic), and nothing of the schema is written: not its
// migrations' record, not its tables.
func TestMigrationsNewerSchemaWritesNothing(t *testing.T) {
	ctx := testCtx(t)
	for _, newer := range []int{len(allMigrations(t)) + 1, 999} {
		schema := testSchema(t)
		s := openStore(t, poolConfig(t, "tc"), schema)
		require.NoError(t, core.NewWorkspace(s, core.SystemClock{}).CreateThread(ctx, "kept"))
		q := pgx.Identifier{schema}.Sanitize()
		_, err := admin(t).Exec(ctx, `INSERT INTO `+q+`.schema_migrations (version, name) VALUES ($1, 'future.sql')`, newer)
		require.NoError(t, err)
		before := appliedMigrations(t, schema)
		_, err = open(ctx, poolConfig(t, "tc"), Options{Schema: schema})
		require.ErrorContains(t, err, fmt.Sprintf("is at version %d, newer than this binary's %d", newer, len(allMigrations(t))))
		require.Equal(t, before, appliedMigrations(t, schema))
		ids, err := core.NewWorkspace(s, core.SystemClock{}).Threads(ctx)
		require.NoError(t, err)
		require.Equal(t, []core.ThreadID{"kept"}, ids)
	}
}

// A migration the server refuses (here 0012, on a schema at version 11
// that already has the column it adds) fails Open with an error naming
// the migration and the server's, and keeps nothing: the schema stays at
// version 11.
func TestMigrationRefusedKeepsNothing(t *testing.T) {
	ctx := testCtx(t)
	schema, pool := schemaAt(ctx, t, 11)
	q := pgx.Identifier{schema}.Sanitize()
	_, err := pool.Exec(ctx, `ALTER TABLE `+q+`.trace_lines ADD COLUMN read boolean`)
	require.NoError(t, err)
	_, err = open(ctx, poolConfig(t, "tc"), Options{Schema: schema})
	require.ErrorContains(t, err, `migration 0012_read_trace_lines.sql: ERROR: column "read" of relation "trace_lines" already exists`)
	require.Equal(t, allMigrations(t)[:11], appliedMigrations(t, schema))
}

// Migrating takes the migrations' lock for its transaction only: once
// Open has migrated, no session holds it (a session's lock, held by a
// pooled connection, would keep every later migration of the schema
// waiting while the Store is open). The lock's key is the one every
// released binary takes, (0x7463, hashtext(schema)): binaries of two
// versions opening one schema at once serialise.
func TestMigrationsLockHeldByNoSession(t *testing.T) {
	ctx := testCtx(t)
	schema := testSchema(t)
	openStore(t, poolConfig(t, "tc"), schema)
	var held int
	require.NoError(t, admin(t).QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1`, 0x7463).Scan(&held))
	require.Zero(t, held, "advisory locks of the migrations' class held after Open")
}

// The migrations' files are refused when one is not named NNNN_name.sql
// with NNNN above 0, or when their versions do not run 1, 2, ... (a gap,
// or two files of one version): a migration added by mistake fails every
// Open, and this test, rather than being applied out of order or never.
func TestMigrationFilesChecked(t *testing.T) {
	files := func(names ...string) fstest.MapFS {
		m := fstest.MapFS{}
		for _, n := range names {
			m["migrations/"+n] = &fstest.MapFile{Data: []byte("SELECT 1")}
		}
		return m
	}
	ms, err := migrationsIn(files("0002_b.sql", "0001_a.sql", "0003_c.sql"))
	require.NoError(t, err)
	var names []string
	for _, m := range ms {
		names = append(names, fmt.Sprint(m.version, " ", m.name))
	}
	require.Equal(t, []string{"1 0001_a.sql", "2 0002_b.sql", "3 0003_c.sql"}, names)
	for _, c := range []struct {
		names []string
		says  string
	}{
		{[]string{"0001_a.sql", "0003_c.sql"}, `migration "0003_c.sql": versions must run 1, 2, ... without gaps`},
		{[]string{"0001_a.sql", "0002_b.sql", "0002_c.sql"}, "without gaps"},
		{[]string{"0000_a.sql", "0001_b.sql"}, `migration file "0000_a.sql" is not named NNNN_name.sql`},
		{[]string{"0001.sql"}, `migration file "0001.sql" is not named NNNN_name.sql`},
		{[]string{"first_a.sql"}, `migration file "first_a.sql" is not named NNNN_name.sql`},
		{[]string{"0001_a.sql", "0002_b.txt"}, `migration file "0002_b.txt" is not named NNNN_name.sql`},
	} {
		_, err := migrationsIn(files(c.names...))
		require.ErrorContains(t, err, c.says, "%v", c.names)
	}
}
