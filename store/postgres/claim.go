package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/threadclaim/threadclaim/core"
)

// claimSQL is a Claim decided in the server (%[1]s is the schema). It
// locks the thread's row (old); when the row's lease is free, or expired
// at $4 (the claimant's clock: Lease.Expired's rule, an expiry at or
// before it), and not holder $2's, it bumps the row's version and writes
// the lease on it, $2 until $3 (w), and inserts the holder into holders
// (h), whose key refuses a holder's second acquire. It writes only on a
// sound row (ok): one not behind its own log (its last event at a
// version above the row's; fold refuses such a row), and, when the
// claimant's cache folded the thread ($5, its row's created, not 0), the
// same thread, whose log still holds the event the cache ended on ($6,
// its seq, not 0; $7 its version; $8 its time): so that the events read
// with the claim fold onto the cache, with no second round trip (behind).
//
// With the claim it starts a run (ok.start, s) when $9 is the row's
// created (not 0: ClaimLeaseThenStart, whose cache folded the thread
// with no active run and no open request, $10 events, the last at
// version $11 and time $12, and $15 messages) and the thread is still
// that one with those events, every event after them a post, no run
// active and a message not taken: then the claim's plan is a run for
// message taken + 1, whatever the posts' texts, and the row moves one
// version more, to the start's (w), which takes that message, as run
// $14, at $13 (s). The row is written once, by w, as every write of this
// Store writes it.
//
// "Every event after them a post" is read from the locked row, not from
// the events: the row's log_n less $10 (the events since the cache's)
// equals its last_message less $15 (the posts since), since a post moves
// both by one and every other event log_n alone. Under READ COMMITTED
// the events subqueries read the statement's snapshot, taken before it
// waited for the row's lock, while old is the row as its last writer
// left it: a claim that waited behind other writers (a claim with its
// start, an end, a release) saw none of their events, and started run
// $14 on a thread that had run it already (TestClaimStartAfterWaitingForTheRow,
// TestClaimStartsFromStaleCaches).
// The events subqueries left are safe with that snapshot: the cache's
// last event was committed before the cache was made, so the snapshot
// has it, and a row behind its log is found again by the fold of the
// events read after the claim.
//
// A claimant with no cache of the thread ($16 not 0: ClaimLeaseThenStart
// on a thread this Store has not folded, or whose cache entry it let go,
// whose events it reads whole with the claim) has the start decided from
// the log itself: no run active and a message not taken (the row), no
// request open (every asked event answered), and the run the next after
// the log's starts. The log is read in the statement's snapshot, so it
// is trusted only when it has log_n events and that snapshot's row is
// the locked row: the same version, which every write of the thread
// moves (a binary before migration 0008 leaves log_n as it was), so no
// writer came between the snapshot and the lock
// (TestClaimStartAfterWaitingForTheRow, cold).
//
// It returns the row as it found it, the claim's version (NULL: nothing
// written), whether the row was sound, and whether the run started. No
// row: the thread does not exist.
const claimSQL = `WITH old AS (
	SELECT id, created, version, taken, lease_holder, lease_expires, last_message, active_runs, log_n, log_at
	  FROM %[1]s.threads WHERE id = $1 FOR UPDATE
), cold AS (
	SELECT count(*) AS n, count(*) FILTER (WHERE e.kind = 'run_started') AS runs,
	       count(*) FILTER (WHERE e.kind = 'asked') AS asked, count(*) FILTER (WHERE e.kind = 'answered') AS answered
	  FROM %[1]s.events e WHERE $16::bigint <> 0 AND e.thread_id = $1
), ok AS (
	SELECT coalesce((SELECT e.version FROM %[1]s.events e WHERE e.thread_id = old.id ORDER BY e.seq DESC LIMIT 1), 0) <= old.version
	   AND ($5::bigint = 0 OR old.created = $5 AND ($6::bigint = 0 OR EXISTS (
	        SELECT FROM %[1]s.events e WHERE e.thread_id = old.id AND e.seq = $6 AND e.version = $7::bigint AND e.at = $8::timestamptz))) AS sound,
	       ($9::bigint <> 0 AND old.created = $9 AND old.active_runs = 0 AND old.last_message > old.taken AND old.log_n >= $10::bigint
	   AND ($10::bigint = 0 OR EXISTS (
	        SELECT FROM %[1]s.events e WHERE e.thread_id = old.id AND e.seq = $10 AND e.version = $11::bigint AND e.at = $12::timestamptz))
	   AND old.log_n - $10::bigint = old.last_message - $15::bigint
	    OR $16::bigint <> 0 AND old.active_runs = 0 AND old.last_message > old.taken
	   AND (SELECT t.version FROM %[1]s.threads t WHERE t.id = old.id) = old.version
	   AND cold.n = old.log_n AND cold.asked = cold.answered) AS start,
	       CASE WHEN $16::bigint <> 0 THEN cold.runs + 1 ELSE $14::bigint END AS run
	  FROM old, cold
), w AS (
	UPDATE %[1]s.threads t SET version = old.version + 1 + ok.start::int, lease_holder = $2, lease_expires = $3,
	       taken = old.taken + ok.start::int, active_runs = old.active_runs + ok.start::int,
	       log_n = old.log_n + ok.start::int, log_at = CASE WHEN ok.start THEN $13::timestamptz ELSE old.log_at END
	  FROM old, ok
	 WHERE t.id = old.id AND ok.sound AND (old.lease_holder IS NULL OR old.lease_expires IS NULL OR old.lease_expires <= $4)
	   AND old.lease_holder IS DISTINCT FROM $2
	RETURNING old.version + 1 AS claimed, ok.start
), h AS (
	INSERT INTO %[1]s.holders (key, holder) SELECT $1, $2 FROM w
), s AS (
	INSERT INTO %[1]s.events (thread_id, seq, version, kind, at, message, text, run, request, holder)
	SELECT old.id, old.log_n + 1, w.claimed + 1, 'run_started', $13::timestamptz, old.taken + 1, '', ok.run, 0, $2
	  FROM old, ok, w WHERE w.start
)
SELECT old.created, old.version, old.taken, coalesce(old.lease_holder, ''), old.lease_expires,
       (SELECT claimed FROM w), ok.sound, coalesce((SELECT start FROM w), false) FROM old, ok`

// ClaimLease is what core.Workspace's Claim calls, when a transaction has
// it, in place of reading the thread and then writing (core's unexported
// leaseClaimer; TestClaimInOneStatement fails if the two ever part): the
// claim decided in the server, claimSQL, sent with the read of the
// thread's new events. The row, locked, the lease and the log are read,
// and the claim written, by that round trip.
//
// Without KeepTrace the round trip is the whole transaction: the two
// statements go with no BEGIN, so they run as one implicit transaction
// that commits at their Sync, and the row's lock is held for the
// statements alone. claimSQL then writes only on a row whose events fold
// onto the Store's cache with no other read; on any other, it writes
// nothing, and the claim is made again as below. The Workspace's Claim
// writes nothing after it (a plan in the same transaction reads the
// state the claim left, which the transaction holds). Once the round
// trip was sent on an open connection, a failure that is not the
// server's own ERROR leaves the claim's outcome unknown
// (core.ErrCommitUnknown); so does a log that, read back, does not fold
// (a corrupt event: core.ErrInconsistentLog too), since the claim has
// committed.
//
// With KeepTrace the transaction begins with the claim and stays open
// for the Claim's trace line, sent with COMMIT in a second round trip.
// The reading path took two round trips with three statements more (the
// lease's read, the holder's insert and the row's UPDATE), deciding in
// the client between them, and held the row's lock across both.
//
// A transaction that has read or written already takes the reading path.
func (t *txn) ClaimLease(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires time.Time) (*core.Thread, core.Lease, uint64, error) {
	th, was, v, _, err := t.claimLease(ctx, id, holder, now, expires, nil)
	return th, was, v, err
}

// ClaimLeaseThenStart is ClaimLease, and, with the claim, the run its
// plan will make (core's leaseStartClaimer; ClaimThenStart): claimSQL
// starts it when the Store's cache folded the thread with no run active
// and no request open, and the thread's log holds nothing after the
// cache's events but posts: the plan is then a run for the first message
// not taken, as plan says. With no cache of the thread, it starts the run
// when the log, read whole with the claim, has no run active and no
// request open, and a message not taken. With a cache that has a run
// active or a request open, or on the reading path, it starts nothing
// (and does not call plan). The start's event is read
// back with the claim's events, and plan, given the thread as the claim
// left it, must return that event: otherwise the Store and core disagree
// on the plan, and the transaction is lost (core.ErrInconsistentLog;
// core.ErrCommitUnknown too once the one round trip committed it).
func (t *txn) ClaimLeaseThenStart(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires, at time.Time, plan func(*core.Thread) (core.Event, bool)) (*core.Thread, core.Lease, uint64, core.Event, error) {
	return t.claimLease(ctx, id, holder, now, expires, &claimStart{at: eventTime(at), plan: plan})
}

// claimStart is what ClaimLeaseThenStart starts a run with: its time and
// core's plan.
type claimStart struct {
	at   time.Time
	plan func(*core.Thread) (core.Event, bool)
}

// claimLease is ClaimLease, starting a run as ClaimLeaseThenStart does
// when st is not nil.
func (t *txn) claimLease(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires time.Time, st *claimStart) (*core.Thread, core.Lease, uint64, core.Event, error) {
	if holder == "" {
		return nil, core.Lease{}, 0, core.Event{}, fmt.Errorf("%w: lease with empty thread or holder", core.ErrInvalidArgument)
	}
	if err := core.CheckText("holder", string(holder)); err != nil {
		return nil, core.Lease{}, 0, core.Event{}, err
	}
	if t.err != nil {
		return nil, core.Lease{}, 0, core.Event{}, t.err
	}
	fresh := !t.begun && !t.shot && len(t.pending) == 0 && len(t.assumed) == 0 && len(t.threads) == 0 && len(t.leases) == 0
	if !fresh || t.readOnly || t.s.readClaim {
		th, was, v, err := t.claimRead(ctx, id, holder, now, expires)
		return th, was, v, core.Event{}, err
	}
	if t.s.noClaimStart {
		st = nil
	}
	oneTrip := !t.s.keepTrace && !t.s.claimBegins
	if oneTrip {
		th, was, v, ev, sound, err := t.serverClaim(ctx, id, holder, now, expires, true, st)
		if err != nil || sound {
			return th, was, v, ev, err
		}
		// Nothing written: the row's events do not fold onto the
		// cache alone. A transaction that stays open reads what fold
		// needs.
		t.reset(t.s, t.conn, false, t.speculate)
	}
	th, was, v, ev, _, err := t.serverClaim(ctx, id, holder, now, expires, false, st)
	return th, was, v, ev, err
}

// serverClaim sends claimSQL with the read of the thread's new events:
// as the transaction's one round trip (oneTrip, which commits it), or
// after BEGIN. It returns what ClaimLease does, the run's start when st
// asked for one and claimSQL wrote it, and whether claimSQL found the
// row sound (oneTrip: nothing was written on a row that was not, and
// nothing of it is returned).
func (t *txn) serverClaim(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires time.Time, oneTrip bool, st *claimStart) (*core.Thread, core.Lease, uint64, core.Event, bool, error) {
	fail := func(err error) (*core.Thread, core.Lease, uint64, core.Event, bool, error) {
		return nil, core.Lease{}, 0, core.Event{}, false, err
	}
	t.s.stats.serverClaims.Add(1)
	expires = leaseExpiry(expires)
	c := t.s.cached(id)
	after, from := logFrom(c)
	// The cache claimSQL checks the row against (oneTrip): the thread's
	// created, and its event after, when it folded one.
	var created, n, lastVersion int64
	var lastAt time.Time
	if oneTrip && c != nil {
		created, n, lastVersion, lastAt = c.created, c.n, int64(c.last.Version), c.last.At
	}
	// The cache the start is decided on (claimSQL's $9 to $12 and $15; $9
	// 0: none), or, with no cache, the log ($16 1), and the start's time
	// and run ($13, $14).
	var sCreated, sN, sVersion, sRun, sMessages, sCold int64
	sLast, sAt := now, now
	switch {
	case st == nil:
	case c == nil:
		sCold, sAt = 1, st.at
	case startable(c.state):
		sCreated, sN, sVersion, sRun, sAt = c.created, c.n, int64(c.last.Version), int64(c.state.LastRun())+1, st.at
		sMessages = int64(c.state.Last())
		if c.n > 0 {
			sLast = c.last.At
		}
	}
	args := [...]arg{str(string(id)), str(string(holder)), tm(expires), tm(now), i64(created), i64(n), i64(lastVersion), tm(lastAt),
		i64(sCreated), i64(sN), i64(sVersion), tm(sLast), tm(sAt), i64(sRun), i64(sMessages), i64(sCold)}
	var cr claimRow
	var evs []eventRow
	if oneTrip {
		if err := t.sendClaim(ctx, id, from, args[:], &cr, &evs); err != nil {
			return fail(err)
		}
	} else {
		b := t.batch() // BEGIN
		var values [len(args)]any
		for i, a := range args {
			values[i] = a.value()
		}
		b.Queue(t.s.q.claim, values[:]...).QueryRow(cr.scan)
		t.queueEvents(b, t.s.q.eventsAfter, id, from, &evs)
		if err := t.send(ctx, b); err != nil {
			return fail(err)
		}
	}
	row, sound, started := cr.row, cr.sound, cr.started
	var was core.Lease
	if cr.holder != "" {
		was = core.Lease{Thread: id, Holder: core.Holder(cr.holder), ExpiresAt: cr.expires}
	}
	if !row.found {
		return nil, core.Lease{}, 0, core.Event{}, true, fmt.Errorf("thread %q: %w", id, core.ErrUnknownThread)
	}
	if oneTrip && !sound {
		return fail(nil)
	}
	// committed makes err the transaction's loss: unknown whether it
	// committed, once the one round trip that commits it was answered.
	committed := func(err error) error {
		if oneTrip && cr.claimed {
			t.err = fmt.Errorf("postgres: %w: the claim committed, and its thread's log then did not fold: %w", core.ErrCommitUnknown, err)
			return t.err
		}
		return err
	}
	var start eventRow
	if started {
		// The start is the last event read: the claim is folded
		// without it, and core's plan must name it.
		if !cr.claimed || len(evs) == 0 {
			return fail(committed(t.corrupt(fmt.Errorf("thread %q: the claim started a run that it did not read back", id))))
		}
		start, evs = evs[len(evs)-1], evs[:len(evs)-1]
	}
	t.leases[id] = was
	th, err := t.fold(ctx, id, c, after, row, evs)
	if err != nil {
		return nil, core.Lease{}, 0, core.Event{}, sound, committed(err)
	}
	if !cr.claimed {
		return th.state, was, 0, core.Event{}, sound, nil // refused: nothing written
	}
	// The row as claimSQL left it; written already, so not dirty.
	th.header()
	th.state.Version = uint64(cr.version)
	t.leases[id] = core.Lease{Thread: id, Holder: holder, ExpiresAt: expires}
	th.ownLease = true
	if !started {
		return th.state, was, uint64(cr.version), core.Event{}, sound, nil
	}
	ev, err := t.foldStart(id, th, st, start)
	if err != nil {
		return fail(committed(err))
	}
	return th.state, was, uint64(cr.version), ev, sound, nil
}

// foldStart folds into th, the thread as its claim left it, the run's
// start that claimSQL wrote with the claim (start, read back), once
// st's plan names that very start.
func (t *txn) foldStart(id core.ThreadID, th *txThread, st *claimStart, start eventRow) (core.Event, error) {
	ev := start.event()
	want, ok := st.plan(th.state)
	if !ok || want.Kind != ev.Kind || want.Message != ev.Message || want.Run != ev.Run || want.Holder != ev.Holder ||
		!eventTime(want.At).Equal(ev.At) || ev.Version != th.state.Version+1 || start.seq != th.n+1 {
		return core.Event{}, t.corrupt(fmt.Errorf("thread %q: the claim started run %d on message %d (event %d, version %d), which its plan (%v: %+v) does not",
			id, ev.Run, ev.Message, start.seq, ev.Version, ok, want))
	}
	if err := th.state.Check(ev); err != nil {
		return core.Event{}, t.corrupt(fmt.Errorf("thread %q: the claim's start does not apply: %w", id, err))
	}
	th.apply(ev) // the version too
	th.n = start.seq
	th.state.Taken = ev.Message
	return ev, nil
}

// startable reports whether a cached thread's plan, once posts alone
// follow it and a claim is taken, is a run for the first message not
// taken: no run active, no request open (claimSQL checks the rest).
func startable(t *core.Thread) bool {
	if activeRuns(t) > 0 {
		return false
	}
	for _, r := range t.Requests {
		if r.State == core.RequestOpen {
			return false
		}
	}
	return true
}

// claimRow is claimSQL's row: the thread's row as the claim found it
// (row.found false: no row, no such thread), its lease then (holder ""
// for none), the claim's version when it wrote one (claimed), and
// whether the row was sound and the run started.
type claimRow struct {
	row            threadRow
	holder         string
	expires        time.Time
	version        int64
	claimed        bool
	sound, started bool
}

// scan reads the row through pgx (the claim after BEGIN).
func (c *claimRow) scan(r pgx.Row) error {
	var expires *time.Time
	var version *int64
	err := r.Scan(&c.row.created, &c.row.version, &c.row.taken, &c.holder, &expires, &version, &c.sound, &c.started)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	c.row.found = err == nil
	if expires != nil {
		c.expires = expires.UTC()
	}
	if version != nil {
		c.version, c.claimed = *version, true
	}
	return err
}

// read reads the row in binary form (the one-trip claim).
func (c *claimRow) read(r *pgconn.ResultReader) error {
	b := binRow{fds: r.FieldDescriptions()}
	if !r.NextRow() {
		return nil
	}
	b.vals = r.Values()
	c.row = threadRow{found: true, created: b.mustInt8(0), version: b.mustInt8(1), taken: b.mustInt8(2)}
	c.holder = b.text(3)
	c.expires, _ = b.timestamptz(4)
	var null bool
	c.version, null = b.int8(5)
	c.claimed = !null
	c.sound, c.started = b.boolean(6), b.boolean(7)
	if b.err == nil && r.NextRow() {
		b.err = errors.New("postgres: the claim returned a second row")
	}
	return b.err
}

// sendClaim sends claimSQL, with args, and the read of thread id's
// events after seq from, with no BEGIN, as the transaction's one round
// trip, which commits it (t.shot), and reads their rows into cr and evs.
// The statements go as t's one-trip statements do (exec: prepared, their
// arguments encoded into t's buffer) in a pipeline of pgconn's, and the
// rows come back in binary form, decoded by hand (binRow): pgx's batch,
// its rows, scans and context watch were most of a claim's garbage
// (store/postgres/BENCH.md). A failure to prepare sent nothing, and
// neither did a connection closed before the round trip; once it was
// sent, its failure is a COMMIT's (commitError), anything but the
// server's own answer taken as sent (sentError, tripResult): a reply lost
// after the server committed reads as a closed connection, which pgconn
// deems safe to retry (TestClaimUnknownWhenReplyLost). So is a row that
// does not decode: the claim may have committed.
func (t *txn) sendClaim(ctx context.Context, id core.ThreadID, from int64, args []arg, cr *claimRow, evs *[]eventRow) error {
	if err := ctx.Err(); err != nil {
		t.err = err
		return err
	}
	if err := t.exec(ctx, t.s.q.claim, args...); err != nil {
		t.err = err
		return err
	}
	if err := t.exec(ctx, t.s.q.eventsAfter, str(string(id)), i64(from)); err != nil {
		t.err = err
		return err
	}
	if err := t.ready(ctx); err != nil {
		t.err = err
		return err
	}
	pc := t.conn.PgConn()
	if pc.IsClosed() {
		t.err = errors.New("postgres: the connection is closed: the claim was not sent")
		return t.err
	}
	t.shot, t.begun = true, true
	t.s.stats.roundTrips.Add(1)
	t.s.stats.oneTripClaims.Add(1)
	p := pc.StartPipeline(ctx)
	for i := range t.trip.stmts {
		st := &t.trip.stmts[i]
		p.SendQueryPrepared(st.sd.Name, st.params[:st.n], st.formats(), binaryResults)
	}
	p.SendPipelineSync()
	var first error
	if err := p.Flush(); err != nil {
		first = err
	} else {
		i := 0
		_, first, _ = syncedResult(p, func(r *pgconn.ResultReader) error {
			defer func() { i++ }()
			if i == 0 {
				return cr.read(r)
			}
			var err error
			*evs, err = readEvents(r, t.evs[:0], args[1].s)
			t.evs = *evs // reused by the next claim
			return err
		}, nil)
	}
	if err := p.Close(); first == nil {
		first = err
	}
	if err := tripResult(pc, first); err != nil {
		t.err = commitError(err)
		return t.err
	}
	return nil
}

// claimRead is a Claim as the Workspace makes it on a Transaction without
// ClaimLease: read the thread and its lease, decide, bump, put the lease.
func (t *txn) claimRead(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires time.Time) (*core.Thread, core.Lease, uint64, error) {
	th, err := t.thread(ctx, id)
	if err != nil {
		return nil, core.Lease{}, 0, err
	}
	l, err := t.lease(ctx, id)
	if err != nil {
		return nil, core.Lease{}, 0, err
	}
	if l.Holder == holder || l.Holder != "" && !l.Expired(now) {
		return th.state, l, 0, nil
	}
	v, err := t.Bump(ctx, id)
	if err != nil {
		return nil, core.Lease{}, 0, err
	}
	if err := t.PutLease(ctx, core.Lease{Thread: id, Holder: holder, ExpiresAt: expires}); err != nil {
		return nil, core.Lease{}, 0, err
	}
	return th.state, l, v, nil
}
