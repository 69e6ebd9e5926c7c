package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// trips sends the one-trip writes (commitOneTrip) of a Store's
// transactions that are ready at the same time in one round trip: issue
// 25's lever of several threads' writes carried together. While one
// pipeline is in flight, the writes that become ready wait in the queue;
// when it ends, the first of them sends them all, in one pipeline on its
// own connection, with one Sync: the statements up to a Sync run as one
// implicit transaction, so the writes share one commit (sendTogether).
// Each write keeps its own check in its own statement (the thread's
// version and its holder's lease, fastpath.go): the fence is each
// thread's holder's, as when the write goes alone. A write that is one
// statement goes as its softCheck twin (fastpath.go): its failed check
// writes nothing and lets the others commit. A check that raises (a write
// of several statements) rolls the shared transaction back, and the
// others go again without it; a write the server refuses for any other
// reason sends them all again, each behind a Sync of its own, so that
// each has the outcome it would have had alone. A write with nothing in
// flight goes at once, alone, as before; nothing ever waits for a timer.
//
// The writers of a shared round trip are on their way back when it ends:
// a turn that consumed a message writes the next one's start a few
// microseconds later. Were the first of them back to go at once, alone,
// the others would queue behind it and every turn would wait for two
// round trips a message, its own and a lone one's. So the first of them
// back (a write on one of their threads), with nothing in flight, yields
// the processor (gatherYields times at most, none begun after
// gatherPatience; no timer) while fewer writes than they were are
// queued, and then takes those that are along.
// A writer whose write failed, or released its thread (its turn ended),
// is not waited for; a write on another thread does not wait. Writes a
// round trip while draining: 2.2 before, 3.3 after (store/postgres/
// BENCH.md, "The writers of a shared round trip gathered").
//
// A write waiting in the queue holds no connection (Store.run takes one
// only when a transaction needs it, and a queued write gives its back):
// the one that leads takes one (sendTogether, sendAlone), and it can, so
// writers that wait can never hold up the one they wait for, whatever the
// pool's size. With 4 runners of 4 turns each, draining, a pool of 2 a
// runner went 1.04–1.11× as fast as 4, with 13 connections opened
// instead of 21 (internal/bench/BENCH.md, "Transactions that take a
// connection only when they need one").
//
// The writes of one pipeline run one after the other on one backend, and
// lock their threads' rows in the threads' order, holding them until the
// shared commit: a write that waits for a thread's row lock holds up
// those after it until the lock is granted (the writes of other
// connections are not held up), and two Stores' shared transactions never
// wait for each other's locks. No write of the queue holds a row lock
// while it waits, so no lock it waits for can wait for the queue.
type trips struct {
	mu    sync.Mutex
	busy  bool   // a pipeline is in flight, or its sender is about to send one
	queue []*txn // ready, waiting for it to end, in the order they came
	// back: the threads of the writers the last round trip carried that
	// are expected back with a write of their own (it was shared).
	back []string
	// yields and patience bound the gather: gatherYields and
	// gatherPatience (a test's own, to see the gather without the
	// scheduler's leeway).
	yields   int
	patience time.Duration
}

// gatherYields and gatherPatience bound the wait of a write for the
// writers of the shared round trip that just ended (trips): at most 8
// processor yields, and no yield begun after 200µs. Each yield lets the
// goroutines ready to run run first; a writer busy elsewhere (an agent at
// work) is not waited for beyond them. 8 and 32 yields drained as fast
// (store/postgres/BENCH.md); the time bounds the cost of a yield when
// every processor is busy with goroutines that do not block (agents at
// work), where one yield can last a scheduling slice.
const (
	gatherYields   = 8
	gatherPatience = 200 * time.Microsecond
)

// trip is one transaction's one-trip statements, and its wait in the
// Store's trips.
type trip struct {
	stmts  []tripStmt
	ctx    context.Context // the transaction's, while it waits
	signal chan bool       // true: lead (send the queue); false: sent, err is the outcome
	err    error
	// softFailed: sent in a shared transaction as its softCheck twin, its
	// check failed (it wrote nothing).
	softFailed bool
}

// tripStmt is one prepared statement of a trip with its encoded arguments
// (in the transaction's buffer).
type tripStmt struct {
	sd        *pgconn.StatementDescription
	soft      *pgconn.StatementDescription // sd's softCheck twin, when prepared for a shared transaction
	n         int
	params    [maxParams][]byte
	fmts      [maxParams]int16
	allBinary bool
}

// add appends a statement of n arguments, its format codes binary until
// told otherwise.
func (tr *trip) add(sd *pgconn.StatementDescription, n int) *tripStmt {
	if len(tr.stmts) < cap(tr.stmts) {
		tr.stmts = tr.stmts[:len(tr.stmts)+1]
	} else {
		tr.stmts = append(tr.stmts, tripStmt{})
	}
	st := &tr.stmts[len(tr.stmts)-1]
	st.sd, st.soft, st.n, st.allBinary = sd, nil, n, true
	clear(st.params[:])
	return st
}

// formats returns the statement's format codes: one stands for every
// argument when all are binary.
func (st *tripStmt) formats() []int16 {
	if st.allBinary && st.n > 0 {
		return st.fmts[:1]
	}
	return st.fmts[:st.n]
}

// unsentError is the failure of a write that was never handed to a
// connection: nothing of it ran.
type unsentError struct{ err error }

func (e *unsentError) Error() string { return "postgres: not sent: " + e.err.Error() }
func (e *unsentError) Unwrap() error { return e.err }

// SafeToRetry is true: nothing was sent (commitError reads it so).
func (e *unsentError) SafeToRetry() bool { return true }

// send sends t's one-trip statements (t.trip), with the writes of the
// Store's other transactions that are ready at the same time when a
// pipeline is in flight, and returns t's outcome: as commitOneTrip's.
// When ctx ends while t waits in the queue, t leaves it, unsent.
func (q *trips) send(ctx context.Context, t *txn) error {
	t.trip.ctx = ctx
	if t.s.tripsAlone {
		t.s.stats.roundTrips.Add(1)
		t.s.stats.tripWrites.Add(1)
		t.s.stats.tripSends.Add(1)
		return t.sendAlone(ctx)
	}
	q.mu.Lock()
	if !q.busy {
		q.busy = true
		q.lead(ctx, t, q.gather(t))
		return t.trip.err
	}
	if t.trip.signal == nil {
		t.trip.signal = make(chan bool, 1)
	}
	q.queue = append(q.queue, t)
	q.mu.Unlock()
	if t.held != nil {
		// A one-trip write has no transaction open on its connection: it
		// holds none while it waits, so the one that leads can always
		// take one.
		t.held.Release()
		t.held, t.conn = nil, nil
	}
	var lead bool
	select {
	case lead = <-t.trip.signal:
	case <-ctx.Done():
		q.mu.Lock()
		if i := slices.Index(q.queue, t); i >= 0 {
			q.queue = slices.Delete(q.queue, i, i+1)
			q.mu.Unlock()
			return &unsentError{ctx.Err()}
		}
		q.mu.Unlock()
		lead = <-t.trip.signal // taken: sent already, or t leads
	}
	if !lead {
		return t.trip.err
	}
	q.mu.Lock()
	q.lead(ctx, t, q.gather(t))
	return t.trip.err
}

// gather returns the writes t is to lead: t and those queued. When t is
// one of the writers of the last shared round trip (its thread's), it
// first lets the others come back: until as many writes as they were
// are queued, or q.yields yields have passed. nil: t alone. It is
// called with q.mu held, and releases it.
func (q *trips) gather(t *txn) []*txn {
	back := len(q.back)
	if !slices.Contains(q.back, t.tripThread()) {
		back = 0 // not one of them: they may be done
	}
	q.back = q.back[:0]
	var since time.Time
	for i := 0; i < q.yields && len(q.queue)+1 < back; i++ {
		if i == 0 {
			since = time.Now()
		} else if time.Since(since) > q.patience {
			break
		}
		q.mu.Unlock()
		runtime.Gosched() // the writers on their way back queue meanwhile
		q.mu.Lock()
	}
	var batch []*txn
	if len(q.queue) > 0 {
		batch = append(append(make([]*txn, 0, len(q.queue)+1), t), q.queue...)
		q.queue = q.queue[:0]
	}
	q.mu.Unlock()
	return batch
}

// lead sends batch, which begins with leader (nil: leader alone), on
// leader's connection, hands each write its outcome, and then the lead to
// the first write that queued meanwhile, if any. It counts the writers it
// expects back (q.back) for the next leader's gather.
func (q *trips) lead(ctx context.Context, leader *txn, batch []*txn) {
	leader.s.stats.roundTrips.Add(1)
	leader.s.stats.tripWrites.Add(int64(max(len(batch), 1)))
	leader.s.stats.tripSends.Add(1)
	var back []string
	if len(batch) <= 1 {
		leader.trip.err = leader.sendAlone(ctx)
	} else {
		sendTogether(ctx, leader, batch)
		back = make([]string, 0, len(batch))
		for _, m := range batch {
			if id := m.tripThread(); m.trip.err == nil && !m.releases && id != "" {
				back = append(back, id)
			}
		}
		for _, m := range batch[1:] {
			m.trip.signal <- false
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.back = back
	if len(q.queue) == 0 {
		q.busy = false
		return
	}
	next := q.queue[0]
	q.queue = slices.Delete(q.queue, 0, 1)
	next.trip.signal <- true
}

// sendTogether sends the writes of batch in one round trip on leader's
// connection and sets each one's outcome. They go as one implicit
// transaction (sendGroup), in the order of their threads: one commit for
// them all. Each statement keeps its own check, so the fence is each
// write's own; what the writes share is only the commit. A write of one
// statement whose check fails (its softCheck twin's row) has that outcome
// (conflictCode) and wrote nothing; the others commit. When a write's
// check raises (conflictCode, or its event's key taken), the whole
// transaction rolled back: that write has its outcome (a failed check, as
// it would have failed alone, the writes before it in the pipeline being
// other threads' or, had they been its thread's, seen as committed), and
// the others are sent again without it. Any other refusal sends them
// again each behind a Sync of its own (sendSynced), so that each has the
// outcome it would have had alone. The pipelines' context ends when every
// write's has.
func sendTogether(ctx context.Context, leader *txn, batch []*txn) {
	all := func(err error) {
		for _, m := range batch {
			m.trip.err = err
		}
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var live atomic.Int64
	live.Store(int64(len(batch)))
	for _, m := range batch {
		stop := context.AfterFunc(m.trip.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	if err := leader.need(pctx); err != nil {
		all(err)
		return
	}
	conn := leader.conn
	for _, m := range batch {
		for i := range m.trip.stmts {
			st := &m.trip.stmts[i]
			if _, err := conn.Prepare(pctx, st.sd.Name, st.sd.SQL); err != nil {
				all(&unsentError{fmt.Errorf("prepare: %w", err)})
				return
			}
			if soft, ok := leader.s.q.soft[st.sd.SQL]; ok && len(m.trip.stmts) == 1 && !leader.s.tripsSynced {
				sd, err := conn.Prepare(pctx, leader.s.q.name(soft), soft)
				if err != nil {
					all(&unsentError{fmt.Errorf("prepare: %w", err)})
					return
				}
				if slices.Equal(sd.ParamOIDs, st.sd.ParamOIDs) {
					st.soft = sd // its arguments, encoded for sd's, fit
				}
			}
		}
	}
	pc := conn.PgConn()
	if pc.IsClosed() {
		all(&unsentError{errors.New("the connection is closed")})
		return
	}
	stats := &leader.s.stats
	again := false // a round trip after lead's: counted here
	count := func() {
		if again {
			stats.roundTrips.Add(1)
			stats.tripSends.Add(1)
		}
		again = true
	}
	// Row locks are taken in the order of the threads, so that two Stores'
	// transactions never wait for each other's.
	group := slices.Clone(batch)
	slices.SortStableFunc(group, func(a, b *txn) int { return strings.Compare(a.tripThread(), b.tripThread()) })
	for len(group) > 1 && !leader.s.tripsSynced {
		count()
		stats.tripGroups.Add(1)
		k, refused, unknown := sendGroup(pctx, pc, group)
		if unknown != nil {
			for _, m := range group {
				m.trip.err = &sentError{unknown} // whatever ran may have committed
			}
			if k >= 0 {
				group[k].trip.err = refused // refused before the connection failed: rolled back
			}
			return
		}
		if refused == nil {
			for _, m := range group {
				m.trip.err = tripResult(pc, nil)
				if m.trip.err == nil && m.trip.softFailed {
					m.trip.err = &pgconn.PgError{Severity: "ERROR", Code: conflictCode,
						Message: fmt.Sprintf("thread %s or its lease changed since this process last wrote it", m.tripThread())}
				}
			}
			return
		}
		if k < 0 || !checkFailed(refused) {
			if pctx.Err() != nil {
				// Every write's context ended (the server cancelled the
				// statement it was running, say): all rolled back, and
				// none is to be sent again.
				for _, m := range group {
					m.trip.err = refused
				}
				return
			}
			break // each alone, then
		}
		group[k].trip.err = refused
		group = slices.Delete(group, k, k+1)
	}
	count()
	sendSynced(pctx, pc, group)
}

// sendTrip adds t's one-trip statements to p, each as its softCheck twin
// when soft and one is prepared.
func (t *txn) sendTrip(p *pgconn.Pipeline, soft bool) {
	for i := range t.trip.stmts {
		st := &t.trip.stmts[i]
		name := st.sd.Name
		if soft && st.soft != nil {
			name = st.soft.Name
		}
		p.SendQueryPrepared(name, st.params[:st.n], st.formats(), nil)
	}
}

// tripThread is the thread a one-trip write checks first (its first
// assumption), "" when none.
func (t *txn) tripThread() string {
	if len(t.assumed) == 0 {
		return ""
	}
	return t.assumed[0].id
}

// sendGroup sends the writes of group in one pipeline with one Sync: one
// implicit transaction, committed when every statement succeeded. A write
// that is one statement goes as its softCheck twin, when prepared: its
// failed check sets its softFailed and leaves the others to commit. It
// returns refused, the server's error, when it rolled the transaction
// back, with k the write whose statement it refused (-1: none known); and
// unknown when the outcome is unknown, the connection having failed (k
// and refused, when set, what the server had refused before that).
func sendGroup(ctx context.Context, pc *pgconn.PgConn, group []*txn) (k int, refused, unknown error) {
	p := pc.StartPipeline(ctx)
	for _, m := range group {
		m.trip.softFailed = false
		m.sendTrip(p, true)
	}
	p.SendPipelineSync()
	if err := p.Flush(); err != nil {
		_ = p.Close()
		return -1, nil, err
	}
	k = -1
	i, j := 0, 0 // the write and the statement the next result is of
	done, first, broken := syncedResult(p, nil, func(tag pgconn.CommandTag) {
		for j == len(group[i].trip.stmts) {
			i, j = i+1, 0
		}
		if group[i].trip.stmts[j].soft != nil && tag.RowsAffected() > 0 {
			group[i].trip.softFailed = true
		}
		j++
	})
	_ = p.Close()
	var pgErr *pgconn.PgError
	if first != nil && !errors.As(first, &pgErr) {
		return -1, nil, first // not the server's: the connection's
	}
	if first != nil && pgErr.Severity == "ERROR" {
		refused = first
		for i, m := range group {
			if done < len(m.trip.stmts) {
				k = i
				break
			}
			done -= len(m.trip.stmts)
		}
	}
	if broken != nil {
		return k, refused, broken
	}
	if first != nil && refused == nil {
		return -1, nil, first // FATAL or PANIC: the server ended the session
	}
	return k, refused, nil
}

// sendSynced sends the writes of batch in one pipeline on pc, a Sync
// after each, so that each commits or rolls back on its own, and sets
// each one's outcome.
func sendSynced(ctx context.Context, pc *pgconn.PgConn, batch []*txn) {
	p := pc.StartPipeline(ctx)
	for _, m := range batch {
		m.sendTrip(p, false)
		p.SendPipelineSync()
	}
	if err := p.Flush(); err != nil {
		for _, m := range batch {
			m.trip.err = &sentError{err}
		}
		_ = p.Close()
		return
	}
	var broken error // the connection failed: the writes not synced yet are unknown
	for _, m := range batch {
		if broken != nil {
			m.trip.err = &sentError{broken}
			continue
		}
		var first error
		_, first, broken = syncedResult(p, nil, nil)
		var pgErr *pgconn.PgError
		switch {
		case broken != nil && errors.As(first, &pgErr) && pgErr.Severity == "ERROR":
			m.trip.err = first // the server refused it: rolled back, whatever came after
		case broken != nil:
			m.trip.err = &sentError{broken}
		default:
			m.trip.err = tripResult(pc, first)
		}
	}
	_ = p.Close() // every outcome is set; a failure here only says the connection is gone
}

// syncedResult reads the results from p up to the next Sync, each one's
// rows given to rows, when not nil, and returns how many statements
// succeeded before the first failure (each one's command tag given to ok,
// when not nil), that failure (the server's, before one of rows), and
// broken when the connection failed before the Sync came back.
func syncedResult(p *pgconn.Pipeline, rows func(*pgconn.ResultReader) error, ok func(pgconn.CommandTag)) (done int, first, broken error) {
	for {
		res, err := p.GetResults()
		if err == nil && res == nil {
			err = errors.New("postgres: the pipeline ended before the write's Sync")
		}
		if err != nil {
			if first == nil {
				first = err
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				return done, first, err
			}
			continue // the server skips to the Sync
		}
		switch r := res.(type) {
		case *pgconn.ResultReader:
			var read error
			if rows != nil && first == nil {
				read = rows(r)
			}
			tag, err := r.Close()
			err = cmp.Or(err, read)
			switch {
			case err != nil && first == nil:
				first = err
			case first == nil:
				done++
				if ok != nil {
					ok(tag)
				}
			}
		case *pgconn.PipelineSync:
			return done, first, nil
		}
	}
}
