// Package postgres is a core.Storage on PostgreSQL, through pgx: the
// storage a deployment with many runner processes on many machines shares.
// It passes the same conformance suite (store/storetest) as the in-memory
// storage, and its own tests run against a real server only.
//
// # Schema
//
// Open creates the schema named by Options.Schema (default "threadclaim")
// and applies the migrations embedded in the binary (migrations/NNNN_*.sql)
// that schema_migrations does not list, in one transaction holding an
// advisory lock on the schema's name: opening twice, or from several
// processes at once, applies each migration once. A schema a newer binary
// migrated is refused. The tables:
//
//	threads  (id, created, version, taken, last_message, active_runs)
//	         one row per thread; created (an identity) is the creation
//	         order; taken is the thread's taken cursor; last_message and
//	         active_runs, kept by every write, are what a poll reads
//	events   (thread_id, seq, version, kind, at, message, text, run,
//	         request, holder)                the append-only log, seq 1, 2, ...
//	messages (thread_id, seq, text, posted_at)  written with each message_posted
//	leases   (key, holder, expires_at)       claims; a thread's key is its id
//	trace_lines (thread_id, tick, line)      committed writes' trace lines,
//	         only with Options.KeepTrace (many-process trace validation)
//	holders  (key, holder)                   every holder that acquired a
//	         lease, once: holder freshness (below)
//
// and the functions unchanged, unchanged_save and unchanged_save_event
// (migration 0004), the check a write decided from the cache sends with
// itself (below).
//
// Every statement is parameterised; the schema's name, the one thing that
// is not a parameter, is quoted with pgx.Identifier.
//
// # Transactions and the lock order
//
// Update runs fn in one READ COMMITTED transaction. That is enough because
// every path that writes locks what it reads first:
//
//  1. the thread's row, SELECT ... FOR UPDATE: Thread, Events, Bump,
//     Append and SaveTaken lock it, so all writes on a thread serialise;
//  2. then the lease's row, SELECT ... FROM leases WHERE key = $1 FOR
//     UPDATE: Lease, HoldsLease, PutLease and DeleteLease lock it, after
//     the row of the thread whose id is the key.
//
// Thread row, then lease row, always; a transaction that touches two
// threads (the Workspace never does) has no order between them. Because
// the thread row comes first, an acquire serialises with a fenced write
// even while the lease has no row yet (a thread never claimed, or
// released). A lease key that names no thread and has no row is not
// locked: the Workspace never uses one.
//
// Thread locks the thread's row and its lease's row in one round trip (a
// pipelined batch that runs in that order), with the events appended since
// the state the Store last saw; the Workspace's later Lease or HoldsLease
// answers from that lock. Writes (Bump, Append, SaveTaken, PutLease,
// DeleteLease) are queued and sent with the transaction's next read or
// with COMMIT, in one round trip: the rows they touch are locked already,
// and the transaction reads its own writes from the state it holds. Read
// so, a RunStart is two round trips: [BEGIN, lock thread, lock lease, new
// events] and [insert event, update thread, COMMIT]. That is how every
// write reads with Options.LockingReads, and how a write reads a thread
// whose lease this Store does not hold (a Claim, a Post).
//
// # One round trip: a write decided from the cache
//
// While this Store holds a thread's lease — it wrote the lease for its
// holder, and its cache has the state and lease its own last transaction
// on the thread left — the Store expects no other process to write the
// thread, and a write transaction reads the thread and its lease from the
// cache, with no round trip. What fn then writes goes out in one pipeline
// of prepared statements with the check in front (fastpath.go):
//
//	BEGIN
//	SELECT unchanged_save_event(thread, created, version, holder, expiry,  -- the check
//	       new version, taken, last_message, active_runs,                  -- the row
//	       the event's columns)                                            -- the event
//	COMMIT
//
// unchanged() locks the thread's row and then its lease's row, the order
// every write locks them, and raises SQLSTATE TC001 unless the thread is
// the same one (created) at the version the cache had, under the same
// lease (holder and expiry). The error aborts the transaction before any
// of its writes ran. Passed, the rows stay locked to COMMIT, and every
// decision fn made from the cache is the one it would have made reading
// them under lock at that moment: the fence (HoldsLease) included, so a
// fenced write and another holder's acquire still serialise on those
// rows, with the same outcomes. When the check fails, or fn returned an
// error decided from the cache before anything was sent (a refusal must
// be read from the server), fn runs again with locking reads: a storage
// may call fn more than once (core.Storage's contract), and nothing of
// the first run was kept. A failed check costs one round trip more; the
// runner benchmark counts them (conflicts/msg). Statements other than the
// common ones (a message's insert and NOTIFY, a lease's, a trace line)
// are sent as their own statements in the same pipeline.
//
// A read-only transaction (View) sends COMMIT with its first round trip:
// reading a thread is one round trip. A View whose fn needs a second is
// run again in a transaction that stays open, so that its reads share one
// snapshot.
//
// Transactions' values and the argument buffer are reused: a consuming
// write makes 26 allocations and 2.2 KB, whatever the thread's size.
//
// View (core.Viewer) runs the Workspace's reads (Plan, Thread, Lease,
// Crash) in a REPEATABLE READ READ ONLY transaction with the same queries
// less FOR UPDATE: one snapshot, no row locks, so a read neither waits
// behind a fenced write nor holds an acquire up. PendingThreads, a poll
// for work, is one unlocked statement.
//
// # The fence is the row lock
//
// HoldsLease(key, holder) is true when the lease row this transaction has
// locked names holder, expired or not: no clock is read. Until the
// transaction ends no other transaction can change that row, nor create it
// (that needs the thread row first), so another holder's acquire waits for
// the fenced write to commit or roll back, and then sees it. A fenced write
// that finds another holder writes nothing (core returns ErrThreadBusy and
// the transaction rolls back).
//
// # The thread's state
//
// Thread returns the fold of the thread's events (core.Thread.Apply) with
// version and taken from its row. Folding the whole log on every write
// would cost O(events) (the fenced-nocache row below); instead the Store
// keeps the state each committed transaction left (Options.CachedThreads
// of them) and a transaction folds onto it only the events whose seq is
// past it, read under the thread's row lock, or, speculating, trusts it
// as far as unchanged() confirms. Transactions share a cached state
// without copying it (cache.go): a write copies the header it changes,
// and appends to a slice in place only when it wins that slice's append
// right, an atomic flag shared by every state that ends at the same
// place of the same array; it copies a slice whose elements it changes
// (an ended run, an answered request) or whose right it lost. A write's
// cost is then O(1) in the thread's size, with no lock held.
//
// PostgreSQL keeps microseconds: event times are truncated to them before
// they are written, a lease's expiry is rounded up to them (a claim never
// lapses earlier than asked), and times read back are in UTC.
//
// # Commit outcomes
//
// When fn returns an error the transaction is rolled back and Update
// returns that error. When COMMIT fails with the server's ERROR (a
// constraint, or a statement sent with it), the transaction was rolled
// back: Update returns the error. When the connection breaks after COMMIT
// was sent, or the context ends while Update waits for its reply, or the
// server ends the session (FATAL, as pg_terminate_backend does), the
// transaction may have committed or not, and nothing the client holds can
// tell: Update returns an error wrapping core.ErrCommitUnknown. The
// caller must take its claim as lost and never retry the write under the
// same holder: if it did commit, the retry would consume a message twice;
// the next claimant abandons whatever run did start. The tests provoke
// both cases for real: a backend terminated while its COMMIT waits on a
// lock (it had not committed), and a reply dropped after the server
// committed (it had). A round trip handed to the connection that fails
// with anything but the server's ERROR is unknown, whatever pgx calls it
// (a connection pgconn closed while reading the reply says "conn closed",
// which it deems safe to retry).
//
// When the context of a statement in flight ends, the Store's connections
// send the server a cancel request and wait for its answer (pgconn's
// CancelRequestContextWatcherHandler) rather than closing the connection
// at once, pgx's default: a write cancelled while it waits for a row lock
// stops waiting on the server, fails with an ERROR, and is known to have
// rolled back, and the connection is kept. With the default it is
// reported ErrCommitUnknown (tested both ways: TestCancelledLockWait*).
//
// # Holder freshness
//
// A holder names one claim. A lease written for a holder other than the
// one that had it (an acquire) inserts (key, holder) into holders in the
// same transaction; the primary key refuses the same holder's second
// acquire of that key, and the Store returns core.ErrHolderReused (which
// wraps core.ErrInvalidArgument). Without it a caller that reused a
// holder across claims would pass a later claim's fence with a round it
// left behind: storetest.ReuseHolder plays that through the public API,
// and the mutant with the key dropped consumes a message twice
// (TestReuseHolderMutant). Migration 0005 fills holders from the leases
// and the fenced events of an older schema.
//
// # Wake-ups
//
// A message's post NOTIFYs the channel Schema+".posted" with the thread's
// id, inside its transaction, so the notification is sent only if it
// commits. Listen delivers them over a connection of its own; a runner
// uses it to start soon after a post, and polls as well.
//
// # Measured
//
// On a 2-CPU machine shared with other work, PostgreSQL 15 from
// scripts/with-postgres (unix socket, fsync=off). These were measured on
// 2026-12-01 while the machine's load average stood at 27-38 (eight
// sessions' builds and tests): times are up to 10x slower than on the
// same machine idle, and vary by ±60-170% between runs. Allocations do
// not vary; the times are to be read as ratios at best, and measured
// again on a quiet machine.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench ConsumingWrite -benchtime 1000x -count 6 > bench.txt
//	benchstat -col /write bench.txt
//
//	write (RunStart, thread of ≤ 256 runs)   time/op (median)   allocs  bytes
//	fenced: one round trip (default)         1,599 µs ± 161%        26  2.0 KB
//	unfenced (fences off)                    4,144 µs ± 41%         26  2.0 KB
//	fenced-locking: two round trips          5,150 µs ± 25%        132  5.4 KB
//	fenced-nocache: whole log folded         6,907 µs ± 57%        674  106 KB
//	update-tx: BEGIN; one UPDATE; COMMIT       827 µs ± 174%         8  226 B
//	update: one autocommitted UPDATE           969 µs ± 64%          4  138 B
//
// Those medians cannot carry a ratio at this noise (fenced is below
// unfenced, which runs the same statements). BenchmarkConsumingWritePaired
// alternates a fenced RunStart and an autocommitted UPDATE of the thread
// row op by op, so that both meet the same load:
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench ConsumingWritePaired -benchtime 1000x -count 6
//
//	fenced/update (medians of each run's ops): 2.06, 0.94, 1.80, 2.08, 2.63, 2.13
//	(median 2.07; 1.70-1.95 in three earlier runs of 3,000 ops)
//
// So the target of 1.3 is not shown: the write is one round trip (and one
// statement between BEGIN and COMMIT), but it is three statements to the
// UPDATE's one, a plpgsql call that locks two rows, updates one and
// inserts one, and several times the client's CPU (the Workspace, the
// fold, the encoding); on two CPUs this loaded, CPU is what a write
// waits for. The earlier, two-round-trip write measured on the idle
// machine: fenced 160 µs, unfenced 160 µs, BEGIN/UPDATE/COMMIT 135 µs,
// UPDATE 56 µs (2.8x).
//
// Fenced and unfenced cost the same because the Workspace calls
// HoldsLease whether or not the fence is on (it traces the lease seen).
//
// # Figures: runners on PostgreSQL
//
// Whole runner.Runners, each as a process would be (its own Store and
// pool, its own Workspace on the system clock, Wake from its own
// Wakeups), a trivial agent, ClaimTTL 2s, 4 runners over 100 threads,
// messages posted round-robin by 4 posters; same machine, same load as
// above:
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench RunnerThroughput -benchtime 2s -count 2
//
//	reads        msgs/s      round trips/msg  transactions/msg  failed checks/msg
//	speculative  242, 237    8.0, 8.7         7.0, 7.5          0.016
//	locking      209, 168    14.6, 15.5       7.3, 7.8          0
//
// (the round trips and transactions are the runners' Stores', polls
// included; the poster's Post is 2 round trips, since it never holds the
// lease.) The same benchmark on main's code in the same hour gave 37-253
// msgs/s; on the idle machine it gave 2,430. Post to start, wake-ups,
// 100 threads, 4 runners (-bench 'RunnerLatency/wake=notify/threads=100/runners=4'):
// p99 34-41 ms under this load (3.2-4.0 ms idle, before this change).
//
// What bounds the throughput is the round trips a message costs, each a
// wait for the server on two CPUs the runners, the posters and every
// backend share: a runner works its turns one at a time, so four runners
// have at most four transactions in flight. Per consumed message a runner
// now makes: Claim 2 (a Claim reads the lease from the server: the cache
// cannot know another runner's), Plan 1, RunStart 1, two re-reads of the
// thread 2 (the run's PostedAt and the agent's prompt), RunEnd 1, Plan 1,
// Release 1: 9, less when a turn consumes several messages; and each post
// wakes all four runners, which each poll (1) and the three that lose
// the claim spend 2 more on it. What the runner can do (issue 8 item 9 and
// issue 12 item 2; the runner engineer's): drop the two re-reads (RunStart
// or Plan can return the message): -2; end a turn without its last Plan
// when the plan before it saw no other message: -1; claim only the thread
// a wake-up names, or let one runner take a wake-up, so that losing
// claims and polls are not made by every runner for every post.
package postgres
