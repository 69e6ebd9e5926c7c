package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadclaim/threadclaim/core"
)

// postSQL is a whole post in one statement (%[1]s is the schema): the
// thread row's UPDATE, which locks the row and bumps its version, its
// message count and its log's end; the message_posted event (the
// message: its number, its text, its time), inserted from the row the
// UPDATE returned; and, when the post gives work to a thread that had
// none and no live lease (none, or one expired by the server's clock),
// the wake-up's NOTIFY ($5 the channel, $6 the payload), sent at commit:
// a held thread's holder plans the message, or its release wakes
// (Wakeups); a thread that had work already had its wake-up (a post's or
// a release's) or is a poll's to find (a lapsed holder's). Each NOTIFY
// costs every listening backend of the database a transaction of its own
// (PostgreSQL 15 signals them all, whatever their channels), so a post
// to a thread with a backlog sends none. No row: the
// thread does not exist, and nothing is written. It returns the message's
// seq, the new version and the taken cursor, as the locked row has them.
const postSQL = `WITH w AS (
	UPDATE %[1]s.threads SET version = version + 1, last_message = last_message + 1,
	       log_n = log_n + 1, log_at = $3
	 WHERE id = $1
	RETURNING id, version, last_message, taken, log_n, lease_holder, lease_expires, active_runs
), e AS (
	INSERT INTO %[1]s.events (thread_id, seq, version, kind, at, message, text, run, request, holder)
	SELECT id, log_n, version, $4::text, $3, last_message, $2, 0, 0, '' FROM w
)
SELECT w.last_message, w.version, w.taken FROM w
  LEFT JOIN LATERAL (SELECT pg_notify($5, $6)
	 WHERE (w.lease_holder IS NULL OR w.lease_expires <= now()) AND w.taken = w.last_message - 1 AND w.active_runs = 0) n ON true`

// PostMessage is what core.Workspace.Post calls, when a transaction has
// it, in place of reading the thread (core's unexported messagePoster:
// TestPostOneRoundTrip fails if the two ever part): a post decided in
// the server, postSQL: one statement and
// one round trip, where reading the thread first (its row under lock and
// its new events) and then writing took two. Without KeepTrace the
// statement is the whole transaction (autocommitted); with it the
// transaction stays open for the post's trace line, sent with COMMIT.
//
// A transaction that has read or written already, and a post to a thread
// whose lease this Store holds (a write under it is one round trip
// already, decided from the cache, and keeps the cache current), take the
// reading path instead.
func (t *txn) PostMessage(ctx context.Context, id core.ThreadID, at time.Time, text string) (core.Seq, uint64, core.Seq, error) {
	if err := core.CheckText("event text", text); err != nil {
		return 0, 0, 0, err
	}
	if t.err != nil {
		return 0, 0, 0, t.err
	}
	fresh := !t.begun && !t.shot && len(t.pending) == 0 && len(t.assumed) == 0 && len(t.threads) == 0
	if c := t.s.cached(id); !fresh || t.readOnly || t.s.readPost || t.postReads || c != nil && c.ownLease && !c.distrusted && t.speculate {
		return t.postRead(ctx, id, at, text)
	}
	at = eventTime(at)
	args := []any{string(id), text, at, string(core.MessagePosted), t.s.wakeChannel(string(id)), wakePayload(string(id))}
	var msg, version, taken int64
	scan := func(r pgx.Row) error { return r.Scan(&msg, &version, &taken) }
	var err error
	if t.s.keepTrace {
		b := t.batch() // BEGIN
		found := false
		b.Queue(t.s.q.post, args...).QueryRow(func(r pgx.Row) error {
			err := scan(r)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			found = err == nil
			return err
		})
		if err := t.send(ctx, b); err != nil {
			if logBehind(err) {
				// As below, but the statement was in a transaction,
				// which the collision lost: Store.run runs fn again,
				// its post reading.
				return 0, 0, 0, fmt.Errorf("thread %q: %w", id, errPostBehind)
			}
			return 0, 0, 0, err
		}
		if !found {
			return 0, 0, 0, fmt.Errorf("thread %q: %w", id, core.ErrUnknownThread)
		}
		return core.Seq(msg), uint64(version), core.Seq(taken), nil
	}
	// Autocommitted: the statement is the transaction, and once sent its
	// outcome is COMMIT's.
	if err := t.need(ctx); err != nil {
		return 0, 0, 0, err
	}
	t.shot = true
	t.s.stats.roundTrips.Add(1)
	err = scan(t.conn.QueryRow(ctx, t.s.q.post, args...))
	switch {
	case logBehind(err):
		// The row's log end is behind its log (a binary before
		// migration 0009 appended): nothing was written. Post reading
		// the log, which sets the row's log end again.
		t.shot = false
		return t.postRead(ctx, id, at, text)
	case errors.Is(err, pgx.ErrNoRows):
		return 0, 0, 0, fmt.Errorf("thread %q: %w", id, core.ErrUnknownThread)
	case err != nil:
		return 0, 0, 0, commitError(err)
	}
	return core.Seq(msg), uint64(version), core.Seq(taken), nil
}

// errPostBehind: a one-statement post in a transaction collided with an
// event its thread's row did not know of (the row's log end behind its
// log: a binary before migration 0009 appended), which lost the
// transaction; nothing of it was kept. Store.run runs the transaction's
// function again, its post reading the log (postRead), which sets the
// row's log end again.
var errPostBehind = errors.New("postgres: the thread's log end was behind its log: run again, reading")

// postRead is a post as Workspace.Post makes it on a Transaction that is
// without PostMessage: read the thread, check the event, bump, append.
func (t *txn) postRead(ctx context.Context, id core.ThreadID, at time.Time, text string) (core.Seq, uint64, core.Seq, error) {
	th, err := t.thread(ctx, id)
	if err != nil {
		return 0, 0, 0, err
	}
	ev := core.Event{Kind: core.MessagePosted, At: at, Message: th.state.Last() + 1, Text: text}
	if err := th.state.Check(ev); err != nil {
		return 0, 0, 0, err
	}
	if ev.Version, err = t.Bump(ctx, id); err != nil {
		return 0, 0, 0, err
	}
	if err := t.Append(ctx, id, ev); err != nil {
		return 0, 0, 0, err
	}
	return ev.Message, ev.Version, th.state.Taken, nil
}
