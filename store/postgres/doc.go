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
// and the transaction reads its own writes from the state it holds. A
// RunStart is two round trips: [BEGIN, lock thread, lock lease, new
// events] and [insert event, update thread, COMMIT].
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
// would cost O(events) (twice the time of a write at 500 events, measured
// below); instead the Store keeps the state each committed transaction
// left (Options.CachedThreads of them) and a transaction folds onto a copy
// of it only the events whose seq is past it, read under the thread's row
// lock. A cached state is never trusted beyond what that read confirms, so
// writes by other processes are always seen.
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
// committed (it had).
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
// scripts/with-postgres (unix socket, fsync=off), six runs each:
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench 'ConsumingWrite|WakeUp' -count 6 > bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /write bench.txt
//
//	write (RunStart, thread of ≤ 500 runs)  time/op         throughput vs fenced
//	fenced                                  160 µs ± 12%    1
//	unfenced (fences off)                   160 µs ± 13%    fenced is 1.00 × unfenced (p=0.82)
//	fenced, whole log folded each time      339 µs ± 6%     0.47 × fenced
//	BEGIN; one UPDATE; COMMIT (pgx.Tx)      135 µs ± 8%     fenced is 0.84 × this
//	one autocommitted UPDATE                 56 µs ± 3%     fenced is 0.35 × this
//
//	post to wake-up (Post's call to Listen's delivery)  p50 198 µs, p99 400 µs
//
// Fenced and unfenced cost the same because the Workspace calls
// HoldsLease whether or not the fence is on (it traces the lease seen),
// and the lease row's lock rides in the round trip that locks the thread.
//
// # Figures: runners on PostgreSQL
//
// Whole runner.Runners, each as a process would be (its own Store and
// pool, its own Workspace on the system clock, Wake from its own
// Wakeups), a trivial agent, ClaimTTL 2s; same machine and server as
// above, three runs each (median, with the range):
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench 'Runner' -count 3 -benchtime 2s
//
//	throughput, 4 runners, 100 threads, ~5,800 messages posted
//	round-robin by 4 posters, PollEvery 50ms + wake-ups       2,430 msgs/s (2,390-2,520)
//
//	post to start (Post's return to the agent's call)   p50             p99
//	wake-ups (PollEvery 1h), 1 thread,    1 runner      1.0 ms          3.3-3.8 ms
//	wake-ups (PollEvery 1h), 1 thread,    4 runners     1.6 ms          4.0-4.5 ms
//	wake-ups (PollEvery 1h), 100 threads, 1 runner      0.7 ms          1.8 ms
//	wake-ups (PollEvery 1h), 100 threads, 4 runners     1.1-1.3 ms      3.2-4.0 ms
//	polling only, 50ms,      1 thread,    1 runner      25 ms           52 ms
//	polling only, 50ms,      100 threads, 4 runners     24 ms (11-26)   59 ms
//
// A wake-up cuts the wait for a poll (half the period on average) to the
// start's own transactions. A runner that wakes lists the threads with
// work in one unlocked query (PendingThreads, over two columns every write
// keeps on the thread's row), so the number of threads hardly matters.
// Before that, runner.Run read every thread through a locking transaction
// when it woke, and the 100-thread rows were p50 5-15 ms, p99 22-30 ms.
// Four runners all wake for each post; the three that do not get the
// claim look too, on the same two CPUs, which is what the 4-runner rows
// add. The polling rows were measured before PendingThreads.
package postgres
