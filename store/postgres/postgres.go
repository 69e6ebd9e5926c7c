package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/threadclaim/threadclaim/core"
)

var (
	_ core.Storage      = (*Store)(nil)
	_ core.EventWatcher = (*Store)(nil)
)

// Options configures a Store.
type Options struct {
	// Schema is the PostgreSQL schema that holds the tables; Open creates
	// it. Default "threadclaim". At most 55 bytes, since the wake-up
	// channels' names are Schema + ".posted" and Schema + ".p" and a
	// shard's number, and PostgreSQL names stop at 63. Not
	// information_schema nor a pg_ name: those are PostgreSQL's own. Valid
	// UTF-8 with no NUL byte. Open refuses any other name, before it
	// connects, with an error wrapping core.ErrInvalidArgument.
	Schema string

	// CachedThreads is how many threads' folded states the Store keeps
	// between transactions, so that a write reads only the events appended
	// since (see the package comment). Default 4096; negative keeps none.
	// A thread's state is its whole history: about 210 to 260 bytes for
	// each run and its prompt, with their texts besides
	// (BenchmarkLongThread).
	CachedThreads int

	// KeepTrace makes each write's trace line (core.TraceLog) an insert
	// into the trace_lines table, in the write's own transaction, when the
	// Workspace traces. TraceLines reads them back. Default off: a
	// deployment has no use for it; a many-process trace validation does,
	// since a process killed after its commit never writes its own line.
	KeepTrace bool

	// LockingReads makes every write transaction lock the rows it reads
	// with its first round trip, and decide from what the server sent
	// back: two round trips for a write. Default off: while this Store
	// holds a thread's lease, a write decides from the cached state and
	// sends the check that the thread is unchanged with the write itself,
	// one round trip (see the package comment). Either way the same
	// writes commit.
	LockingReads bool

	// PgxDefaults lets Open take an empty url as pgx's defaults (the PG*
	// environment variables, else the local socket as the current user).
	// Default off: Open refuses an empty url, which is most often an
	// unset variable (DATABASE_URL) rather than a choice.
	PgxDefaults bool
}

const maxSchemaLen = 55

func (o Options) withDefaults() Options {
	if o.Schema == "" {
		o.Schema = "threadclaim"
	}
	if o.CachedThreads == 0 {
		o.CachedThreads = 4096
	}
	return o
}

func (o Options) validate() error {
	if err := core.CheckText("schema name", o.Schema); err != nil {
		return err
	}
	switch {
	case len(o.Schema) > maxSchemaLen:
		return fmt.Errorf("%w: schema name %q is longer than %d bytes", core.ErrInvalidArgument, o.Schema, maxSchemaLen)
	case o.Schema == "information_schema" || strings.HasPrefix(o.Schema, "pg_"):
		return fmt.Errorf("%w: schema name %q is PostgreSQL's own (information_schema, pg_*): give the Store a schema of its own", core.ErrInvalidArgument, o.Schema)
	}
	return nil
}

// Store is a core.Storage on PostgreSQL. It is safe for concurrent use.
// Open makes one: the zero Store has no pool, and its calls panic.
// Close may be called more than once.
type Store struct {
	pool    *pgxpool.Pool
	schema  string
	channel string // the NOTIFY channel of wake-ups before their shards (older binaries' posts)
	shards  string // a wake-up shard's channel: shards and the shard's number (wakeChannel)
	control string // the channel a Wakeups listener is nudged on to LISTEN again (watchShare)
	q       queries

	keepTrace bool
	speculate bool // a write may decide from the cache (not LockingReads)
	// readPost: a post reads the thread first, as before PostMessage (a
	// benchmark's before).
	readPost bool
	// readClaim: a Claim reads the thread first, as before ClaimLease (a
	// benchmark's before).
	readClaim bool
	// claimBegins: a Claim decided in the server begins a transaction
	// and commits it in a second round trip, as before the one-trip
	// Claim (a benchmark's before).
	claimBegins bool
	// noClaimStart: ClaimLeaseThenStart starts no run, as before a
	// Claim's statements could (a benchmark's before).
	noClaimStart bool
	// wakeAll: Wakeups wakes for every thread, as before the listeners
	// shared the threads out (a benchmark's before).
	wakeAll bool
	// tripsAlone: every one-trip write is sent on its own, as before the
	// Store's trips carried several in one round trip (a benchmark's
	// before).
	tripsAlone bool
	// tripsSynced: the writes that share a round trip each commit on
	// their own, behind a Sync of their own, as before they shared a
	// transaction (a benchmark's before).
	tripsSynced bool

	mu       sync.Mutex
	cache    map[core.ThreadID]*cacheEntry
	cacheCap int

	stats stats

	hub eventHub // WatchEvents' shared listener

	closed atomic.Bool // Close was called: Listen and Wakeups refuse

	trips trips // the one-trip writes waiting to be sent, and whether some are in flight

	pendingLen atomic.Int64 // how many threads PendingThreads listed last
	sds        sync.Map     // sql -> *pgconn.StatementDescription, as prepared on any connection

	// txns are transactions' values, reused: a write allocates little.
	// A txn holds nothing that outlives its transaction (the cache
	// entries it leaves are allocated apart); fn is given a handle of its
	// own to it, which refuses every call once its attempt has ended.
	txns sync.Pool
}

// stats counts what the Store asked of the server, for the benchmarks'
// per-message figures.
type stats struct {
	roundTrips    atomic.Int64 // batches sent and waited for
	transactions  atomic.Int64 // transactions attempted (a retried one counts twice), and polls
	conflicts     atomic.Int64 // speculating transactions whose check failed
	tripWrites    atomic.Int64 // one-trip writes sent (trips.go)
	tripSends     atomic.Int64 // the round trips that carried them
	tripGroups    atomic.Int64 // the round trips that carried several in one transaction
	serverClaims  atomic.Int64 // Claims decided in the server (ClaimLease)
	oneTripClaims atomic.Int64 // of those, Claims that were their transaction's one round trip
	notices       atomic.Int64 // notifications the Store's listening connections read
}

// Open connects to the database url names (a PostgreSQL URL or keyword/value
// string, as pgx parses it), creates the schema and applies the migrations
// it lacks. Close the Store when done. It refuses, with an error wrapping
// core.ErrInvalidArgument and before it connects, a nil ctx, an empty url
// unless opts.PgxDefaults is set, a url that does not parse, and the
// Options that Options' comments refuse. An error says which step failed:
// parsing the url, connecting to the server ("postgres: connect to
// host:port"), or migrating the schema.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	switch {
	case ctx == nil:
		// pgxpool would panic on it in a goroutine of its own, where
		// no caller can recover: the process died.
		return nil, fmt.Errorf("postgres: %w: Open given a nil context", core.ErrInvalidArgument)
	case url == "" && !opts.PgxDefaults:
		return nil, fmt.Errorf("postgres: %w: empty database url (is DATABASE_URL set?); set Options.PgxDefaults to use pgx's defaults", core.ErrInvalidArgument)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse database url: %w: %w", core.ErrInvalidArgument, err)
	}
	return open(ctx, cfg, opts)
}

func open(ctx context.Context, cfg *pgxpool.Config, opts Options) (*Store, error) {
	cfg.ConnConfig.BuildContextWatcherHandler = cancelRequest
	return openPool(ctx, cfg, opts)
}

// cancelRequest is what a connection does when the context of a statement
// in flight ends: it asks the server to cancel the statement (a cancel
// request on a connection of its own), and gives the server cancelWait
// to answer before it closes the connection. The backend stops waiting
// (for a row lock, say) at once, and the statement fails with an ERROR
// the client reads, so a round trip that carried COMMIT and was cancelled
// in a lock wait is known to have rolled back, and the connection is
// kept. pgx's default closes the connection at once (sending a cancel
// request on its way out): the client then cannot tell whether COMMIT
// ran, and reports core.ErrCommitUnknown for a write that never got its
// lock.
func cancelRequest(c *pgconn.PgConn) ctxwatch.Handler {
	return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelWait}
}

// cancelWait is how long a cancelled statement's connection waits for the
// server's answer to the cancel request before it is closed.
const cancelWait = 5 * time.Second

// openPool opens a Store on cfg as it is.
func openPool(ctx context.Context, cfg *pgxpool.Config, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	if err := migrate(ctx, pool, opts.Schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: migrate schema %q: %w", opts.Schema, err)
	}
	s := &Store{
		pool:      pool,
		schema:    opts.Schema,
		channel:   opts.Schema + ".posted",
		shards:    opts.Schema + ".p",
		control:   opts.Schema + ".w",
		q:         newQueries(pgx.Identifier{opts.Schema}.Sanitize()),
		cache:     map[core.ThreadID]*cacheEntry{},
		cacheCap:  max(opts.CachedThreads, 0),
		keepTrace: opts.KeepTrace,
		speculate: !opts.LockingReads && opts.CachedThreads > 0,
		trips:     trips{yields: gatherYields, patience: gatherPatience},
	}
	s.txns.New = func() any {
		return &txn{threads: map[core.ThreadID]*txThread{}, leases: map[core.ThreadID]core.Lease{}}
	}
	return s, nil
}

// Close closes the Store's connections: the pool's, and the one
// WatchEvents' watchers share (they get no more notices). Transactions
// still running fail, and so do later calls; Listen and Wakeups refuse
// (errStoreClosed). A Listen or Wakeups channel made before it goes on
// until its context ends.
func (s *Store) Close() {
	s.closed.Store(true)
	s.hub.close()
	s.pool.Close()
}

// errStoreClosed is the error of WatchEvents, Listen and Wakeups once
// the Store is closed.
var errStoreClosed = errors.New("postgres: the store is closed")

// Schema returns the schema the Store's tables are in.
func (s *Store) Schema() string { return s.schema }

// Update runs fn in one READ COMMITTED transaction on one connection and
// commits it when fn returns nil. Every write path locks the rows it
// reads (see the package comment), so the isolation level is enough.
//
// When fn returns an error, the transaction is rolled back and Update
// returns fn's error unchanged. When the commit fails and the server said
// so (an ERROR), nothing was kept and Update returns that error, wrapped.
// When the connection broke, or the server ended the session, after
// COMMIT was sent, the transaction may or may not have committed: Update
// returns an error wrapping core.ErrCommitUnknown. Other failures of the
// server or the connection are returned wrapped.
//
// tx is fn's only while fn runs: once fn's attempt has ended (Update
// returned, or the Store runs fn again), every method of a tx fn kept
// returns an error wrapping core.ErrInvalidArgument, and sends nothing to
// the server, even though the Store reuses the transaction's value for a
// later one; KeepsTrace, which returns no error, returns false. A fn that
// panics has its transaction rolled back, and the panic goes on.
func (s *Store) Update(ctx context.Context, fn func(ctx context.Context, tx core.Transaction) error) error {
	return s.run(ctx, false, fn)
}

var _ core.Viewer = (*Store)(nil)

// View runs fn in one REPEATABLE READ READ ONLY transaction: fn reads one
// snapshot and takes no row locks, so a Plan or a look at a thread neither
// waits for a thread's writes nor holds them up. A write fn tries fails.
// A tx kept past View's return is refused as one kept past Update's.
func (s *Store) View(ctx context.Context, fn func(ctx context.Context, tx core.Transaction) error) error {
	err := s.run(ctx, true, fn)
	if errors.Is(err, core.ErrCommitUnknown) {
		// Nothing was written, so nothing is unknown: a plain failure.
		return fmt.Errorf("postgres: read-only transaction lost its connection: %v", err)
	}
	return err
}

// run runs fn in one transaction on one connection, read-only or not, and
// commits it when fn returns nil. The connection is taken from the pool
// when the transaction first needs one (txn.need): a write that goes in
// a shared round trip from the Store's cache, with no read, never holds
// one while it waits (trips), so the connections a runner opens are the
// ones its round trips use, not one a turn.
func (s *Store) run(ctx context.Context, readOnly bool, fn func(ctx context.Context, tx core.Transaction) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	speculate := s.speculate
	t := s.txns.Get().(*txn) // no connection: run's end leaves none on it
	defer func() {
		// Release destroys a connection left inside a transaction or
		// broken, which also ends the transaction on the server.
		if t.held != nil {
			t.held.Release()
		}
		t.held, t.conn = nil, nil
		s.txns.Put(t)
	}()
	postReads := false
	for {
		t.reset(s, t.conn, readOnly, speculate)
		t.postReads = postReads
		err := t.attempt(ctx, fn)
		s.stats.transactions.Add(1)
		if t.conflict {
			s.stats.conflicts.Add(1)
		}
		if speculate && t.retry(err) {
			// What fn read from the cache was stale, and nothing of it
			// was kept: run fn again, reading from the server.
			s.distrust(t.assumed)
			speculate = false
			continue
		}
		if !postReads && errors.Is(err, errPostBehind) {
			postReads = true
			continue
		}
		if err == nil {
			s.remember(t)
		}
		return err
	}
}

// attempt runs fn in t and commits. fn is given a handle of its own,
// ended when attempt returns (or panics): a tx fn keeps is refused after.
func (t *txn) attempt(ctx context.Context, fn func(ctx context.Context, tx core.Transaction) error) error {
	h := t.newHandle()
	defer h.over.Store(true)
	if err := fn(ctx, h); err != nil {
		t.rollback(ctx)
		return err
	}
	if t.err != nil {
		t.rollback(ctx)
		return fmt.Errorf("postgres: a statement of the transaction failed: %w", t.err)
	}
	return t.commit(ctx)
}

// commitError classifies an error from the round trip that carried
// COMMIT. The server's ERROR (a constraint, a serialisation failure, a
// statement before COMMIT that failed) means the transaction was rolled
// back. An error that says nothing was sent means the same. Anything else
// (the connection broke, the context ended while waiting for the reply,
// the server ended the session with FATAL) leaves the outcome unknown.
func commitError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Severity == "ERROR" {
		if reused := holderReused(pgErr); reused != nil {
			return reused
		}
		return fmt.Errorf("postgres: commit: %w", err)
	}
	if pgconn.SafeToRetry(err) {
		return fmt.Errorf("postgres: commit not sent: %w", err)
	}
	return fmt.Errorf("postgres: %w: %w", core.ErrCommitUnknown, err)
}

// holderReused returns core.ErrHolderReused, wrapped, when pgErr is the
// holders table refusing a holder's second acquire (migration 0005).
func holderReused(pgErr *pgconn.PgError) error {
	const uniqueViolation = "23505"
	if pgErr.Code != uniqueViolation || pgErr.ConstraintName != "holders_pkey" {
		return nil
	}
	return fmt.Errorf("postgres: %s: %w", pgErr.Detail, core.ErrHolderReused)
}

// remember keeps the thread states a committed transaction left, for the
// next transactions to fold from.
func (s *Store) remember(t *txn) {
	if s.cacheCap == 0 || len(t.threads) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, th := range t.threads {
		old, had := s.cache[id]
		if had && old.created == th.created && old.state.Version > th.state.Version {
			continue // a later transaction already left a newer state
		}
		l, known := t.leases[id]
		e := th.entry(l, known)
		if had && e == old {
			continue
		}
		if !had && len(s.cache) >= s.cacheCap {
			for victim := range s.cache { // evict one, arbitrarily
				delete(s.cache, victim)
				break
			}
		}
		s.cache[id] = e
	}
}

// distrust keeps the cache from speculating again on threads whose check
// failed, until a transaction that read them from the server commits.
func (s *Store) distrust(as []assumption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range as {
		if e, ok := s.cache[core.ThreadID(a.id)]; ok && e.ownLease && !e.distrusted {
			// The same state and append rights, not to be speculated on.
			s.cache[core.ThreadID(a.id)] = &cacheEntry{created: e.created, n: e.n, last: e.last, state: e.state, lease: e.lease,
				ownLease: true, distrusted: true, cow: e.cow}
		}
	}
}

// forget drops the thread's cache entry c, which is ahead of storage.
func (s *Store) forget(id core.ThreadID, c *cacheEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache[id] == c {
		delete(s.cache, id)
	}
}

func (s *Store) cached(id core.ThreadID) *cacheEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cache[id]
}

// queries are the Store's statements, with the schema's name quoted in.
type queries struct {
	names                                         map[string]string // a name for each statement, to prepare it under
	soft                                          map[string]string // a checked statement's twin that returns its failed check (softCheck)
	lockThread, lockLease, eventsAfter, allEvents string
	readThread, readLease, logLength              string
	createThread, threadIDs, saveThread           string
	saveThreadLease                               string
	insertEvent, notify, notifyFree               string
	putLease, deleteLease                         string
	insertTrace, traceLines, traceLine, pending   string
	unchanged, saveUnchanged, saveLease, acquired string
	saveEventLease                                string
	follow                                        string // WatchEvents' mark of a followed thread
	post                                          string // a post in one statement (PostMessage)
	claim                                         string // a Claim decided in the server (ClaimLease)
}

func newQueries(schema string) queries {
	f := func(q string) string { return fmt.Sprintf(q, schema) }
	const eventCols = `seq, version, kind, at, message, text, run, request, holder`
	q := queries{
		lockThread:   f(`SELECT created, version, taken FROM %s.threads WHERE id = $1 FOR UPDATE`),
		lockLease:    f(`SELECT holder, expires_at FROM %s.leases WHERE key = $1 FOR UPDATE`),
		readThread:   f(`SELECT created, version, taken FROM %s.threads WHERE id = $1`),
		logLength:    f(`SELECT log_n FROM %s.threads WHERE id = $1`),
		readLease:    f(`SELECT holder, expires_at FROM %s.leases WHERE key = $1`),
		eventsAfter:  f(`SELECT ` + eventCols + ` FROM %s.events WHERE thread_id = $1 AND seq > $2 ORDER BY seq`),
		allEvents:    f(`SELECT ` + eventCols + ` FROM %s.events WHERE thread_id = $1 ORDER BY seq`),
		createThread: f(`INSERT INTO %s.threads (id) VALUES ($1) ON CONFLICT (id) DO NOTHING RETURNING created`),
		threadIDs:    f(`SELECT id FROM %s.threads ORDER BY created`),
		saveThread: f(`UPDATE %s.threads SET version = $2, taken = $3, last_message = $4, active_runs = $5,
			log_n = $6, log_at = $7 WHERE id = $1`),
		saveThreadLease: f(`UPDATE %s.threads SET version = $2, taken = $3, last_message = $4, active_runs = $5,
			log_n = $6, log_at = $7, lease_holder = $8, lease_expires = $9 WHERE id = $1`),
		insertEvent:    f(`INSERT INTO %s.events (thread_id, ` + eventCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`),
		notify:         `SELECT pg_notify($1, $2)`,
		notifyFree:     f(`SELECT pg_notify($1, $2) FROM %s.threads WHERE id = $3 AND (lease_holder IS NULL OR lease_expires <= now())`),
		putLease:       f(`UPDATE %s.threads SET lease_holder = $2, lease_expires = $3 WHERE id = $1`),
		deleteLease:    f(`UPDATE %s.threads SET lease_holder = NULL, lease_expires = NULL WHERE id = $1`),
		insertTrace:    f(`INSERT INTO %s.trace_lines (thread_id, tick, read, line) VALUES ($1, $2, $3, $4)`),
		traceLines:     f(`SELECT line FROM %s.trace_lines ORDER BY thread_id, tick, read`),
		traceLine:      f(`SELECT line FROM %s.trace_lines WHERE thread_id = $1 AND tick = $2 AND NOT read`),
		pending:        fmt.Sprintf(pendingQuery, schema),
		unchanged:      f(checkedSQL),
		saveUnchanged:  fmt.Sprintf(checkedWriteSQL, schema, ""),
		saveLease:      f(checkedLeaseSQL),
		saveEventLease: fmt.Sprintf(checkedWriteSQL, schema, writeLeaseSet),
		acquired:       f(`INSERT INTO %s.holders (key, holder) VALUES ($1, $2)`),
		post:           fmt.Sprintf(postSQL, schema),
		claim:          fmt.Sprintf(claimSQL, schema),
		follow:         f(`UPDATE %s.threads SET followed_until = greatest(followed_until, now() + make_interval(secs => $2)) WHERE id = $1`),
	}
	q.names = map[string]string{}
	for i, sql := range []string{q.unchanged, q.saveUnchanged, q.insertEvent, q.notify,
		q.saveThread, q.putLease, q.deleteLease, q.acquired, q.insertTrace, q.saveLease, q.saveThreadLease, q.notifyFree,
		q.claim, q.eventsAfter, q.saveEventLease} {
		q.names[sql] = "tc_" + strconv.Itoa(i)
	}
	q.soft = map[string]string{}
	hard := fmt.Sprintf(hardCheck, schema)
	for i, sql := range []string{q.unchanged, q.saveUnchanged, q.saveLease, q.saveEventLease} {
		if !strings.HasSuffix(sql, hard) {
			panic("postgres: a checked statement does not end with its check: " + sql)
		}
		soft := strings.TrimSuffix(sql, hard) + softCheck
		q.soft[sql] = soft
		q.names[soft] = "tc_soft_" + strconv.Itoa(i)
	}
	return q
}

// name returns the name the statement sql is prepared under.
func (q *queries) name(sql string) string { return q.names[sql] }

// PostgreSQL keeps microseconds. Event times are truncated to them before
// they are written, so a transaction reads its own writes as a later one
// reads them; a lease's expiry is rounded up, so it never lapses earlier
// than its claimant asked.
func eventTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func leaseExpiry(t time.Time) time.Time {
	r := t.UTC().Truncate(time.Microsecond)
	if r.Before(t) {
		r = r.Add(time.Microsecond)
	}
	return r
}
