package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/threadclaim/threadclaim/core"
)

// commitOneTrip sends a transaction that has sent nothing yet — the
// check of what it assumed, its writes — as one pipeline of prepared
// statements on the connection's pgconn, with the arguments encoded as
// text into one reused buffer, and no BEGIN or COMMIT: the statements of
// one pipeline (one Sync) run as one implicit transaction, which commits
// when the last succeeds and rolls back whole when one fails. A write on
// one thread (a RunStart, RunEnd, Abandon, Reply, or a Post under the
// Store's own lease) is then a single statement, save_unchanged()
// (migration 0006): one round trip, and nothing for the server to run but
// the write. It returns the error of the first statement that failed, or
// of the connection.
func (t *txn) commitOneTrip(ctx context.Context) error {
	b := &pgconn.Batch{}
	for i := range t.assumed {
		// The check, and the thread row's UPDATE when the thread was
		// written, in one statement.
		a := &t.assumed[i]
		var argv [maxParams]arg
		args := append(argv[:0], str(a.id), i64(a.created), i64(a.version), str(string(a.lease.Holder)), tm(a.lease.ExpiresAt))
		sql := t.s.q.unchanged
		if th := t.threads[core.ThreadID(a.id)]; th != nil && th.dirty {
			sql = t.s.q.saveUnchanged
			args = append(args, i64(int64(th.state.Version)), i64(int64(th.state.Taken)), i64(int64(th.state.Last())), i64(activeRuns(th.state)))
			th.dirty = false
			if ev := t.firstPending(t.s.q.insertEvent); ev != nil && ev.args[0].s == a.id {
				// ... and the write's event: one statement for the whole write.
				args = append(args, ev.args[1:ev.n]...)
				ev.sql = "" // sent
			} else {
				for range maxParams - len(args) {
					args = append(args, arg{kind: argNull}) // no event
				}
			}
		}
		if err := t.exec(ctx, b, sql, args...); err != nil {
			return err
		}
	}
	for i := range t.pending {
		st := &t.pending[i]
		if st.sql == "" {
			continue
		}
		if err := t.exec(ctx, b, st.sql, st.args[:st.n]...); err != nil {
			return err
		}
	}
	t.pending = t.pending[:0]
	for id, th := range t.threads {
		if th.dirty {
			if err := t.exec(ctx, b, t.s.q.saveThread, str(string(id)), i64(int64(th.state.Version)), i64(int64(th.state.Taken)),
				i64(int64(th.state.Last())), i64(activeRuns(th.state))); err != nil {
				return err
			}
			th.dirty = false
		}
	}
	t.begun = true
	t.s.stats.roundTrips.Add(1)
	pc := t.conn.PgConn()
	if pc.IsClosed() {
		return errors.New("postgres: the connection is closed: nothing sent")
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

// exec adds the prepared statement sql, with args, to b. The statement is
// prepared on the connection the first time (a round trip of its own,
// once per connection).
func (t *txn) exec(ctx context.Context, b *pgconn.Batch, sql string, args ...arg) error {
	sd, err := t.conn.Prepare(ctx, t.s.q.name(sql), sql)
	if err != nil {
		return fmt.Errorf("postgres: prepare: %w", err)
	}
	var params [maxParams][]byte
	buf := t.s.encodeBuf(t)
	for i, a := range args {
		start := len(buf)
		switch a.kind {
		case argString:
			buf = append(buf, a.s...)
		case argInt:
			buf = strconv.AppendInt(buf, a.i, 10)
		case argTime:
			buf = a.t.UTC().AppendFormat(buf, pgTimeText)
		case argNull:
			params[i] = nil
			continue
		}
		params[i] = buf[start:len(buf):len(buf)]
	}
	t.buf = buf
	// Bind copies the arguments into b's buffer: buf is free again after.
	b.ExecStatement(sd, params[:len(args)], nil, nil)
	return nil
}

// maxParams is the most arguments a statement sent in one round trip
// takes (save_unchanged's).
const maxParams = 18

// pgTimeText is a timestamptz as PostgreSQL reads it as text, to the
// microsecond it keeps.
const pgTimeText = "2006-01-02 15:04:05.999999-07"

// encodeBuf returns t's argument buffer, emptied.
func (s *Store) encodeBuf(t *txn) []byte {
	if t.buf == nil {
		t.buf = make([]byte, 0, 512)
	}
	return t.buf[:0]
}
