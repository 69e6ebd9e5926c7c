package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/threadclaim/threadclaim/core"
)

// txn is one transaction on one connection. It begins lazily, with the
// first statement. Its writes are queued and sent with its next read or
// with COMMIT, in one round trip: the rows they change are locked by the
// reads that came first, so nothing another transaction does can make
// them fail in between, and the transaction reads its own writes from the
// states it holds.
//
// A speculating transaction reads a thread from the Store's cache without
// a round trip, when the cache holds the thread under a lease this Store
// wrote (see assumption), and sends the check that the thread is
// unchanged in front of whatever it sends first: with COMMIT, for a
// write that reads nothing else, so the whole write is one round trip.
type txn struct {
	s     *Store
	conn  *pgx.Conn
	held  *pgxpool.Conn // the pool's connection conn is, once taken (need)
	begun bool
	// readOnly: a View's transaction, REPEATABLE READ READ ONLY, reading
	// without FOR UPDATE.
	readOnly bool
	// speculate: threads may be read from the cache until the first
	// round trip.
	speculate bool
	assumed   []assumption // threads read from the cache, checked by the first round trip
	conflict  bool         // that check failed: the transaction is lost, and is run again without speculating
	// oneShot: a read-only transaction whose first round trip carries
	// COMMIT too (shot, once sent). Reading a thread (its row, its lease
	// and its new events) is one round trip; fn asking for a second
	// (again) is run again with a transaction that stays open.
	oneShot, shot, again bool
	// postReads: a post reads the thread first (postRead), as after a
	// one-statement post collided with a log whose end its row did not
	// know (errPostBehind).
	postReads bool
	pending   []statement
	buf       []byte                       // the arguments of the statements sent in one round trip, encoded
	evs       []eventRow                   // the events a one-trip claim read (sendClaim), reused
	trip      trip                         // those statements, and their place in the Store's trips
	threads   map[core.ThreadID]*txThread  // locked by this transaction
	leases    map[core.ThreadID]core.Lease // locked (or seen absent) by this transaction
	err       error                        // the first failure: the transaction is lost
	releases  bool                         // a lease is deleted: its holder's turn ends (trips)
	spare     [2]txThread                  // the first threads' values, reused
	nSpare    int
	handles   []handle // the handles not yet given to an fn (newHandle)
}

// reset makes t a new transaction on conn, keeping its allocations.
func (t *txn) reset(s *Store, conn *pgx.Conn, readOnly, speculate bool) {
	clear(t.threads)
	clear(t.leases)
	clear(t.spare[:])
	clear(t.pending) // no strings kept alive
	clear(t.evs)
	*t = txn{s: s, conn: conn, held: t.held, readOnly: readOnly, speculate: speculate && !readOnly, oneShot: speculate && readOnly,
		threads: t.threads, leases: t.leases, pending: t.pending[:0], assumed: t.assumed[:0], buf: t.buf[:0], evs: t.evs[:0],
		trip: trip{stmts: t.trip.stmts[:0], signal: t.trip.signal}, handles: t.handles}
}

// newThread returns a txThread of t's own, zeroed.
func (t *txn) newThread() *txThread {
	if t.nSpare < len(t.spare) {
		t.nSpare++
		return &t.spare[t.nSpare-1]
	}
	return &txThread{}
}

// assumption is a thread as the Store's cache holds it, which a
// speculating transaction decided on. The check sent with the write
// (checkedSQL and its kin, fastpath.go) locks the thread's row, which
// holds its lease, and fails unless both still match: then every decision
// made from the cache is the decision the locking reads would have led
// to, at the moment of the check.
type assumption struct {
	id               string
	created, version int64
	lease            core.Lease
	n                int64      // the events the cache folded
	last             core.Event // event n
}

// conflictCode is the SQLSTATE a failed check raises (conflict(), and
// unchanged() and save_unchanged() of the migrations before 0007).
const conflictCode = "TC001"

var _ core.Transaction = (*txn)(nil)

// statement is a write queued to be sent with the transaction's next
// round trip. Its arguments are kept typed, so that a write sent in one
// round trip (fastpath.go) encodes them without boxing them.
type statement struct {
	sql  string
	n    int
	args [maxArgs]arg
}

const maxArgs = 10

// arg is one argument of a statement: a string, an integer or a time.
type arg struct {
	kind argKind
	s    string
	i    int64
	t    time.Time
}

type argKind uint8

const (
	argString argKind = iota
	argInt
	argTime
	argNull // SQL NULL
)

func str(s string) arg   { return arg{kind: argString, s: s} }
func i64(i int64) arg    { return arg{kind: argInt, i: i} }
func tm(t time.Time) arg { return arg{kind: argTime, t: t} }
func (a arg) value() any {
	switch a.kind {
	case argNull:
		return nil
	case argInt:
		return a.i
	case argTime:
		return a.t
	}
	return a.s
}

// values returns the statement's arguments for pgx.
func (st *statement) values() []any {
	v := make([]any, st.n)
	for i := range v {
		v[i] = st.args[i].value()
	}
	return v
}

// txThread is a thread whose row this transaction has locked (or, when
// speculating, will lock with its check).
type txThread struct {
	created int64
	n       int64 // events in the log, this transaction's included
	state   *core.Thread
	// base is the cache entry state was taken from, nil when state was
	// built by this transaction. While base is set, state's header and
	// slices may be base's: they are copied before they change (cow).
	base *cacheEntry
	cow  cow
	// ownLease: this Store wrote the thread's lease for its holder (a
	// PutLease of this transaction, or of the entry it came from).
	ownLease bool
	dirty    bool       // version, taken or the log changed: the row needs its UPDATE
	last     core.Event // event n, as folded
}

// batch starts a round trip: BEGIN if the transaction has not begun, with
// the check of what it assumed, then the queued writes.
func (t *txn) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if !t.begun {
		if t.readOnly {
			b.Queue("begin isolation level repeatable read read only")
		} else {
			b.Queue("begin")
		}
		for _, a := range t.assumed {
			end := logEnd(a.n, a.last)
			b.Queue(t.s.q.unchanged, a.id, a.created, a.version, string(a.lease.Holder), a.lease.ExpiresAt,
				end[0].value(), end[1].value())
		}
	}
	var saves []statement // the dirty threads' rows, each with its lease's write folded in when there is one
	for id, th := range t.threads {
		if th.dirty {
			saves = append(saves, t.saveRow(string(id), th))
			th.dirty = false
		}
	}
	for _, st := range t.pending {
		if st.sql != "" {
			b.Queue(st.sql, st.values()...)
		}
	}
	t.pending = t.pending[:0]
	for _, st := range saves {
		b.Queue(st.sql, st.values()...)
	}
	return b
}

// saveRow returns the UPDATE of a written thread's row. When the
// transaction also wrote the thread's lease (a queued PutLease or
// DeleteLease), the lease is written by the same UPDATE, and the queued
// statement is dropped: one row version, not two.
func (t *txn) saveRow(id string, th *txThread) statement {
	st := statement{sql: t.s.q.saveThread, n: 7}
	st.args[0], st.args[1], st.args[2] = str(id), i64(int64(th.state.Version)), i64(int64(th.state.Taken))
	st.args[3], st.args[4] = i64(int64(th.state.Last())), i64(activeRuns(th.state))
	end := logEnd(th.n, th.last)
	st.args[5], st.args[6] = end[0], end[1]
	if lease, ok := t.foldLease(id); ok {
		st.sql, st.n = t.s.q.saveThreadLease, 9
		st.args[7], st.args[8] = lease[0], lease[1]
	}
	return st
}

// foldLease takes the last queued write of key's lease out of the queue,
// and returns its holder and expiry (NULL and NULL for a delete).
func (t *txn) foldLease(key string) (lease [2]arg, ok bool) {
	for i := range t.pending {
		st := &t.pending[i]
		switch {
		case st.sql == t.s.q.putLease && st.args[0].s == key:
			lease, ok = [2]arg{st.args[1], st.args[2]}, true
		case st.sql == t.s.q.deleteLease && st.args[0].s == key:
			lease, ok = [2]arg{{kind: argNull}, {kind: argNull}}, true
		default:
			continue
		}
		st.sql = "" // folded
	}
	return lease, ok
}

// activeRuns counts the thread's active runs.
func activeRuns(t *core.Thread) int64 {
	return int64(len(t.ActiveRuns()))
}

// hasWork reports whether the thread has work for a runner: a message not
// yet taken, or a run still active (pendingQuery's rule, on the row).
func hasWork(t *core.Thread) bool {
	return t.Unconsumed() || activeRuns(t) > 0
}

// send runs b. A failure loses the transaction: every later call returns it.
func (t *txn) send(ctx context.Context, b *pgx.Batch) error {
	if t.shot && !t.oneShot {
		// A write in one statement (PostMessage, ClaimLease) was the
		// whole transaction, and committed it: a later statement would
		// run in another.
		t.err = errors.New("postgres: a round trip after the transaction's one-statement write, which committed it")
		return t.err
	}
	if t.oneShot {
		if t.shot {
			// A second round trip in a read-only transaction already
			// committed: the reads would not share its snapshot.
			t.again = true
			t.err = errAgain
			return t.err
		}
		t.shot = true
		b.Queue("commit")
	}
	if err := t.need(ctx); err != nil {
		t.err = err
		return err
	}
	t.begun = true
	t.s.stats.roundTrips.Add(1)
	if err := t.conn.SendBatch(ctx, b).Close(); err != nil {
		t.noteConflict(err)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && holderReused(pgErr) != nil {
			t.err = holderReused(pgErr)
		} else {
			t.err = fmt.Errorf("postgres: %w", err)
		}
		return t.err
	}
	return nil
}

// noteConflict records that err is the check of a speculating
// transaction's assumptions failing: the check raising, or the write's
// event colliding with one the cache did not know of.
func (t *txn) noteConflict(err error) {
	if len(t.assumed) > 0 && checkFailed(err) {
		t.conflict = true
	}
}

// checkFailed reports whether err is a write's check failing: conflict()
// raising, or the write's event colliding with one it did not know of
// (its key taken).
func checkFailed(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == conflictCode || logBehind(err)
}

// logBehind reports whether err is a write's event colliding with one
// already in the log (the events' primary key): the writer took the log's
// end from a cache, or from a thread row whose end an older binary left
// behind (a one-statement post).
func logBehind(err error) bool {
	var pgErr *pgconn.PgError
	const uniqueViolation = "23505"
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation && pgErr.ConstraintName == "events_pkey"
}

// retry reports whether the attempt that ended with err must be run again
// without speculating: its check failed, or fn returned an error decided
// from the cache before anything was sent, or a one-shot read needed a
// second round trip.
func (t *txn) retry(err error) bool {
	return err != nil && (t.again || len(t.assumed) > 0 && (t.conflict || !t.begun))
}

// errAgain is what a one-shot read-only transaction's second round trip
// returns: fn is run again, in a transaction that stays open.
var errAgain = errors.New("postgres: a one-shot read needs a second round trip: run again")

func (t *txn) queue(sql string, args ...arg) {
	t.pending = append(t.pending, statement{sql: sql, n: len(args)})
	copy(t.pending[len(t.pending)-1].args[:], args)
}

func (t *txn) commit(ctx context.Context) error {
	if t.shot {
		if t.wrote() {
			return errors.New("postgres: a write in a read-only transaction")
		}
		return nil // the one round trip committed
	}
	if !t.begun && len(t.assumed) == 0 && len(t.pending) == 0 {
		return nil // fn read and wrote nothing
	}
	var err error
	tag := pgconn.NewCommandTag("COMMIT")
	switch {
	case t.speculate && !t.begun:
		err = t.commitOneTrip(ctx)
	case t.begun && !t.wrote():
		t.s.stats.roundTrips.Add(1)
		tag, err = t.bareCommit(ctx)
	default:
		b := t.batch()
		if err = t.need(ctx); err != nil {
			return err
		}
		t.begun = true
		t.s.stats.roundTrips.Add(1)
		b.Queue("commit").Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
		err = t.conn.SendBatch(ctx, b).Close()
	}
	if err != nil {
		t.noteConflict(err)
		err = commitError(err)
		if !errors.Is(err, core.ErrCommitUnknown) {
			t.rollback(ctx)
		}
		return err
	}
	if tag.String() != "COMMIT" {
		return fmt.Errorf("postgres: commit: the server answered %q: the transaction was rolled back", tag.String())
	}
	return nil
}

// bareCommit sends a COMMIT with nothing before it (a Claim's second
// trip) by the simple protocol: one message each way, not a batch's
// parse, bind, describe, execute and sync. Its reply lost, pgconn reports
// the connection closed, an error it deems safe to retry as if nothing
// had been sent; so once the connection was open when the COMMIT went
// out, any error but the server's own answer is an unknown outcome.
func (t *txn) bareCommit(ctx context.Context) (pgconn.CommandTag, error) {
	if err := t.need(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	pc := t.conn.PgConn()
	if pc.IsClosed() {
		_, err := pc.Exec(ctx, "commit").ReadAll() // refused before sending: safe to retry
		return pgconn.CommandTag{}, err
	}
	res, err := pc.Exec(ctx, "commit").ReadAll()
	var pgErr *pgconn.PgError
	switch {
	case err != nil && !errors.As(err, &pgErr):
		return pgconn.CommandTag{}, fmt.Errorf("the COMMIT was sent and its reply not read: %v", err)
	case err != nil:
		return pgconn.CommandTag{}, err
	case len(res) != 1:
		return pgconn.CommandTag{}, fmt.Errorf("postgres: commit: %d results", len(res))
	}
	return res[0].CommandTag, nil
}

// wrote reports whether the transaction has writes not yet sent.
func (t *txn) wrote() bool {
	for _, th := range t.threads {
		if th.dirty {
			return true
		}
	}
	return len(t.pending) > 0
}

// rollback ends a transaction that is still open. It is best effort: a
// connection it cannot roll back is destroyed when released, which ends
// the transaction on the server.
func (t *txn) rollback(ctx context.Context) {
	if t.conn == nil {
		return
	}
	pc := t.conn.PgConn()
	if !t.begun || pc.IsClosed() || pc.TxStatus() == 'I' {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	t.s.stats.roundTrips.Add(1)
	_, _ = t.conn.Exec(rctx, "rollback")
}

// load locks the thread's row and, in the same round trip, the lease row
// of the same key (a thread's lease is keyed by its id), and folds the
// events appended since the Store's cached state. It returns nil for a
// thread that does not exist.
func (t *txn) load(ctx context.Context, id core.ThreadID) (*txThread, error) {
	if th, ok := t.threads[id]; ok {
		return th, nil
	}
	if t.err != nil {
		return nil, t.err
	}
	c := t.s.cached(id)
	if c != nil && t.speculate && !t.begun && c.ownLease && !c.distrusted {
		if _, seen := t.leases[id]; !seen {
			th := t.newThread()
			*th = txThread{created: c.created, n: c.n, last: c.last, state: c.state, base: c, cow: c.cow, ownLease: true}
			t.threads[id] = th
			t.leases[id] = c.lease
			t.assumed = append(t.assumed, assumption{id: string(id), created: c.created, version: int64(c.state.Version), lease: c.lease,
				n: c.n, last: c.last})
			return th, nil
		}
	}
	after, from := logFrom(c)
	b := t.batch()
	var row threadRow
	q := t.s.q.lockThread
	if t.readOnly {
		q = t.s.q.readThread
	}
	b.Queue(q, string(id)).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&row.created, &row.version, &row.taken)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		row.found = err == nil
		return err
	})
	if _, ok := t.leases[id]; !ok {
		t.queueLockLease(b, id)
	}
	var evs []eventRow
	t.queueEvents(b, t.s.q.eventsAfter, id, from, &evs)
	if err := t.send(ctx, b); err != nil {
		return nil, err
	}
	if !row.found {
		return nil, nil
	}
	return t.fold(ctx, id, c, after, row, evs)
}

// queueEvents queues the read of the thread's events after seq from,
// which fills *evs when b is sent: eventsAfter, its SQL or the name it
// is prepared under.
func (t *txn) queueEvents(b *pgx.Batch, eventsAfter string, id core.ThreadID, from int64, evs *[]eventRow) {
	b.Queue(eventsAfter, string(id), from).Query(func(rows pgx.Rows) error {
		var err error
		*evs, err = scanEvents(rows)
		return err
	})
}

// threadRow is what a transaction reads of a thread's row.
type threadRow struct {
	found                   bool
	created, version, taken int64
}

// logFrom is where a transaction reads a thread's log from, given the
// Store's cache entry c (nil: none): after, the events c folded, and
// from, the seq the read starts after (event after too, to check that
// storage still has it: behind).
func logFrom(c *cacheEntry) (after, from int64) {
	if c != nil {
		after = c.n
		from = max(after-1, 0)
	}
	return after, from
}

// fold makes the thread's state in t from its row and the events read
// after logFrom's from, starting from the cache entry c when it is still
// storage's, and checks that the log applies and that the row is not
// behind it.
func (t *txn) fold(ctx context.Context, id core.ThreadID, c *cacheEntry, after int64, row threadRow, evs []eventRow) (*txThread, error) {
	th := t.newThread()
	th.created = row.created
	if c != nil && c.created == row.created && behind(c, evs) {
		// Storage lost commits this Store saw: fold what it has.
		t.s.forget(id, c)
		c = nil
	}
	if c != nil && c.created == row.created {
		if c.n > 0 {
			evs = evs[1:] // event n, which the entry folded
		}
		th.state, th.n, th.last, th.base, th.cow = c.state, c.n, c.last, c, c.cow
		th.ownLease = c.ownLease && t.leases[id].Holder == c.lease.Holder && c.lease.Holder != ""
	} else {
		th.state = core.NewThread(id)
		if after > 0 { // the cache knew another thread of that id: read its whole log
			var err error
			if evs, err = t.events(ctx, id); err != nil {
				return nil, err
			}
		}
	}
	for _, e := range evs {
		if e.seq != th.n+1 {
			return nil, t.corrupt(fmt.Errorf("thread %q: event %d follows event %d", id, e.seq, th.n))
		}
		ev := e.event()
		if err := th.state.Check(ev); err != nil {
			return nil, t.corrupt(fmt.Errorf("thread %q: event %d does not apply: %w", id, e.seq, err))
		}
		th.apply(ev)
		th.n++
	}
	if th.n > 0 && th.last.Version > uint64(row.version) {
		// Every write moves the row to its event's version or past it (a
		// Claim moves it with no event) in the event's own transaction:
		// a row behind its log is no state storage can reach by writes,
		// or by losing the newest of them. Writing on it would append an
		// event no fold accepts (a refusal below its thread's version).
		return nil, t.corrupt(fmt.Errorf("thread %q: the row is at version %d, its event %d at %d", id, row.version, th.n, th.last.Version))
	}
	if th.state.Version != uint64(row.version) || th.state.Taken != core.Seq(row.taken) {
		th.header()
		th.state.Version, th.state.Taken = uint64(row.version), core.Seq(row.taken)
	}
	t.threads[id] = th
	return th, nil
}

func (t *txn) corrupt(err error) error {
	t.err = fmt.Errorf("postgres: %w: %w", core.ErrInconsistentLog, err)
	return t.err
}

func (t *txn) queueLockLease(b *pgx.Batch, id core.ThreadID) {
	q := t.s.q.lockLease
	if t.readOnly {
		q = t.s.q.readLease
	}
	b.Queue(q, string(id)).QueryRow(func(r pgx.Row) error {
		var l core.Lease
		var holder string
		err := r.Scan(&holder, &l.ExpiresAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			t.leases[id] = core.Lease{}
			return nil
		case err != nil:
			return err
		}
		l.Thread, l.Holder, l.ExpiresAt = id, core.Holder(holder), l.ExpiresAt.UTC()
		t.leases[id] = l
		return nil
	})
}

func (t *txn) thread(ctx context.Context, id core.ThreadID) (*txThread, error) {
	th, err := t.load(ctx, id)
	if err == nil && th == nil {
		err = fmt.Errorf("thread %q: %w", id, core.ErrUnknownThread)
	}
	return th, err
}

// lease locks the thread's lease (its row in the leases view). Lock
// order: the thread's row first (when the thread exists), then the lease
// row; so a lease's writers serialise on the thread row even while the
// lease row does not exist.
func (t *txn) lease(ctx context.Context, id core.ThreadID) (core.Lease, error) {
	if l, ok := t.leases[id]; ok {
		return l, nil
	}
	if t.err != nil {
		return core.Lease{}, t.err
	}
	if _, ok := t.threads[id]; !ok {
		if _, err := t.load(ctx, id); err != nil {
			return core.Lease{}, err
		}
	} else {
		b := t.batch()
		t.queueLockLease(b, id)
		if err := t.send(ctx, b); err != nil {
			return core.Lease{}, err
		}
	}
	return t.leases[id], nil
}

func (t *txn) CreateThread(ctx context.Context, id core.ThreadID) error {
	if t.err != nil {
		return t.err
	}
	if err := core.CheckText("thread id", string(id)); err != nil {
		return err // before the server refuses it, with the in-memory storage's error
	}
	if _, ok := t.threads[id]; ok {
		return fmt.Errorf("thread %q: %w", id, core.ErrThreadExists)
	}
	b := t.batch()
	var created int64
	found := false
	b.Queue(t.s.q.createThread, string(id)).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&created)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if err := t.send(ctx, b); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("thread %q: %w", id, core.ErrThreadExists)
	}
	th := t.newThread()
	th.created, th.state = created, core.NewThread(id)
	t.threads[id] = th
	return nil
}

func (t *txn) ThreadIDs(ctx context.Context) ([]core.ThreadID, error) {
	if t.err != nil {
		return nil, t.err
	}
	b := t.batch()
	var ids []core.ThreadID
	b.Queue(t.s.q.threadIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, core.ThreadID(id))
		}
		return rows.Err()
	})
	if err := t.send(ctx, b); err != nil {
		return nil, err
	}
	return ids, nil
}

func (t *txn) Thread(ctx context.Context, id core.ThreadID) (*core.Thread, error) {
	th, err := t.thread(ctx, id)
	if err != nil {
		return nil, err
	}
	return th.state, nil
}

func (t *txn) Events(ctx context.Context, id core.ThreadID) ([]core.Event, error) {
	if _, err := t.thread(ctx, id); err != nil {
		return nil, err
	}
	rows, err := t.events(ctx, id)
	if err != nil {
		return nil, err
	}
	evs := make([]core.Event, len(rows))
	for i, r := range rows {
		evs[i] = r.event()
	}
	return evs, nil
}

// EventsAfter returns the thread's log after position after, in one round
// trip in a read-only transaction (a View, which is how Follow reads): the
// thread's row, to tell an unknown thread, and the events after the
// position, with no fold of the thread's state. In a transaction that
// writes, it reads the thread as Events does.
func (t *txn) EventsAfter(ctx context.Context, id core.ThreadID, after core.Position) ([]core.Event, error) {
	if !t.readOnly {
		evs, err := t.Events(ctx, id)
		if err != nil {
			return nil, err
		}
		if int(after) > len(evs) {
			return nil, fmt.Errorf("%w: thread %q: position %d is past the log's end (%d events)", core.ErrInvalidArgument, id, after, len(evs))
		}
		return evs[after:], nil
	}
	if t.err != nil {
		return nil, t.err
	}
	b := t.batch()
	found, n := false, int64(0)
	b.Queue(t.s.q.logLength, string(id)).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&n)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	var rows []eventRow
	b.Queue(t.s.q.eventsAfter, string(id), int64(max(after, 0))).Query(func(r pgx.Rows) error {
		var err error
		rows, err = scanEvents(r)
		return err
	})
	if err := t.send(ctx, b); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("thread %q: %w", id, core.ErrUnknownThread)
	}
	if int64(after) > n {
		return nil, fmt.Errorf("%w: thread %q: position %d is past the log's end (%d events)", core.ErrInvalidArgument, id, after, n)
	}
	evs := make([]core.Event, len(rows))
	for i, r := range rows {
		if r.seq != int64(after)+int64(i)+1 {
			return nil, t.corrupt(fmt.Errorf("thread %q: event %d follows event %d", id, r.seq, int64(after)+int64(i)))
		}
		evs[i] = r.event()
	}
	return evs, nil
}

// events reads the thread's whole log, this transaction's writes included.
func (t *txn) events(ctx context.Context, id core.ThreadID) ([]eventRow, error) {
	b := t.batch()
	var evs []eventRow
	b.Queue(t.s.q.allEvents, string(id)).Query(func(rows pgx.Rows) error {
		var err error
		evs, err = scanEvents(rows)
		return err
	})
	if err := t.send(ctx, b); err != nil {
		return nil, err
	}
	return evs, nil
}

func (t *txn) Bump(ctx context.Context, id core.ThreadID) (uint64, error) {
	th, err := t.thread(ctx, id)
	if err != nil {
		return 0, err
	}
	th.header()
	th.state.Version++
	th.dirty = true
	return th.state.Version, nil
}

// maxPayload is below PostgreSQL's limit on a NOTIFY payload (8000 bytes).
const maxPayload = 7999

// wakePayload is the wake-up's payload for the thread: its id, or, too
// long to name, the empty one (a wake-up for any thread).
func wakePayload(id string) string {
	if len(id) > maxPayload {
		return ""
	}
	return id
}

func (t *txn) Append(ctx context.Context, id core.ThreadID, ev core.Event) error {
	if err := core.CheckText("event text", ev.Text); err != nil {
		return err
	}
	if err := core.CheckText("event holder", string(ev.Holder)); err != nil {
		return err
	}
	th, err := t.thread(ctx, id)
	if err != nil {
		return err
	}
	ev.At = eventTime(ev.At)
	if err := th.state.Check(ev); err != nil {
		return err
	}
	seq := th.n + 1
	t.queue(t.s.q.insertEvent, str(string(id)), i64(seq), i64(int64(ev.Version)), str(string(ev.Kind)), tm(ev.At),
		i64(int64(ev.Message)), str(ev.Text), i64(int64(ev.Run)), i64(int64(ev.Request)), str(string(ev.Holder)))
	if ev.Kind == core.MessagePosted && !hasWork(th.state) {
		// The post gives the thread work, where it had none: postSQL's rule.
		t.queueWakeIfFree(string(id))
	}
	th.apply(ev)
	th.n = seq
	th.dirty = true
	return nil
}

func (t *txn) SaveTaken(ctx context.Context, id core.ThreadID, taken core.Seq) error {
	th, err := t.thread(ctx, id)
	if err != nil {
		return err
	}
	th.header()
	th.state.Taken = taken
	th.dirty = true
	return nil
}

func (t *txn) Lease(ctx context.Context, id core.ThreadID) (core.Lease, error) {
	return t.lease(ctx, id)
}

func (t *txn) HoldsLease(ctx context.Context, id core.ThreadID, holder core.Holder) (bool, core.Lease, error) {
	l, err := t.lease(ctx, id)
	if err != nil {
		return false, core.Lease{}, err
	}
	return holder != "" && l.Holder == holder, l, nil
}

func (t *txn) PutLease(ctx context.Context, l core.Lease) error {
	if l.Thread == "" || l.Holder == "" {
		return fmt.Errorf("%w: lease with empty thread or holder", core.ErrInvalidArgument)
	}
	if err := core.CheckText("holder", string(l.Holder)); err != nil {
		return err
	}
	th, err := t.thread(ctx, l.Thread) // a lease lives on its thread's row
	if err != nil {
		return err
	}
	if _, err := t.lease(ctx, l.Thread); err != nil {
		return err
	}
	l.ExpiresAt = leaseExpiry(l.ExpiresAt)
	if t.leases[l.Thread].Holder != l.Holder {
		// An acquire: the holders table refuses a holder's second one.
		t.queue(t.s.q.acquired, str(string(l.Thread)), str(string(l.Holder)))
	}
	t.queue(t.s.q.putLease, str(string(l.Thread)), str(string(l.Holder)), tm(l.ExpiresAt))
	t.leases[l.Thread] = l
	th.ownLease = true
	return nil
}

func (t *txn) DeleteLease(ctx context.Context, id core.ThreadID) error {
	th, err := t.thread(ctx, id)
	if err != nil {
		return err
	}
	if _, err := t.lease(ctx, id); err != nil {
		return err
	}
	t.queue(t.s.q.deleteLease, str(string(id)))
	t.releases = true
	t.leases[id] = core.Lease{}
	th.ownLease = false
	if hasWork(th.state) {
		// Released with work left (a message posted after the holder's
		// last plan, a turn that yielded): wake the runners, which may
		// have left the thread alone while it was claimed.
		t.queueWake(string(id))
	}
	return nil
}

// queueWake queues the NOTIFY that wakes the listeners (Listen) for the
// thread, sent only if the transaction commits.
func (t *txn) queueWake(id string) {
	t.queue(t.s.q.notify, str(t.s.wakeChannel(id)), str(wakePayload(id)))
}

// queueWakeIfFree queues a NOTIFY like queueWake's, sent only if the
// thread has no live lease (none, or one expired by the server's clock)
// as the statement finds its row, which the transaction has locked: the
// post's rule (postSQL), for a post to a thread that had no work.
func (t *txn) queueWakeIfFree(id string) {
	t.queue(t.s.q.notifyFree, str(t.s.wakeChannel(id)), str(wakePayload(id)), str(id))
}

// eventRow is one row of the events table.
type eventRow struct {
	seq                            int64
	version, message, run, request int64
	kind, text, holder             string
	at                             time.Time
}

// scanEvents reads the rows of an event query. Each row is scanned in
// place, into the slice, through one set of destinations: a row scanned
// into a variable of its own, and appended, cost that variable's
// allocation and Scan's arguments' at every row.
func scanEvents(rows pgx.Rows) ([]eventRow, error) {
	var (
		evs  []eventRow
		dest [9]any
	)
	for rows.Next() {
		evs = append(evs, eventRow{})
		e := &evs[len(evs)-1]
		dest = [9]any{&e.seq, &e.version, &e.kind, &e.at, &e.message, &e.text, &e.run, &e.request, &e.holder}
		if err := rows.Scan(dest[:]...); err != nil {
			return nil, err
		}
	}
	return evs, rows.Err()
}

func (e eventRow) event() core.Event {
	return core.Event{
		Version: uint64(e.version),
		Kind:    core.EventKind(e.kind),
		At:      e.at.UTC(),
		Message: core.Seq(e.message),
		Text:    e.text,
		Run:     core.RunID(e.run),
		Request: core.RequestID(e.request),
		Holder:  core.Holder(e.holder),
	}
}

// need takes t's connection from the pool, when it has none yet: a
// transaction takes one when it first reads, sends or prepares, not
// before (Store.run), and a one-trip write gives its back while it waits
// for a shared round trip (trips.send). A failure to take one is a
// failure before anything was sent.
func (t *txn) need(ctx context.Context) error {
	if t.conn != nil {
		return nil
	}
	c, err := t.s.pool.Acquire(ctx)
	if err != nil {
		return &unsentError{fmt.Errorf("acquire connection: %w", err)}
	}
	t.held, t.conn = c, c.Conn()
	return nil
}

// ready is need, with t's one-trip statements prepared on the connection
// (exec prepared them on whichever connection it had; pgx's Prepare of a
// statement the connection has is no round trip).
func (t *txn) ready(ctx context.Context) error {
	if err := t.need(ctx); err != nil {
		return err
	}
	for i := range t.trip.stmts {
		st := &t.trip.stmts[i]
		if _, err := t.conn.Prepare(ctx, st.sd.Name, st.sd.SQL); err != nil {
			return &unsentError{fmt.Errorf("prepare: %w", err)}
		}
	}
	return nil
}
