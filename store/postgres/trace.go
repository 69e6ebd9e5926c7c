package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/threadclaim/threadclaim/core"
)

var (
	_ core.TraceLog       = (*txn)(nil)
	_ core.TraceLogReader = (*txn)(nil)
)

// LogTrace queues the insert of a trace line, sent with the transaction's
// commit: a write's, or a read's that a later write of the transaction
// went by (migration 0012). It does nothing unless the Store keeps traces.
func (t *txn) LogTrace(_ context.Context, ev core.TraceEvent) error {
	if !t.s.keepTrace {
		return nil
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("postgres: trace line: %w", err)
	}
	t.queue(t.s.q.insertTrace, str(string(ev.Thread)), i64(int64(ev.Tick)), str(strconv.FormatBool(ev.Read)), str(string(b)))
	return nil
}

// KeepsTrace reports whether the Store keeps trace lines (KeepTrace):
// without, LoggedTrace finds none, which says nothing of what committed
// (core's unexported traceKeeper).
func (t *txn) KeepsTrace() bool { return t.s.keepTrace }

// LoggedTrace returns the line a committed write logged at the thread's
// tick, and false when none did or the Store keeps no trace lines. It is
// one round trip, sent with the writes queued before it; a Crash asks it
// whether a write whose commit was unknown committed.
func (t *txn) LoggedTrace(ctx context.Context, id core.ThreadID, tick uint64) (core.TraceEvent, bool, error) {
	if !t.s.keepTrace {
		return core.TraceEvent{}, false, nil
	}
	if t.err != nil {
		return core.TraceEvent{}, false, t.err
	}
	var raw []byte
	b := t.batch()
	b.Queue(t.s.q.traceLine, string(id), int64(tick)).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err := t.send(ctx, b); err != nil {
		return core.TraceEvent{}, false, err
	}
	if raw == nil {
		return core.TraceEvent{}, false, nil
	}
	var ev core.TraceEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return core.TraceEvent{}, false, fmt.Errorf("postgres: trace line %s: %w", raw, err)
	}
	return ev, true, nil
}

// TraceLines returns the trace lines of every committed write, and of the
// reads such a write went by in its transaction, by thread and tick (a
// tick's write before its read), as a Store opened with KeepTrace kept
// them. It is an
// administrative read, for checking a run's trace (tracecheck fleet reads
// the writes from here, so that a process killed after its commit loses no
// line): it reads the whole table and is not meant for a runner's path.
func (s *Store) TraceLines(ctx context.Context) ([]core.TraceEvent, error) {
	rows, err := s.pool.Query(ctx, s.q.traceLines)
	if err != nil {
		return nil, fmt.Errorf("postgres: trace lines: %w", err)
	}
	defer rows.Close()
	var out []core.TraceEvent
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("postgres: trace lines: %w", err)
		}
		var ev core.TraceEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("postgres: trace line %s: %w", raw, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: trace lines: %w", err)
	}
	return out, nil
}

// DropSchema drops the Store's schema and everything in it, irreversibly.
// It is an administrative operation for throwaway schemas: tests,
// tracecheck run -storage and tracecheck fleet make a schema per execution
// and drop it after. A deployment never calls it.
//
// It refuses, dropping nothing, the schema public (the database's own)
// and a schema that holds a table, view, sequence or function the Store's
// migrations did not make (ownObjects): someone else's, which DROP SCHEMA
// CASCADE would take with it. A schema dropped already (a second
// DropSchema) is no error; after Close it returns an error saying the
// Store is closed.
func (s *Store) DropSchema(ctx context.Context) error {
	switch {
	case s.schema == "public":
		return fmt.Errorf("postgres: drop schema %q: refused: it is the database's own schema", s.schema)
	case s.closed.Load():
		return fmt.Errorf("drop schema %q: %w", s.schema, errStoreClosed)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var others []string
		if err := tx.QueryRow(ctx, othersSQL, s.schema, ownObjects).Scan(&others); err != nil {
			return fmt.Errorf("postgres: drop schema %q: %w", s.schema, err)
		}
		if len(others) > 0 {
			return fmt.Errorf("postgres: drop schema %q: refused: it holds what this Store did not make (%s); drop it by hand if that is meant", s.schema, strings.Join(others, ", "))
		}
		if _, err := tx.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.schema}.Sanitize()+" CASCADE"); err != nil {
			return fmt.Errorf("postgres: drop schema %q: %w", s.schema, err)
		}
		return nil
	})
}

// ownObjects are the tables, views, sequences and functions the Store's
// migrations leave in its schema (TestOwnObjects keeps the list true).
var ownObjects = []string{
	"events", "holders", "leases", "schema_migrations", "threads", "threads_created_seq", "trace_lines",
	"conflict()", "notify_followers()", "save_unchanged()", "unchanged()", "unchanged_save()", "unchanged_save_event()",
}

// othersSQL lists what schema $1 holds beyond the names in $2: its
// tables, views, sequences (by name) and functions (by name and "()").
const othersSQL = `SELECT coalesce(array_agg(o ORDER BY o), '{}') FROM (
  SELECT c.relname::text AS o FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = $1 AND c.relkind IN ('r', 'v', 'm', 'p', 'f', 'S')
  UNION ALL
  SELECT p.proname || '()' FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname = $1) x
 WHERE NOT (o = ANY($2))`
