// Package postgres is a core.Storage on PostgreSQL, through pgx: the
// storage that runner processes on many machines share. It passes the same
// conformance suite (store/storetest) as the in-memory storage, and its
// own tests run against a real server only.
//
// # Using it
//
// Open connects, creates the schema (Options.Schema, default
// "threadclaim") and applies the migrations embedded in the binary that
// the schema lacks; opening from several processes at once is safe, and a
// schema a newer binary migrated is refused. An empty url is refused
// unless Options.PgxDefaults is set, and a server Open cannot reach is
// reported as a connection failure. The Store is safe for
// concurrent use: give one to each process's core.Workspace, and Close it
// when done.
//
//	st, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), postgres.Options{})
//	if err != nil { ... }
//	defer st.Close()
//	wake, err := st.Wakeups(ctx) // ctx: the one Run gets, or one that outlives it
//	if err != nil { ... }
//	ws := core.NewWorkspace(st, core.SystemClock{}, core.WithProcess(host))
//	r, err := runner.New(runner.Config{Workspace: ws, Agent: agent, Wake: wake})
//
// Wakeups turns each committed post (from any process) that gives work to
// a thread that had none and that nobody holds into a wake-up for
// runner.Config.Wake that names the thread, of
// one of the schema's runners (they share the threads out), so a runner
// claims it soon after the post, with no look for work; wake-ups are
// hints that can be lost, so keep the runner's polling on. The Store
// is a core.EventWatcher: core.Workspace.Follow follows a thread's events
// (a run's output among them) on LISTEN/NOTIFY, and reads the log again
// after a reconnection, so a follower misses nothing. The program
// internal/quickstart is the whole quick start on PostgreSQL. The zero
// Options are a deployment's: KeepTrace is for many-process trace
// validation, LockingReads makes every write read under lock (two round
// trips, for comparison), CachedThreads sizes the cache of folded thread
// states. DropSchema is for throwaway schemas (tests, tracecheck), never a
// deployment; it refuses the schema public and one that holds anything
// the Store did not make.
//
// A transaction takes one of the Store's pooled connections when it first
// reads, sends or prepares a statement, and holds it to its end; a write
// waiting to share another's round trip holds none (one it took to prepare
// a statement it gives back as it waits). The pool is pgxpool's, sized by
// the url's pool_max_conns (default: 4, or the number of CPUs when more).
// A runner of 4 turns that write from the Store's cache needs a connection
// for the round trip in flight and one for a claim or a look beside it: 4
// such runners, each Store with pool_max_conns=2, drained a backlog
// 1.04–1.11× as fast as with the default pool, opening 12 connections
// where they opened 20 (internal/bench/BENCH.md, "Transactions that take a
// connection only when they need one"). More turns want more: runners of
// 16 or 32 turns on pools of 2 mostly fell behind 16 posters (a median
// wait of 0.07–0.58 s), and with 32 turns, and once with 16 on a pool of
// 3, some turns' leases (ClaimTTL 2s) lapsed to another runner; 16 turns
// on the default pool drained 1.3× as fast as 4 ("Sixteen turns a
// runner").
// Turns that read under lock (LockingReads, or threads the cache does not
// hold) hold a connection each while they read: give such a runner's Store
// its MaxConcurrentTurns + TakeoverTurns + 1, or its turns wait for a
// connection.
//
// A write whose commit outcome the client cannot know (the connection
// broke, or the session was ended, after COMMIT was sent) returns an error
// wrapping core.ErrCommitUnknown: the caller must take its claim as lost
// and never retry the write under the same holder (the runner does so).
// A cancelled context stops a statement on the server first, so a write
// cancelled while it waits for a lock is known to have rolled back.
// PostgreSQL keeps microseconds: event times are truncated to them, and a
// lease's expiry is rounded up to them (a claim never lapses earlier than
// asked; core.Workspace makes its leases' times whole microseconds
// already, so that the expiry a takeover reads back is the one traced).
//
// # How it keeps the fence
//
// A thread is one row of the threads table, and its lease lives on that
// row. Every write locks the row first, so all writes on a thread
// serialise, and HoldsLease, read under that lock, stays true until the
// transaction ends: another holder's acquire waits for a fenced write to
// commit or roll back, and then sees it. No clock is read to decide the
// fence. Update runs in a READ COMMITTED transaction, which is enough
// because every path that writes locks what it reads; View runs the reads
// (Plan, a look at a thread) in one REPEATABLE READ READ ONLY snapshot
// that takes no row locks, so a read neither waits behind a fenced write
// nor holds an acquire up.
//
// While the Store holds a thread's lease, a write decides from the state
// its own last transaction left (a cache of folded thread states) and is
// sent as one autocommitted SQL statement: the thread row's UPDATE with
// the whole check, row version and lease, in its WHERE, and the event's
// insert as a WITH. If anyone else wrote the row, the check fails and the
// write runs again reading under lock, as core.Storage allows. A consuming
// write is so one round trip, and costs the same whatever the thread's
// size (BENCH.md, "A long thread"). The writes of a Store's several turns
// that are ready while one is in flight go together in its next round
// trip and share one commit, each still checked and fenced in its own
// statement by its own thread's holder (DESIGN.md, "Several threads'
// writes in one round trip"). A Claim, which must read another
// holder's lease, is one too: one statement decides it in the server and writes it (the row
// locked, the lease compared with the claimant's clock), sent with the
// read of the thread's new events as one implicit transaction. With
// Options.KeepTrace it is two, the second COMMIT with the Claim's trace
// line.
//
// A holder names one claim: the holders table's primary key refuses a
// holder's second acquire of a thread (core.ErrHolderReused). A post that
// gives a free thread work where it had none, and a Release that leaves
// work, NOTIFY the channel of the thread's wake-up
// shard (Options.Schema+".p" and a number below 64, a hash of the
// thread's id) inside their transaction, so a wake-up is sent only for
// what committed;
// a write to a thread that WatchEvents follows NOTIFYs
// Options.Schema+".events" with its thread (a trigger whose WHEN reads the
// thread row's followed_until, migration 0008), and a write to a thread
// nobody follows notifies nothing.
//
// The schema, the lock order, the statement, the cache and the commit
// outcomes are described in store/postgres/DESIGN.md, and the benchmarks'
// figures, each with its command, in store/postgres/BENCH.md.
package postgres
