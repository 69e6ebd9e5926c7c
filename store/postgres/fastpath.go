package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/threadclaim/threadclaim/core"
)

// commitOneTrip sends a transaction that has sent nothing yet — the
// check of what it assumed, its writes — as one pipeline of prepared
// statements, with the arguments encoded into the transaction's reused
// buffer, and no BEGIN or COMMIT: the statements up to one Sync run as
// one implicit transaction, which commits when the last succeeds and
// rolls back whole when one fails. A write on one thread (a RunStart,
// RunEnd, Abandon, Reply, or a Post under the Store's own lease) is then
// a single SQL statement, checkedWriteSQL, and so is a Renew or a Release
// (checkedLeaseSQL), and a run's end with its Release (checkedWriteSQL
// with writeLeaseSet): one statement, and no PL/pgSQL. It goes in the
// Store's next round trip (trips.go): at once when none is in flight,
// else with the other writes that became ready meanwhile, sharing their
// commit, each with its own check. It returns the error of the first
// statement that failed, or of the connection.
func (t *txn) commitOneTrip(ctx context.Context) error {
	t.trip.stmts = t.trip.stmts[:0]
	for i := range t.assumed {
		// The check, and the thread row's UPDATE when the thread was
		// written, in one statement.
		a := &t.assumed[i]
		var argv [maxParams]arg
		args := append(argv[:0], str(a.id), i64(a.created), i64(a.version), str(string(a.lease.Holder)), tm(a.lease.ExpiresAt))
		end := logEnd(a.n, a.last)
		sql := t.s.q.unchanged
		if th := t.threads[core.ThreadID(a.id)]; th != nil && th.dirty {
			sql = t.s.q.saveUnchanged
			args = append(args, i64(int64(th.state.Version)), i64(int64(th.state.Taken)), i64(int64(th.state.Last())), i64(activeRuns(th.state)))
			th.dirty = false
			var lease [2]arg
			if ev := t.firstPending(t.s.q.insertEvent); ev != nil && ev.args[0].s == a.id {
				// ... and the write's event: one statement for the whole write.
				args = append(args, ev.args[1:ev.n]...)
				ev.sql = "" // sent
				var ok bool
				if lease, ok = t.foldLease(a.id); ok {
					// ... and its lease's too (a run's end with its Release).
					sql = t.s.q.saveEventLease
				}
			} else if lease, ok := t.foldLease(a.id); ok {
				// ... or its lease's write or delete (a Renew, a Release).
				sql = t.s.q.saveLease
				args = append(args, lease[:]...)
			} else {
				for range withEvent - len(args) {
					args = append(args, arg{kind: argNull}) // no event
				}
			}
			args = append(args, end[:]...)
			if sql == t.s.q.saveUnchanged || sql == t.s.q.saveEventLease {
				newEnd := logEnd(th.n, th.last)
				args = append(args, newEnd[:]...)
			}
			if sql == t.s.q.saveEventLease {
				args = append(args, lease[:]...)
			}
		} else {
			args = append(args, end[:]...)
		}
		if err := t.exec(ctx, sql, args...); err != nil {
			return err
		}
	}
	for i := range t.pending {
		st := &t.pending[i]
		if st.sql == "" {
			continue
		}
		if err := t.exec(ctx, st.sql, st.args[:st.n]...); err != nil {
			return err
		}
	}
	t.pending = t.pending[:0]
	for id, th := range t.threads {
		if th.dirty {
			st := t.saveRow(string(id), th)
			if err := t.exec(ctx, st.sql, st.args[:st.n]...); err != nil {
				return err
			}
			th.dirty = false
		}
	}
	t.begun = true
	return t.s.trips.send(ctx, t)
}

// sendAlone sends t's one-trip statements (t.trip) on its own connection,
// alone: one round trip, one Sync. A lone statement goes as pgconn's
// ExecStatement, the same messages, which the connection encodes in a
// buffer it keeps; a batch's buffer grew anew at each write, 12% of the
// bytes a runner allocated a message (store/postgres/BENCH.md).
func (t *txn) sendAlone(ctx context.Context) error {
	if err := t.ready(ctx); err != nil {
		return err
	}
	pc := t.conn.PgConn()
	if pc.IsClosed() {
		return errors.New("postgres: the connection is closed: nothing sent")
	}
	if len(t.trip.stmts) == 1 {
		st := &t.trip.stmts[0]
		_, err := pc.ExecStatement(ctx, st.sd, st.params[:st.n], st.formats(), nil).Close()
		return tripResult(pc, err)
	}
	b := &pgconn.Batch{}
	for i := range t.trip.stmts {
		st := &t.trip.stmts[i]
		// Bind copies the arguments into b's buffer.
		b.ExecStatement(st.sd, st.params[:st.n], st.formats(), nil)
	}
	mrr := pc.ExecBatch(ctx, b)
	var first error // the first failure: later ones only say the connection is gone
	for mrr.NextResult() {
		if _, err := mrr.ResultReader().Close(); err != nil && first == nil {
			first = err
		}
	}
	if err := mrr.Close(); first == nil {
		first = err
	}
	return tripResult(pc, first)
}

// tripResult is the outcome of a one-trip write whose statements ran up to
// their Sync with first as the first failure (nil: none): the server's
// error as it is, anything else a sentError, and a transaction left open
// (none of the Store's statements leaves one) unknown too.
func tripResult(pc *pgconn.PgConn, first error) error {
	var pgErr *pgconn.PgError
	if first != nil && !errors.As(first, &pgErr) {
		return &sentError{first}
	}
	if first == nil && pc.TxStatus() != 'I' {
		// A statement left a transaction open (none of the Store's does):
		// nothing of it is known to be kept.
		return &sentError{fmt.Errorf("postgres: the server reports transaction status %q after the write", pc.TxStatus())}
	}
	return first
}

// sentError is a failure of a round trip whose statements were handed to
// the connection: whatever pgconn says of it (a connection it closed
// while reading the reply reports "conn closed", which pgconn deems safe
// to retry), they may have run, COMMIT included.
type sentError struct{ err error }

func (e *sentError) Error() string { return e.err.Error() }
func (e *sentError) Unwrap() error { return e.err }

// SafeToRetry is false: the outcome is unknown.
func (e *sentError) SafeToRetry() bool { return false }

// firstPending returns the first queued statement when it is sql.
func (t *txn) firstPending(sql string) *statement {
	if len(t.pending) > 0 && t.pending[0].sql == sql {
		return &t.pending[0]
	}
	return nil
}

// exec adds the prepared statement sql, with args, to t's one-trip
// statements (t.trip). The statement is prepared once for the Store (a
// round trip of its own, on the connection t then takes), and its
// description kept (Store.sds): t takes no connection for it after that;
// the connection that sends it prepares it first if it has not (ready,
// sendTogether: once per connection). Integers,
// times and strings go in PostgreSQL's binary form where the statement
// takes a bigint, a timestamptz or a text, which the server reads without
// parsing (and the client writes without formatting); any other parameter
// goes as text. The encoded arguments stay in t.buf until the trip is
// sent.
func (t *txn) exec(ctx context.Context, sql string, args ...arg) error {
	var sd *pgconn.StatementDescription
	if v, ok := t.s.sds.Load(sql); ok {
		sd = v.(*pgconn.StatementDescription)
	} else {
		if err := t.need(ctx); err != nil {
			return err
		}
		var err error
		sd, err = t.conn.Prepare(ctx, t.s.q.name(sql), sql)
		if err != nil {
			return fmt.Errorf("postgres: prepare: %w", err)
		}
		t.s.sds.Store(sql, sd)
	}
	st := t.trip.add(sd, len(args))
	buf := t.buf
	for i, a := range args {
		var oid uint32
		if i < len(sd.ParamOIDs) {
			oid = sd.ParamOIDs[i]
		}
		start := len(buf)
		st.fmts[i] = pgx.BinaryFormatCode
		switch {
		case a.kind == argNull:
			st.params[i] = nil
			continue
		case a.kind == argInt && oid == pgtype.Int8OID:
			buf = binary.BigEndian.AppendUint64(buf, uint64(a.i))
		case a.kind == argTime && oid == pgtype.TimestamptzOID:
			buf = binary.BigEndian.AppendUint64(buf, uint64(pgMicros(a.t)))
		case a.kind == argString && oid == pgtype.TextOID:
			buf = append(buf, a.s...) // text's binary form is its bytes
		case a.kind == argString:
			buf, st.fmts[i], st.allBinary = append(buf, a.s...), pgx.TextFormatCode, false
		case a.kind == argInt:
			buf, st.fmts[i], st.allBinary = strconv.AppendInt(buf, a.i, 10), pgx.TextFormatCode, false
		case a.kind == argTime:
			buf, st.fmts[i], st.allBinary = a.t.UTC().AppendFormat(buf, pgTimeText), pgx.TextFormatCode, false
		}
		// Later arguments append past this one's end (or to a new array,
		// leaving this one as it is): the slice stays valid until the
		// trip is sent.
		st.params[i] = buf[start:len(buf):len(buf)]
	}
	t.buf = buf
	return nil
}

// pgMicros is t as a timestamptz in PostgreSQL's binary form: microseconds
// since 2000-01-01 00:00 UTC, truncated (as pgx writes a time.Time).
func pgMicros(t time.Time) int64 {
	const unixToY2K = 946684800 * 1000000
	return t.Unix()*1000000 + int64(t.Nanosecond())/1000 - unixToY2K
}

// maxParams is the most arguments a statement sent in one round trip
// takes (checkedWriteSQL's with writeLeaseSet); withEvent is how many come before the
// log's end, checked and written.
const (
	maxParams = 24
	withEvent = 18
)

// pgTimeText is a timestamptz as PostgreSQL reads it as text, to the
// microsecond it keeps.
const pgTimeText = "2006-01-02 15:04:05.999999-07"

// The statements a write decided from the cache is sent as (%[1]s is the
// schema). Each locks the thread's row — which holds the thread's lease
// too (migration 0007) — with the whole check in its WHERE: the same
// thread (created), at the version the cache had, under the lease the
// cache had (holder and expiry); and calls conflict() (0007), which
// raises SQLSTATE TC001, when no row matched. The error rolls back the
// implicit transaction the statement came in (trips.go sends the others
// sharing it again). Under READ COMMITTED a row lock that waited for
// another transaction rechecks the WHERE on the row that transaction
// left, so the check sees every write that committed before the lock was
// granted, the lease's included.
//
// checkedWriteSQL is the whole of a consuming write: the thread row's
// UPDATE ($6 to $9, and the log's new end, $21 and $22) with the check
// ($1 to $5, $19 and $20), and the write's event ($10 to $18; none when
// $10 is NULL), inserted from the row the UPDATE returned. A
// data-modifying WITH that the query does not read runs after it, so a
// failed check raises before anything is inserted. No PL/pgSQL runs
// unless the check fails. %[2]s is more of the row to set: nothing, or
// the lease too (writeLeaseSet: holder $23, expiry $24; NULL and NULL: no
// lease), for a run's end with the Release after it (core's
// RunEndThenStart): one row version, one statement.
const checkedWriteSQL = `WITH w AS (
	UPDATE %[1]s.threads SET version = $6, taken = $7, last_message = $8, active_runs = $9,
	       log_n = $21, log_at = $22%[2]s
	 WHERE id = $1 AND created = $2 AND version = $3 AND lease_holder = $4 AND lease_expires = $5
	   AND log_n = $19 AND log_at IS NOT DISTINCT FROM $20::timestamptz
	RETURNING id
), e AS (
	INSERT INTO %[1]s.events (thread_id, seq, version, kind, at, message, text, run, request, holder)
	SELECT id, $10::bigint, $11::bigint, $12::text, $13::timestamptz, $14::bigint, $15::text, $16::bigint, $17::bigint, $18::text
	  FROM w WHERE $10::bigint IS NOT NULL
)
SELECT %[1]s.conflict($1) WHERE NOT EXISTS (SELECT FROM w)`

// hardCheck ends each checked statement (%s is the schema): when the
// check matched no row, conflict() raises, and the implicit transaction
// the statement came in rolls back. softCheck is its twin for a write
// that is its transaction's only statement, sent in a shared transaction
// (trips.go): the failed check returns the thread's id as a row instead,
// and the write, having matched no row, wrote nothing, so the writes
// beside it in the shared transaction commit.
const (
	hardCheck = `SELECT %s.conflict($1) WHERE NOT EXISTS (SELECT FROM w)`
	softCheck = `SELECT $1::text WHERE NOT EXISTS (SELECT FROM w)`
)

// writeLeaseSet is what checkedWriteSQL sets besides when it writes the
// lease too.
const writeLeaseSet = `, lease_holder = $23, lease_expires = $24`

// checkedLeaseSQL is the whole of a Renew or a Release: the thread row's
// UPDATE with the check ($1 to $5, $12 and $13), writing the lease on
// the row too (holder $10, expiry $11; NULL and NULL: no lease). One row version for the write.
const checkedLeaseSQL = `WITH w AS (
	UPDATE %[1]s.threads SET version = $6, taken = $7, last_message = $8, active_runs = $9,
	       lease_holder = $10, lease_expires = $11
	 WHERE id = $1 AND created = $2 AND version = $3 AND lease_holder = $4 AND lease_expires = $5
	   AND log_n = $12 AND log_at IS NOT DISTINCT FROM $13::timestamptz
	RETURNING id
)
SELECT %[1]s.conflict($1) WHERE NOT EXISTS (SELECT FROM w)`

// checkedSQL is the check alone, for a write that changes no thread row:
// the row is locked with FOR UPDATE instead of the UPDATE.
const checkedSQL = `WITH w AS (
	SELECT FROM %[1]s.threads
	 WHERE id = $1 AND created = $2 AND version = $3 AND lease_holder = $4 AND lease_expires = $5
	   AND log_n = $6 AND log_at IS NOT DISTINCT FROM $7::timestamptz
	   FOR UPDATE
)
SELECT %[1]s.conflict($1) WHERE NOT EXISTS (SELECT FROM w)`

// logEnd is a log's end as the thread's row names it (log_n, log_at):
// n events, the last of which is last.
func logEnd(n int64, last core.Event) [2]arg {
	if n == 0 {
		return [2]arg{i64(0), {kind: argNull}}
	}
	return [2]arg{i64(n), tm(last.At)}
}
