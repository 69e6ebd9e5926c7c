package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/storetest"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// terminate ends the backend pid with pg_terminate_backend and waits until
// the server no longer lists it.
func terminate(t *testing.T, conn *pgx.Conn, pid uint32) {
	t.Helper()
	var ok bool
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ok))
	require.True(t, ok, "pg_terminate_backend(%d)", pid)
	waitFor(t, conn, fmt.Sprintf("backend %d gone", pid),
		`SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, int32(pid))
}

// A backend killed in the middle of a fenced write — after HoldsLease, and
// after its run_started event and the thread's row were sent to the server
// — leaves nothing half-written, and the write returns an error, never
// success. The claim is then treated as lost: its holder does not write
// again, and the next claimant takes the thread over after the TTL and
// consumes the message, once.
func TestBackendKilledMidFencedWrite(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	a, b, h, id, ca := claimed(t, s)
	var err error
	before := storetest.Snapshot(t, s, id)
	look := admin(t)
	events0, messages0, version0, taken0 := rowCounts(t, look, s.Schema(), id)

	h.AfterAppend = func(ctx context.Context, tx core.Transaction) {
		// Send the queued writes: the server now holds the event, in the
		// open transaction, which reads it back.
		evs, err := tx.Events(ctx, id)
		require.NoError(t, err)
		require.Len(t, evs, len(before.Events)+1)
		require.Equal(t, core.RunStarted, evs[len(evs)-1].Kind)
		terminate(t, look, backendPID(tx))
	}
	_, err = a.ws.RunStart(ctx, ca, 1)
	require.Error(t, err, "a fenced write whose backend was killed returned success")
	unknown := errors.Is(err, core.ErrCommitUnknown)
	t.Logf("RunStart with its backend killed: %v (commit unknown: %v)", err, unknown)

	require.Equal(t, before, storetest.Snapshot(t, s, id), "the killed transaction left a trace")
	events, messages, version, taken := rowCounts(t, look, s.Schema(), id)
	require.Equal(t, []int64{int64(events0), int64(messages0), version0, taken0}, []int64{int64(events), int64(messages), version, taken})

	// The next claimant, after the TTL by its clock, plans a run for the
	// same message: nothing consumed it.
	b.clock.Advance(ttl)
	cb, err := b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err)
	p, err := b.ws.Plan(ctx, cb)
	require.NoError(t, err)
	require.Equal(t, core.PlanRun, p.Kind)
	require.Equal(t, core.Seq(1), p.Message)
	_, err = b.ws.RunStart(ctx, cb, 1)
	require.NoError(t, err)
	// Had its runner retried the lost claim's write: the round refuses it
	// after a commit in doubt, and the fence does in any case.
	_, err = a.ws.RunStart(ctx, ca, 1)
	if unknown {
		require.ErrorIs(t, err, core.ErrOutOfOrder, "the retry of a write in doubt")
	} else {
		require.ErrorIs(t, err, core.ErrThreadBusy, "the lost claim's write, had its runner retried it")
	}
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		held, _, err := tx.HoldsLease(ctx, id, "ha")
		require.False(t, held, "the lost claim's holder passes the fence")
		return err
	}))
}

// A commit whose outcome is unknown, provoked for real: a deferred
// constraint trigger on events makes the commit (of the write's one
// statement, which has no COMMIT of its own) wait for an advisory lock
// the test holds; while the backend waits inside the commit, the test
// terminates it. The server ends the session (FATAL) without saying whether it
// committed, so Update returns ErrCommitUnknown. (Here it did not: the
// test reads that it did not, which the runner could not.)
func TestCommitUnknownWhenKilledInCommit(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	a, _, _, id, ca := claimed(t, s)
	err := killedInCommit(t, s, app, "RunStart", func() error {
		_, err := a.ws.RunStart(ctx, ca, 1)
		return err
	})
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	t.Logf("RunStart killed in COMMIT: %v", err)
	th, err := a.ws.Thread(ctx, id)
	require.NoError(t, err)
	require.Empty(t, th.Runs(), "this time the server had not committed")
}

// killedInCommit makes write's commit, of a write that inserts an event
// through s (whose connections' application_name is app), wait for an
// advisory lock the test holds: a deferred constraint trigger on events
// takes it. While the backend waits inside the commit, it is terminated;
// the lock is let go once write has returned, and write's error returned.
func killedInCommit(t *testing.T, s *Store, app, what string, write func() error) error {
	t.Helper()
	ctx := testCtx(t)
	look := admin(t)
	q := pgx.Identifier{s.Schema()}.Sanitize()
	const lockKey = 0x7463_0c0c
	_, err := look.Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION %[1]s.hold_commit() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN PERFORM pg_advisory_xact_lock(%[2]d); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT ON %[1]s.events
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %[1]s.hold_commit();`, q, lockKey))
	require.NoError(t, err)
	holder := admin(t)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(lockKey))
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- write() }()
	var pid int32
	waitFor(t, look, "the "+what+"'s backend waiting inside its commit",
		`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = $1
		   AND wait_event_type = 'Lock' AND wait_event = 'advisory')`, app)
	require.NoError(t, look.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1
		AND wait_event_type = 'Lock' AND wait_event = 'advisory'`, app).Scan(&pid))
	terminate(t, look, uint32(pid))
	err = recvWithin(t, done, 30*time.Second, "the "+what+" whose backend was terminated returning")
	_, uerr := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, int64(lockKey))
	require.NoError(t, uerr)
	return err
}

// A post is one autocommitted statement (PostMessage, without KeepTrace)
// whose commit may be cut off too: killed in its commit, Post returns
// ErrCommitUnknown, as every write does, never a plain failure that says
// the post did not happen. (Here it did not.) (The eighth mutation pass:
// the one statement's error returned unclassified failed no test.)
func TestPostCommitUnknownWhenKilledInCommit(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	err := killedInCommit(t, s, app, "Post", func() error {
		_, err := ws.Post(ctx, "t", "m")
		return err
	})
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	t.Logf("Post killed in COMMIT: %v", err)
	th, err := ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Zero(t, th.Last(), "this time the server had not committed")
}

// The other unknown outcome: the server commits and the reply is lost. A
// connection that drops the COMMIT's reply, after the server sent it, makes
// the client see a broken connection; Update returns ErrCommitUnknown, and
// storage shows that the write did commit. A runner that retried it under
// the same holder would start a second run with the same prompt; the next
// claimant instead abandons the run that did start.
func TestCommitUnknownWhenReplyLost(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	var armed atomic.Bool
	s := lossyStore(t, testSchema(t), &armed, nil)
	h := &hooked{Storage: s}
	a, b := newProc(h, "a"), newProc(s, "b")
	warm := claimWarmedUp(t, a)
	planRun(t, a, warm)
	_, err := a.ws.RunStart(ctx, warm, 1) // prepares the statements RunStart sends
	require.NoError(t, err)
	ca, err := a.ws.Claim(ctx, "t", "ha", ttl)
	require.NoError(t, err)
	planRun(t, a, ca)

	// After Append, RunStart sends nothing until the COMMIT round trip.
	h.AfterAppend = func(context.Context, core.Transaction) { armed.Store(true) }
	// The connection idles past pgxpool's second first, so the commit's
	// round trip comes after the pool's liveness ping, which lossyConn
	// must pass over (under load it did so by chance, and the test failed).
	time.Sleep(1100 * time.Millisecond)
	_, err = a.ws.RunStart(ctx, ca, 1)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	t.Logf("RunStart whose COMMIT reply was lost: %v", err)

	th, err := b.ws.Thread(ctx, "t")
	require.NoError(t, err)
	require.Len(t, th.Runs(), 1, "the server committed the run's start")
	require.Equal(t, core.Seq(1), th.Taken)
	b.clock.Advance(ttl)
	cb, err := b.ws.Claim(ctx, "t", "hb", ttl)
	require.NoError(t, err)
	p, err := b.ws.Plan(ctx, cb)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanAbandon, Runs: []core.RunID{1}, Taken: 1}, p)
}

// A transaction that read and wrote nothing sends its COMMIT alone, by
// the simple protocol (bareCommit): a Claim's second round trip, when
// Claims begin a transaction (claimBegins, a benchmark's before). When
// the COMMIT's reply is lost, Claim returns the claim with
// ErrCommitUnknown, the lease is the claim's (the server committed), and
// the claim's Crash ends the round. The same when the COMMIT's write is
// slow, and pgconn's background reader reads while it goes.
func TestClaimCommitUnknownWhenReplyLost(t *testing.T) {
	t.Parallel() // schemas of their own
	for _, slow := range []time.Duration{0, 40 * time.Millisecond} {
		t.Run(fmt.Sprintf("slowWrite=%v", slow), func(t *testing.T) {
			t.Parallel()
			claimCommitReplyLost(t, slow)
		})
	}
}

// claimCommitReplyLost is TestClaimCommitUnknownWhenReplyLost, the
// COMMIT's write taking slow.
func claimCommitReplyLost(t *testing.T, slow time.Duration) {
	ctx := testCtx(t)
	var armed atomic.Bool
	bareCommit := func(p []byte) bool { return len(p) > 0 && p[0] == 'Q' && bytes.Contains(p, []byte("commit")) }
	s := slowLossyStore(t, testSchema(t), &armed, bareCommit, slow)
	s.claimBegins = true
	var doubts []core.Doubt
	a := newProc(s, "a", core.WithTracer(&tracecheck.Recorder{}), core.WithDoubts(func(d core.Doubt) { doubts = append(doubts, d) }))
	b := newProc(s, "b")
	require.NoError(t, a.ws.CreateThread(ctx, "t"))
	_, err := a.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)

	armed.Store(true)
	ca, err := a.ws.Claim(ctx, "t", "ha", ttl)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.False(t, armed.Load(), "the Claim sent no bare COMMIT")
	t.Logf("Claim whose COMMIT reply was lost: %v", err)
	claimInDoubt(t, a, b, ca)
	// The Store keeps no trace lines: its "no line at that tick" says
	// nothing, and the Crash decides from the lease, the claim's (before
	// KeepsTrace, it was taken as "not committed": no round, no Crash
	// line, for a claim that had committed).
	require.Len(t, doubts, 2)
	require.Equal(t, [2]any{core.DoubtUndecided, true}, [2]any{doubts[1].Outcome, doubts[1].Crashed})
}

// claimInDoubt checks what follows a's claim ca on thread "t", in doubt
// and committed: the lease is the claim's, only Crash may follow it, and
// the lease stays until it expires.
func claimInDoubt(t *testing.T, a, b *proc, ca core.Claim) {
	t.Helper()
	ctx := testCtx(t)

	l, err := b.ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Holder("ha"), l.Holder, "the server committed the claim")
	_, err = a.ws.Plan(ctx, ca)
	require.ErrorIs(t, err, core.ErrOutOfOrder, "only Crash may follow a claim in doubt")
	require.NoError(t, a.ws.Crash(ctx, ca))
	_, err = b.ws.Claim(ctx, "t", "hb", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy, "the lease the claim in doubt took stays until it expires")
}

// Without KeepTrace a Claim is one round trip, its statements the whole
// transaction, with no BEGIN or COMMIT. When that round trip's reply is
// lost after the server committed, Claim returns the claim with
// ErrCommitUnknown (pgx may call the reply's loss a closed connection,
// safe to retry as if nothing had been sent), and what follows is as in
// TestClaimCommitUnknownWhenReplyLost.
func TestClaimUnknownWhenReplyLost(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	var armed atomic.Bool
	schema := testSchema(t)
	bind := claimBind(schema)
	s := lossyStore(t, schema, &armed, func(p []byte) bool { return bytes.Contains(p, bind) })
	require.Equal(t, claimBind(s.Schema()), bind)
	var doubts []core.Doubt
	rec := &tracecheck.Recorder{}
	a := newProc(s, "a", core.WithTracer(rec), core.WithDoubts(func(d core.Doubt) { doubts = append(doubts, d) }))
	b := newProc(s, "b")
	claimWarmedUp(t, a)
	trips := s.stats.roundTrips.Load()
	require.Equal(t, int64(1), s.stats.oneTripClaims.Load())

	armed.Store(true)
	ca, err := a.ws.Claim(ctx, "t", "ha", ttl)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.False(t, armed.Load(), "the Claim's round trip was sent")
	require.Equal(t, trips+1, s.stats.roundTrips.Load(), "the Claim was one round trip")
	t.Logf("Claim whose one round trip's reply was lost: %v", err)
	claimInDoubt(t, a, b, ca)
	// Its version was the server's to decide, in the round trip whose
	// reply was lost: the doubt names no tick. Crash, in a transaction
	// that locks the thread, finds the lease the claim's and traces its
	// line at the version the claim made.
	pending := core.Doubt{Proc: "a", Thread: "t", Holder: "ha", Action: core.ActionClaim, Outcome: core.DoubtPending}
	resolved := pending
	resolved.Outcome, resolved.Crashed = core.DoubtUndecided, true
	require.Equal(t, []core.Doubt{pending, resolved}, doubts)
	crash := rec.Lines()[rec.Len()-1]
	require.Equal(t, core.ActionCrash, crash.Action)
	require.Equal(t, uint64(readRow(t, admin(t), s.Schema(), "t").version), crash.Tick, "the Crash at the claim's version")
}

// lossyStore opens a Store on schema with one connection (whose
// statements a warm-up prepares), a lossyConn armed by armed, picking
// the write that commits with only (nil: the first).
func lossyStore(t *testing.T, schema string, armed *atomic.Bool, only func(p []byte) bool) *Store {
	t.Helper()
	return slowLossyStore(t, schema, armed, only, 0)
}

// slowLossyStore is lossyStore whose write that commits takes slow
// before its bytes go: past 15ms, pgconn's background reader reads while
// the write goes on.
func slowLossyStore(t *testing.T, schema string, armed *atomic.Bool, only func(p []byte) bool, slow time.Duration) *Store {
	t.Helper()
	return oneConnStore(t, schema, func(c net.Conn) net.Conn {
		return &lossyConn{Conn: c, armed: armed, only: only, slowWrite: slow, logf: t.Logf}
	})
}

// oneConnStore opens a Store on schema with one connection, whose
// statements a warm-up prepares, dialled through wrap.
func oneConnStore(t *testing.T, schema string, wrap func(net.Conn) net.Conn) *Store {
	t.Helper()
	cfg := poolConfig(t, randomName("tc_"))
	cfg.MaxConns = 1
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
	return openStore(t, cfg, schema)
}

// claimBind is what the claim statement's Bind holds on a Store of
// schema: its portal's name (""), then the statement's.
func claimBind(schema string) []byte {
	q := newQueries(pgx.Identifier{schema}.Sanitize())
	return []byte("\x00" + q.name(q.claim) + "\x00")
}

// claimWarmedUp makes threads "warm" and "t", a message each, and
// claims "warm" through a, which prepares the claim's statements on the
// Store's connection. It returns that claim.
func claimWarmedUp(t *testing.T, a *proc) core.Claim {
	t.Helper()
	ctx := testCtx(t)
	for _, id := range []core.ThreadID{"warm", "t"} {
		require.NoError(t, a.ws.CreateThread(ctx, id))
		_, err := a.ws.Post(ctx, id, "m1")
		require.NoError(t, err)
	}
	warm, err := a.ws.Claim(ctx, "warm", "hw", ttl)
	require.NoError(t, err)
	return warm
}

// lossyConn passes a connection's bytes through until armed. The first
// write after that, which disarms it, (the round trip that commits)
// reaches the server; the reply is read up to the server's first
// ReadyForQuery that says no transaction is open and follows no error, so
// the server has committed, and then dropped: the client reads an
// unexpected EOF, as when the network fails after the commit.
//
// Nor is a connection's opening (its startup message, its password): a
// connection the pool dials while armed opens as any other.
//
// A pool's liveness ping (pgxpool pings a connection idle for over a
// second when it is acquired: "-- ping") is never the write that commits:
// on a loaded host the wait before the commit's round trip can pass a
// second, and the ping's reply, dropped, made the pool dial again and the
// write commit with its reply intact.
//
// pgconn may read in a goroutine of its own while it writes (its
// background reader), so a read can begin before the write that commits
// does. Once armed, reads go message by message, and each message is
// judged when it has arrived: the write is marked sent before its bytes
// go, so every message of its reply finds it marked.
type lossyConn struct {
	net.Conn
	armed *atomic.Bool
	// only, when set, picks the write that commits: the first write
	// after arming that it accepts.
	only func(p []byte) bool
	// slowWrite is how long the write that commits waits before its
	// bytes go.
	slowWrite time.Duration
	// logf logs the write the fault took (the test's t.Logf), so that a
	// test whose fault missed its round trip says which write it took.
	logf   func(format string, args ...any)
	mu     sync.Mutex
	opened bool // the connection's first write went
	sent   bool
	// pending is the rest of the last message passed through, and failed
	// says an error came since the last ReadyForQuery; the reader's own.
	pending []byte
	failed  bool
}

func (c *lossyConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	// A new connection's startup (or SSL request), and its password.
	opening := !c.opened || len(p) > 0 && p[0] == 'p'
	c.opened = true
	c.mu.Unlock()
	if !opening && !isPing(p) && (c.only == nil || c.only(p)) && c.armed.CompareAndSwap(true, false) {
		c.mu.Lock()
		c.sent = true
		c.mu.Unlock()
		if c.logf != nil {
			c.logf("lossyConn: the fault takes a write of %d bytes: %q", len(p), p[:min(len(p), 48)])
		}
		time.Sleep(c.slowWrite)
	}
	return c.Conn.Write(p)
}

// isPing reports whether p is pgconn's Ping: the simple query "-- ping".
func isPing(p []byte) bool {
	return len(p) > 0 && p[0] == 'Q' && bytes.Contains(p, []byte("-- ping\x00"))
}

func (c *lossyConn) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		c.mu.Lock()
		sent := c.sent
		c.mu.Unlock()
		if !sent && !c.armed.Load() {
			return c.Conn.Read(p)
		}
		msg, err := c.readMessage()
		if err != nil {
			return 0, err
		}
		c.mu.Lock()
		sent = c.sent
		c.mu.Unlock()
		if !sent {
			c.pending = msg
			break
		}
		switch msg[0] {
		case 'E':
			c.failed = true
		case 'Z':
			if !c.failed && bytes.Equal(msg[5:], []byte{'I'}) {
				_ = c.Conn.Close()
				return 0, io.ErrUnexpectedEOF
			}
			c.failed = false
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// readMessage reads one whole message of the server's: its type, its
// length and its body.
func (c *lossyConn) readMessage() ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(c.Conn, head[:]); err != nil {
		return nil, err
	}
	msg := make([]byte, 1+binary.BigEndian.Uint32(head[1:]))
	copy(msg, head[:])
	if _, err := io.ReadFull(c.Conn, msg[5:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// A one-trip Claim whose caller's deadline passes after the server
// committed it, while the reply is slow on the wire, is not in doubt:
// the Store's connections answer a context's end with a cancel request
// and wait for the server (CancelRequestContextWatcherHandler), and the
// committed claim's reply arrives. Claim succeeds, and the lease is the
// claim's. (Closing the connection at once, pgx's default, would have
// left every such claim in doubt.)
func TestClaimDeadlineWhileReplySlow(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	schema := testSchema(t)
	bind := claimBind(schema)
	var armed atomic.Bool
	s := oneConnStore(t, schema, func(c net.Conn) net.Conn {
		return &slowConn{Conn: c, armed: &armed, match: bind, delay: 300 * time.Millisecond}
	})
	a, b := newProc(s, "a"), newProc(s, "b")
	claimWarmedUp(t, a)

	armed.Store(true)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	start := time.Now()
	_, err := a.ws.Claim(cctx, "t", "ha", ttl)
	cancel()
	require.NoError(t, err, "a claim whose reply came after its caller's deadline")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "the reply was slow")
	l, err := b.ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Holder("ha"), l.Holder)
}

// slowConn delays, once armed, the first read after a write that
// contains match, by delay: a reply slow on the wire.
type slowConn struct {
	net.Conn
	armed *atomic.Bool
	match []byte
	delay time.Duration
	slow  atomic.Bool
}

func (c *slowConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, c.match) && c.armed.CompareAndSwap(true, false) {
		c.slow.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *slowConn) Read(p []byte) (int, error) {
	if c.slow.CompareAndSwap(true, false) {
		time.Sleep(c.delay)
	}
	return c.Conn.Read(p)
}

// A run's end and the next run's start in one transaction
// (RunEndThenStart), on a Store that keeps trace lines, whose one round
// trip's reply is lost after the server committed: the call returns
// ErrCommitUnknown, storage's log holds both writes' lines and the Plan
// between them (migration 0012), and the round's Crash learns from it
// that they committed and traces that Plan too before its own line. The
// trace as the fleet merges it (tracecheck.MergeHistories: storage's
// lines, and the process's reads) has the Plan once, and is accepted;
// without the Plan it is not.
func TestRunEndThenStartUnknownWhenReplyLost(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	var armed atomic.Bool
	s, a, rec, doubts := tracedLossyProc(t, &armed)
	// "warm" prepares the fused write's statements on the connection:
	// the round trip armed next is then the one that commits.
	for _, id := range []core.ThreadID{"warm", "t"} {
		require.NoError(t, a.ws.CreateThread(ctx, id))
		for _, m := range []string{"m1", "m2", "m3"} {
			_, err := a.ws.Post(ctx, id, m)
			require.NoError(t, err)
		}
	}
	cw, run := a.startRun(t, "warm", "hw")
	_, next, err := a.ws.RunEndThenStart(ctx, cw, run, "", 0, false)
	require.NoError(t, err)
	require.NotZero(t, next)

	c, run := a.startRun(t, "t", "ha")
	armed.Store(true)
	_, _, err = a.ws.RunEndThenStart(ctx, c, run, "", 0, false)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.False(t, armed.Load(), "the fused write's round trip was sent")
	t.Logf("RunEndThenStart whose reply was lost: %v", err)
	require.NoError(t, a.ws.Crash(ctx, c))

	kept, all, trace := keptAndMerged(t, s, rec, "t", "ha")
	require.Equal(t, []string{"Claim@4", "RunStart@5", "RunEnd@6", "Plan@6", "RunStart@7"}, kept, "storage kept both writes of the fused transaction, and the Plan between them")
	require.Equal(t, []string{"Claim@4", "Plan@4", "RunStart@5", "RunEnd@6", "Plan@6", "RunStart@7", "Crash@7"}, all)
	_, err = tracecheck.Check(trace)
	require.NoError(t, err, "the trace as storage and the process left it")
	require.Len(t, *doubts, 2)
	require.Equal(t, core.Doubt{Proc: "a", Thread: "t", Holder: "ha", Action: core.ActionRunEnd, Tick: 6, Outcome: core.DoubtCommitted, Crashed: true}, (*doubts)[1])
}

// A run's end with the claim's release (RunEndThenStart with release,
// nothing left to plan), on a Store that keeps trace lines, whose one
// round trip's reply is lost after the server committed: storage's log
// holds the RunEnd and the Release, the lease is gone, and the round's
// Crash learns that they committed and traces no line of its own (the
// Release ended the round). The merged trace is accepted.
func TestRunEndThenReleaseUnknownWhenReplyLost(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	var armed atomic.Bool
	s, a, rec, doubts := tracedLossyProc(t, &armed)
	// "warm" prepares the fused write's statements on the connection:
	// the round trip armed next is then the one that commits.
	turn := func(id core.ThreadID, h core.Holder) (core.Claim, core.RunID) {
		require.NoError(t, a.ws.CreateThread(ctx, id))
		_, err := a.ws.Post(ctx, id, "m1")
		require.NoError(t, err)
		return a.startRun(t, id, h)
	}
	cw, run := turn("warm", "hw")
	p, _, err := a.ws.RunEndThenStart(ctx, cw, run, "", 0, true)
	require.NoError(t, err)
	require.Equal(t, core.PlanNothing, p.Kind)

	c, run := turn("t", "ha")
	armed.Store(true)
	_, _, err = a.ws.RunEndThenStart(ctx, c, run, "", 0, true)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.False(t, armed.Load(), "the fused write's round trip was sent")
	require.NoError(t, a.ws.Crash(ctx, c))
	l, err := a.ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Empty(t, l.Holder, "the release committed")

	kept, all, trace := keptAndMerged(t, s, rec, "t", "ha")
	require.Equal(t, []string{"Claim@2", "RunStart@3", "RunEnd@4", "Release@5"}, kept, "storage kept both writes of the fused transaction")
	require.Equal(t, []string{"Claim@2", "Plan@2", "RunStart@3", "RunEnd@4", "Release@5"}, all, "no Crash after the Release")
	_, err = tracecheck.Check(trace)
	require.NoError(t, err, "the trace as storage and the process left it")
	require.Len(t, *doubts, 2)
	require.Equal(t, core.Doubt{Proc: "a", Thread: "t", Holder: "ha", Action: core.ActionRunEnd, Tick: 4, Outcome: core.DoubtCommitted}, (*doubts)[1])
}

// tracedLossyProc is process "a" over a lossyStore (armed) that keeps
// trace lines: it traces to rec and reports its writes in doubt to doubts.
func tracedLossyProc(t *testing.T, armed *atomic.Bool) (s *Store, a *proc, rec *tracecheck.Recorder, doubts *[]core.Doubt) {
	t.Helper()
	s = lossyStore(t, testSchema(t), armed, nil)
	s.keepTrace = true
	rec, doubts = &tracecheck.Recorder{}, &[]core.Doubt{}
	a = newProc(s, "a", core.WithTracer(rec), core.WithDoubts(func(d core.Doubt) { *doubts = append(*doubts, d) }))
	return s, a, rec, doubts
}

// keptAndMerged returns holder's lines on thread as Action@Tick: those
// storage's log kept, and those of the trace the fleet would merge from
// that log and the process's history (rec), with that trace, sorted.
func keptAndMerged(t *testing.T, s *Store, rec *tracecheck.Recorder, thread core.ThreadID, holder core.Holder) (kept, all []string, trace []core.TraceEvent) {
	t.Helper()
	stored, err := s.TraceLines(context.Background())
	require.NoError(t, err)
	for _, l := range stored {
		if l.Thread == thread && l.Holder == holder {
			kept = append(kept, fmt.Sprintf("%s@%d", l.Action, l.Tick))
		}
	}
	trace, lost := tracecheck.MergeHistories(stored, [][]core.TraceEvent{rec.Lines()})
	require.Empty(t, lost)
	tracecheck.Sort(trace)
	for _, l := range trace {
		if l.Thread == thread && l.Holder == holder {
			all = append(all, fmt.Sprintf("%s@%d", l.Action, l.Tick))
		}
	}
	return kept, all, trace
}

// A one-trip Claim decodes its rows by hand, in binary form (sendClaim).
// Rows it cannot decode come back after the server committed the claim:
// Claim returns it with ErrCommitUnknown, as when the reply is lost, and
// the lease is the claim's. Here the events' request column is an
// integer, not the bigint the Store made it, which pgx's scans would
// read and the Claim's decoder refuses.
func TestClaimUnknownWhenRowsDoNotDecode(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	q := pgx.Identifier{s.Schema()}.Sanitize()
	// Before any statement reading the events is prepared: a prepared
	// statement whose result type changed is refused by the server.
	_, err := admin(t).Exec(ctx, `ALTER TABLE `+q+`.events ALTER COLUMN request TYPE integer`)
	require.NoError(t, err)
	a, b := newProc(s, "a"), newProc(s, "b")
	require.NoError(t, a.ws.CreateThread(ctx, "t"))
	_, err = a.ws.Post(ctx, "t", "m1")
	require.NoError(t, err)
	claims := s.stats.oneTripClaims.Load()

	_, err = a.ws.Claim(ctx, "t", "ha", ttl)
	require.ErrorIs(t, err, core.ErrCommitUnknown)
	require.ErrorContains(t, err, "(request) is of type 23")
	require.Equal(t, claims+1, s.stats.oneTripClaims.Load(), "the Claim was the one-trip claim")
	l, err := b.ws.Lease(ctx, "t")
	require.NoError(t, err)
	require.Equal(t, core.Holder("ha"), l.Holder, "the server committed the claim")
	require.Equal(t, "ha", *readRow(t, admin(t), s.Schema(), "t").holder)
}
