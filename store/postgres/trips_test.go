package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// tripThreads creates n threads, posts a message to each and claims each
// with ClaimThenPlan (a run of message 1 planned), on one Workspace over
// s: the Store then holds every lease, and writes from its cache.
func tripThreads(t *testing.T, s *Store, n int, opts ...core.Option) (*proc, []core.Claim) {
	t.Helper()
	ctx := testCtx(t)
	a := newProc(s, "a", opts...)
	var claims []core.Claim
	for i := range n {
		id := core.ThreadID(fmt.Sprintf("t%d", i))
		require.NoError(t, a.ws.CreateThread(ctx, id))
		_, err := a.ws.Post(ctx, id, "m1")
		require.NoError(t, err)
		c, p, err := a.ws.ClaimThenPlan(ctx, id, core.Holder(fmt.Sprintf("h%d", i)), ttl)
		require.NoError(t, err)
		require.Equal(t, core.PlanRun, p.Kind)
		claims = append(claims, c)
	}
	return a, claims
}

// holdRow locks thread id's row from another connection until the
// returned function is called.
func holdRow(t *testing.T, s *Store, id core.ThreadID) (release func()) {
	t.Helper()
	release, _ = holdRowPid(t, s, id)
	return release
}

// holdRowPid is holdRow, and the process ID of the backend that holds
// the row.
func holdRowPid(t *testing.T, s *Store, id core.ThreadID) (release func(), pid int) {
	t.Helper()
	ctx := testCtx(t)
	tx, err := admin(t).Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT FROM `+pgx.Identifier{s.Schema()}.Sanitize()+`.threads WHERE id = $1 FOR UPDATE`, string(id))
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	return func() { require.NoError(t, tx.Rollback(ctx)) }, pid
}

// awaitBlocked waits until a backend waits for a lock the backend holder
// holds, and returns its process ID.
func awaitBlocked(t *testing.T, holder int) (waiting int) {
	t.Helper()
	conn := admin(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := conn.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, holder).Scan(&waiting)
		if err == nil {
			return waiting
		}
		require.ErrorIs(t, err, pgx.ErrNoRows)
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, no backend waits for a lock backend %d holds", holder)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitQueued waits until n writes wait in s's trips behind the one in
// flight.
func awaitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.trips.mu.Lock()
		busy, queued := s.trips.busy, len(s.trips.queue)
		s.trips.mu.Unlock()
		if busy && queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, %d writes wait behind the one in flight (in flight: %v); want %d", queued, busy, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// queueStarts starts RunStarts of claims' runs of message 1 on a, in the
// order given, each once the one before has gone in flight (the first)
// or queued behind it in s's trips (with the first waiting for a row
// lock, nothing goes until that lock is released); wait returns their
// outcomes, indexed as claims.
func queueStarts(t *testing.T, s *Store, a *proc, claims []core.Claim, order ...int) (wait func() []error) {
	t.Helper()
	return queueStartsCtx(t, s, a, claims, func(int) context.Context { return context.Background() }, order...)
}

// queueStartsCtx is queueStarts with claims[i]'s start in context ctx(i).
func queueStartsCtx(t *testing.T, s *Store, a *proc, claims []core.Claim, ctx func(i int) context.Context, order ...int) (wait func() []error) {
	t.Helper()
	errs := make([]error, len(claims))
	var wg sync.WaitGroup
	for n, i := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = a.ws.RunStart(ctx(i), claims[i], 1)
		}()
		awaitQueued(t, s, n)
	}
	return func() []error {
		waitWithin(t, &wg, 30*time.Second, fmt.Sprintf("the RunStarts on %d threads (order %v) returning", len(order), order))
		return errs[:len(order)]
	}
}

// The one-trip writes that become ready while one is in flight go
// together in the next round trip, in one implicit transaction, each with
// its own check (trips.go). A RunStart on t0 waits for t0's row, locked
// from another connection; the RunStarts on t1, t2 and t3 wait behind it,
// and go in one round trip once it is done. The fence holds write by
// write: t2's lease was taken behind the Store's back, so its check
// fails. Its start is one statement, sent as its softCheck twin: it
// writes nothing, and t1's and t3's starts commit in that round trip's
// transaction (their rows' xmin is the same, and not t0's). With trace
// lines kept (KeepTrace) a start is two statements, so t2's check raises
// and rolls the shared transaction back: t1's and t3's go again without
// it, and commit together then. Run again with locking reads, t2's start
// is refused (ErrThreadBusy) with nothing of a run written (only its
// RunRefused notice). A write whose context ends while it waits in the
// queue leaves it unsent: a failure, not an unknown outcome, and nothing
// written.
func TestTripsTogether(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("KeepTrace=%v", keep), func(t *testing.T) {
			t.Parallel() // a schema of its own
			testTripsTogether(t, keep)
		})
	}
}

func testTripsTogether(t *testing.T, keep bool) {
	ctx := testCtx(t)
	s := newStoreWith(t, Options{KeepTrace: keep})
	var opts []core.Option
	if keep {
		opts = append(opts, core.WithTracer(&tracecheck.Recorder{})) // each write's line stored with it
	}
	a, claims := tripThreads(t, s, 5, opts...)
	q := pgx.Identifier{s.Schema()}.Sanitize()
	_, err := admin(t).Exec(ctx, `UPDATE `+q+`.threads SET lease_holder = 'intruder', version = version + 1 WHERE id = 't2'`)
	require.NoError(t, err)
	events2, _, version2, _ := rowCounts(t, admin(t), s.Schema(), "t2")

	release := holdRow(t, s, "t0")
	trips, conflicts := s.stats.roundTrips.Load(), s.stats.conflicts.Load()
	wait := queueStarts(t, s, a, claims, 0, 1, 2, 3)
	release()
	errs := wait()
	for i, err := range errs {
		if i == 2 {
			require.ErrorIs(t, err, core.ErrThreadBusy, "t2's start, its lease another holder's")
			continue
		}
		require.NoError(t, err, "t%d's start", i)
		_, _, _, taken := rowCounts(t, admin(t), s.Schema(), core.ThreadID(fmt.Sprintf("t%d", i)))
		require.Equal(t, int64(1), taken, "t%d's start consumed its prompt", i)
	}
	// t2's refused start wrote nothing of a run: only its RunRefused
	// notice, at the version as it stood.
	events, _, version, _ := rowCounts(t, admin(t), s.Schema(), "t2")
	require.Equal(t, []int64{int64(events2) + 1, version2}, []int64{int64(events), version}, "t2 written under another holder's lease")
	var kind string
	require.NoError(t, admin(t).QueryRow(ctx, `SELECT kind FROM `+q+`.events WHERE thread_id = 't2' ORDER BY seq DESC LIMIT 1`).Scan(&kind))
	require.Equal(t, string(core.RunRefused), kind, "t2's last event")
	require.Equal(t, int64(1), s.stats.conflicts.Load()-conflicts, "t2's check, failed")
	// t0's, then t1's to t3's together (with trace lines, t1's and t3's
	// again), then t2's with locking reads (its read, and the commit of
	// its RunRefused notice).
	want := int64(2 + 2)
	if keep {
		want++
	}
	require.Equal(t, want, s.stats.roundTrips.Load()-trips, "round trips")
	xmin := rowXmins(t, s, "t0", "t1", "t3")
	require.Equal(t, xmin["t1"], xmin["t3"], "t1's and t3's starts, one transaction")
	require.NotEqual(t, xmin["t0"], xmin["t1"], "t0's start, a transaction before")

	// A write whose context ends in the queue.
	release = holdRow(t, s, "t0")
	done := make(chan error, 1)
	go func() { done <- a.ws.Renew(ctx, claims[0], ttl) }()
	awaitQueued(t, s, 0)
	wctx, cancel := context.WithCancel(ctx)
	queued := make(chan error, 1)
	_, _, version4, _ := rowCounts(t, admin(t), s.Schema(), "t4")
	go func() { queued <- a.ws.Renew(wctx, claims[4], ttl) }()
	awaitQueued(t, s, 1)
	cancel()
	err = recvWithin(t, queued, 30*time.Second, "the queued write leaving the queue")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, core.ErrCommitUnknown, "a write that was never sent")
	awaitQueued(t, s, 0)
	release()
	require.NoError(t, recvWithin(t, done, 30*time.Second, "the write in flight returning"))
	_, _, version, _ = rowCounts(t, admin(t), s.Schema(), "t4")
	require.Equal(t, version4, version, "t4 renewed by a write that left the queue")
}

// The writers of a shared round trip, back with their next writes, go
// together again (trips' gather): without it the first back went alone
// and the others behind it, two round trips where one does. Each round,
// a Renew on t0 waits for t0's row, locked from another connection; the
// Renews on t1, t2 and t3 queue behind it and go in one round trip once
// it is done; then each of the three renews again at once. Their second
// writes take one round trip: 3 a round in all, against 4 without the
// gather. The gather waits for its writers by yielding the processor, a
// bounded number of times for a bounded time (gatherYields,
// gatherPatience); under -race on a loaded host they can take longer than
// that to come back, so the test lets it wait longer, and allows a round
// in which a writer came back late.
func TestTripsGatherWritersBack(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	s.trips.yields, s.trips.patience = 1<<20, time.Minute
	a, claims := tripThreads(t, s, 4)
	const rounds = 10
	trips := s.stats.roundTrips.Load()
	for r := range rounds {
		release := holdRow(t, s, "t0")
		errs := make(chan error, 4) // t0's renew, and each of the three's last
		go func() { errs <- a.ws.Renew(ctx, claims[0], ttl) }()
		awaitQueued(t, s, 0)
		for i := 1; i <= 3; i++ {
			go func() {
				if err := a.ws.Renew(ctx, claims[i], ttl); err != nil {
					errs <- err
					return
				}
				errs <- a.ws.Renew(ctx, claims[i], ttl)
			}()
			awaitQueued(t, s, i)
		}
		release()
		for range 4 {
			require.NoError(t, recvWithin(t, errs, 30*time.Second, fmt.Sprintf("round %d's renews returning", r)))
		}
	}
	got := s.stats.roundTrips.Load() - trips
	t.Logf("%d rounds: %d round trips", rounds, got)
	require.LessOrEqual(t, got, int64(rounds*3+1), "round trips in %d rounds: t0's renew, the three together, and their next three together (3 a round)", rounds)
}

// A write that waits for a shared round trip holds no connection
// (Store.run, txn.need, trips.send). t0's renew leads and waits for t0's
// row, locked from another connection, on the connection it took. The
// RunStarts on t1, t2 and t3 then queue behind it: t1's prepares its
// statement, new to the Store, on a connection of its own and gives it
// back as it queues, t2's and t3's take none. Only the leader's is taken
// while they wait. Once the row is released, the three go in one round
// trip. Then the same with a pool of one connection, which the leader
// holds (t3's RunStart goes first, alone, to prepare the statement, which
// no second connection could): t1's and t2's queue all the same, and go
// together. Had each transaction taken a connection first, as before,
// the queued writes would hold connections of their own (or, with one,
// wait for it, not in the queue).
func TestTripsWaitersHoldNoConnection(t *testing.T) {
	t.Parallel() // schemas of its own
	for _, conns := range []int32{4, 1} {
		t.Run(fmt.Sprintf("pool=%d", conns), func(t *testing.T) {
			ctx := testCtx(t)
			cfg := poolConfig(t, randomName("tc_"))
			cfg.MaxConns = conns
			s := openStore(t, cfg, testSchema(t))
			a, claims := tripThreads(t, s, 4)
			if conns == 1 {
				// The RunStart's statement prepared: with one connection,
				// held by the leader, no other could be taken to prepare it.
				_, err := a.ws.RunStart(ctx, claims[3], 1)
				require.NoError(t, err)
				claims = claims[:3]
			}
			trips := s.stats.roundTrips.Load()
			release := holdRow(t, s, "t0")
			errs := make(chan error, len(claims))
			go func() { errs <- a.ws.Renew(ctx, claims[0], ttl) }()
			awaitQueued(t, s, 0)
			for i := 1; i < len(claims); i++ {
				go func() {
					_, err := a.ws.RunStart(ctx, claims[i], 1)
					errs <- err
				}()
				awaitQueued(t, s, i)
			}
			require.Equal(t, int32(1), s.pool.Stat().AcquiredConns(), "connections taken while the writes wait: the leader's")
			release()
			for range claims {
				require.NoError(t, recvWithin(t, errs, 30*time.Second, "the renew and the starts returning"))
			}
			require.Equal(t, int64(2), s.stats.roundTrips.Load()-trips, "round trips: t0's renew, then the starts together")
		})
	}
}

// rowXmins returns the transaction that last wrote each of the threads'
// rows.
func rowXmins(t *testing.T, s *Store, ids ...core.ThreadID) map[core.ThreadID]string {
	t.Helper()
	q := pgx.Identifier{s.Schema()}.Sanitize()
	xmin := map[core.ThreadID]string{}
	for _, id := range ids {
		var x string
		require.NoError(t, admin(t).QueryRow(context.Background(), `SELECT xmin::text FROM `+q+`.threads WHERE id = $1`, string(id)).Scan(&x))
		xmin[id] = x
	}
	return xmin
}

// A write of a shared round trip that the server refuses for a reason
// other than its check rolls back the transaction it shared; the writes
// go again, each behind a Sync of its own, so that each has the outcome
// it would have had alone: t2's start fails with the server's error
// (a trigger on the events refuses its event) and writes nothing, and
// t1's and t3's commit, each in a transaction of its own.
func TestTripsRefusedGoEachAlone(t *testing.T) {
	t.Parallel() // a schema of its own
	s := newStore(t)
	a, claims := tripThreads(t, s, 4)
	refuseStart(t, s, "t2")
	events2, _, version2, _ := rowCounts(t, admin(t), s.Schema(), "t2")

	release := holdRow(t, s, "t0")
	trips := s.stats.roundTrips.Load()
	wait := queueStarts(t, s, a, claims, 0, 1, 2, 3)
	release()
	errs := wait()
	for i, err := range errs {
		if i == 2 {
			require.ErrorContains(t, err, "refused by the test", "t2's start")
			require.NotErrorIs(t, err, core.ErrCommitUnknown, "t2's start, refused")
			continue
		}
		require.NoError(t, err, "t%d's start", i)
		_, _, _, taken := rowCounts(t, admin(t), s.Schema(), core.ThreadID(fmt.Sprintf("t%d", i)))
		require.Equal(t, int64(1), taken, "t%d's start consumed its prompt", i)
	}
	events, _, version, _ := rowCounts(t, admin(t), s.Schema(), "t2")
	require.Equal(t, []int64{int64(events2), version2}, []int64{int64(events), version}, "t2 written")
	// t0's; t1's to t3's together, refused; the three again, each alone.
	require.Equal(t, int64(3), s.stats.roundTrips.Load()-trips, "round trips")
	xmin := rowXmins(t, s, "t1", "t3")
	require.NotEqual(t, xmin["t1"], xmin["t3"], "t1's and t3's starts, each its own transaction")
}

// A shared round trip in which the server refused one write, and whose
// connection was then lost before its Sync came back: that write was
// refused, so it rolled back (the server's ERROR, not ErrCommitUnknown);
// the others, whose outcome the client never read, are ErrCommitUnknown
// (here rolled back with it). RunStarts on t1 to t3 share a round trip
// behind one on t0; a trigger refuses t2's, and the Store's connections
// end right after the server's first ERROR (cutConn).
func TestTripsRefusedThenConnectionLost(t *testing.T) {
	t.Parallel() // a schema of its own
	var armed atomic.Bool
	cfg := poolConfig(t, randomName("tc_"))
	cfg.ConnConfig.AfterNetConnect = func(_ context.Context, _ *pgconn.Config, c net.Conn) (net.Conn, error) {
		return &cutConn{Conn: c, armed: &armed}, nil
	}
	s := openStore(t, cfg, testSchema(t))
	a, claims := tripThreads(t, s, 4)
	refuseStart(t, s, "t2")

	release := holdRow(t, s, "t0")
	wait := queueStarts(t, s, a, claims, 0, 1, 2, 3)
	armed.Store(true)
	release()
	errs := wait()
	require.NoError(t, errs[0], "t0's start")
	require.ErrorContains(t, errs[2], "refused by the test", "t2's start")
	require.NotErrorIs(t, errs[2], core.ErrCommitUnknown, "t2's start, refused before the connection was lost")
	for _, i := range []int{1, 3} {
		require.ErrorIs(t, errs[i], core.ErrCommitUnknown, "t%d's start", i)
		_, _, _, taken := rowCounts(t, admin(t), s.Schema(), core.ThreadID(fmt.Sprintf("t%d", i)))
		require.Zero(t, taken, "t%d's start committed", i)
	}
}

// refuseStart makes the server refuse every RunStart on thread id (a
// trigger on its run_started events raises SQLSTATE TC999, "refused by
// the test"): a refusal that is not a failed check.
func refuseStart(t *testing.T, s *Store, id core.ThreadID) {
	t.Helper()
	q := pgx.Identifier{s.Schema()}.Sanitize()
	_, err := admin(t).Exec(context.Background(), `CREATE FUNCTION `+q+`.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = 'TC999'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON `+q+`.events FOR EACH ROW
		WHEN (NEW.thread_id = '`+strings.ReplaceAll(string(id), "'", "''")+`' AND NEW.kind = 'run_started') EXECUTE FUNCTION `+q+`.refuse()`)
	require.NoError(t, err)
}

// cutConn is a connection to the server that, once armed, ends right
// after the first ErrorResponse the server sends: the client reads that
// message, and then the connection is gone, with whatever came after it
// (the rest of a pipeline's results, its ReadyForQuery). It follows the
// server's messages from the connection's first byte (a type byte and a
// length each).
type cutConn struct {
	net.Conn
	armed *atomic.Bool
	head  []byte // the current message's type and length, as read so far
	left  int    // the current message's bytes still to come after its head
	typ   byte   // the current message's type, once its head is read
	cut   bool
}

func (c *cutConn) Read(p []byte) (int, error) {
	if c.cut {
		return 0, io.EOF
	}
	n, err := c.Conn.Read(p)
	for i := 0; i < n; {
		if c.left > 0 {
			k := min(c.left, n-i)
			i, c.left = i+k, c.left-k
		} else {
			c.head = append(c.head, p[i])
			i++
			if len(c.head) < 5 {
				continue
			}
			c.typ, c.left = c.head[0], int(binary.BigEndian.Uint32(c.head[1:]))-4
			c.head = c.head[:0]
		}
		if c.left == 0 && c.typ == 'E' && c.armed.Load() {
			c.cut = true
			_ = c.Conn.Close()
			return i, nil
		}
	}
	return n, err
}

// The writes of a shared round trip lock their threads' rows in the
// threads' order, whatever order they came in, so that two Stores' shared
// transactions never wait for each other's locks: RunStarts on t3, t1 and
// t2 queue in that order behind one on t0; with t2's row locked from
// another connection, the shared transaction holds t1's row and waits for
// t2's, and has not reached t3's.
func TestTripsLockInThreadOrder(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	a, claims := tripThreads(t, s, 4)
	release0 := holdRow(t, s, "t0")
	wait := queueStarts(t, s, a, claims, 0, 3, 1, 2)
	release2 := holdRow(t, s, "t2")
	release0()
	q := pgx.Identifier{s.Schema()}.Sanitize()
	locked := func(id core.ThreadID) bool {
		tx, err := admin(t).Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		_, err = tx.Exec(ctx, `SELECT FROM `+q+`.threads WHERE id = $1 FOR UPDATE NOWAIT`, string(id))
		return err != nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for !locked("t1") {
		if time.Now().After(deadline) {
			t.Fatal("after 30s, the shared transaction holds no lock on t1's row")
		}
		time.Sleep(time.Millisecond)
	}
	require.False(t, locked("t3"), "t3's row locked before t2's was granted")
	release2()
	for i, err := range wait() {
		require.NoError(t, err, "t%d's start", i)
	}
}

// A shared round trip whose connection fails before its Sync comes back
// leaves every write in it unknown (ErrCommitUnknown), though nothing of
// it committed: RunStarts on t1, t2 and t3 queue behind one on t0, and
// the shared transaction takes t1's row and waits for t2's, locked from
// another connection; its backend is then terminated. The three starts
// are unknown, and no row of theirs moved.
func TestTripsConnectionLostUnknown(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s, waiting, done := sharedBlocked(t, func(int) context.Context { return ctx })
	_, err := admin(t).Exec(ctx, `SELECT pg_terminate_backend($1)`, waiting)
	require.NoError(t, err)
	errs := done()
	require.NoError(t, errs[0], "t0's start")
	for i := 1; i < 4; i++ {
		require.ErrorIs(t, errs[i], core.ErrCommitUnknown, "t%d's start", i)
		_, _, _, taken := rowCounts(t, admin(t), s.Schema(), core.ThreadID(fmt.Sprintf("t%d", i)))
		require.Zero(t, taken, "t%d's start committed", i)
	}
}

// A shared round trip whose writes' contexts all end while it waits for a
// row lock is cancelled by the server: the shared transaction rolled back,
// so every write fails, none as unknown, and none is sent again (each
// alone, it could commit after its caller gave up on it).
func TestTripsCancelledRolledBack(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, _, done := sharedBlocked(t, func(i int) context.Context {
		if i == 0 {
			return ctx
		}
		return wctx
	})
	cancel()
	errs := done()
	require.NoError(t, errs[0], "t0's start")
	for i := 1; i < 4; i++ {
		require.Error(t, errs[i], "t%d's start", i)
		require.NotErrorIs(t, errs[i], core.ErrCommitUnknown, "t%d's start, rolled back", i)
		_, _, _, taken := rowCounts(t, admin(t), s.Schema(), core.ThreadID(fmt.Sprintf("t%d", i)))
		require.Zero(t, taken, "t%d's start committed", i)
	}
}

// sharedBlocked makes a Store with threads t0 to t3 claimed, and queues
// RunStarts on t1, t2 and t3 (claims[i]'s in ctx(i)) behind one on t0;
// it returns once their shared transaction holds t1's row and waits for
// t2's, locked from another connection: waiting is that transaction's
// backend, and done releases t2's row and returns the four starts'
// outcomes.
func sharedBlocked(t *testing.T, ctx func(i int) context.Context) (s *Store, waiting int, done func() []error) {
	t.Helper()
	s = newStore(t)
	a, claims := tripThreads(t, s, 4)
	release0 := holdRow(t, s, "t0")
	wait := queueStartsCtx(t, s, a, claims, ctx, 0, 1, 2, 3)
	release2, holder := holdRowPid(t, s, "t2")
	release0()
	waiting = awaitBlocked(t, holder)
	return s, waiting, func() []error {
		errs := wait()
		release2()
		return errs
	}
}

// The concurrent executions (sim.RunConcurrent, run -concurrent) on a
// Store, with enough threads and runners that their writes meet in the
// Store's trips: the invariants hold, every message is consumed, the Go
// trace checker accepts the trace, and some writes went together (fewer
// round trips carried the one-trip writes than there were writes). An
// execution whose writes never met is followed by another seed, up to 5.
func TestTripsInConcurrentExecutions(t *testing.T) {
	t.Parallel() // schemas of their own
	for seed := range uint64(5) {
		s := newStore(t)
		res, err := sim.RunConcurrent(context.Background(), sim.ConcurrentConfig{Seed: seed, Procs: 4, Threads: 8, Storage: s})
		require.NoError(t, err, "seed %d", seed)
		_, err = tracecheck.Check(res.Lines)
		require.NoError(t, err, "seed %d", seed)
		writes, sends := s.stats.tripWrites.Load(), s.stats.tripSends.Load()
		t.Logf("seed %d: %d one-trip writes in %d round trips", seed, writes, sends)
		if writes > sends {
			return
		}
	}
	t.Fatal("in 5 concurrent executions, no two one-trip writes went in one round trip")
}

// A write whose check failed (another Store posted to the thread the
// Store holds) runs again with locking reads; the write after it, the
// locking one having committed, speculates again: one round trip, no
// check failed. (Before, the thread stayed out of speculation until the
// lease's next write, and every write of the turn took two round trips.)
func TestSpeculationResumesAfterConflict(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	a, c := claimedThread(t, s)
	other := openStore(t, poolConfig(t, randomName("tc_")), s.Schema())
	_, err := newProc(other, "poster").ws.Post(ctx, "t", "m2")
	require.NoError(t, err)
	trips, conflicts := s.stats.roundTrips.Load(), s.stats.conflicts.Load()
	run, err := a.ws.RunStart(ctx, c, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.stats.conflicts.Load()-conflicts, "the start's check, failed on the other Store's post")
	require.Equal(t, int64(1+2), s.stats.roundTrips.Load()-trips, "the failed check, then the start with locking reads")
	trips = s.stats.roundTrips.Load()
	require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
	require.Equal(t, int64(1), s.stats.roundTrips.Load()-trips, "the run's end, speculating again")
	require.Equal(t, int64(1), s.stats.conflicts.Load()-conflicts)
}
