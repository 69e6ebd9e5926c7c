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
//	         (neither events nor messages has a foreign key to threads
//	         since migration 0006: every insert is made under the thread
//	         row's lock, and no thread is deleted)
//	leases   (key, holder, expires_at)       claims; a thread's key is its id
//	trace_lines (thread_id, tick, line)      committed writes' trace lines,
//	         only with Options.KeepTrace (many-process trace validation)
//	holders  (key, holder)                   every holder that acquired a
//	         lease, once: holder freshness (below)
//
// and the functions save_unchanged (migration 0006: a write decided from
// the cache, check included, as one statement) and unchanged (0004: the
// check alone), below. Migration 0004's unchanged_save and
// unchanged_save_event are no longer called; they stay for a binary of
// the version before still running against the schema.
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
// # One statement: a write decided from the cache
//
// While this Store holds a thread's lease — it wrote the lease for its
// holder, and its cache has the state and lease its own last transaction
// on the thread left — the Store expects no other process to write the
// thread, and a write transaction reads the thread and its lease from the
// cache, with no round trip. What fn then writes goes out in one pipeline
// of prepared statements with the check in front (fastpath.go), and with
// no BEGIN or COMMIT: statements sent up to one Sync run as one implicit
// transaction, committed when the last succeeds, rolled back whole when
// one fails. A RunStart, RunEnd, Abandon or Reply (and a Post under the
// Store's own lease) is one statement, autocommitted:
//
//	SELECT save_unchanged(thread, created, version, holder, expiry,  -- the check
//	       new version, taken, last_message, active_runs,            -- the row
//	       the event's columns)                                      -- the event
//
// save_unchanged() updates the thread's row with the check in the
// UPDATE's WHERE (the same thread, created, at the version the cache
// had), which locks the row; then locks the lease's row and compares it
// with the lease the cache had (holder and expiry): the order every write
// locks them. Either comparison failing raises SQLSTATE TC001, and
// nothing of the write is kept. Passed, the rows stay locked to the
// commit, and every decision fn made from the cache is the one it would
// have made reading them under lock at that moment: the fence
// (HoldsLease) included, so a fenced write and another holder's acquire
// still serialise on those rows, with the same outcomes. A Renew or a
// Release adds its lease's upsert or delete to the pipeline; a write that
// wrote no thread sends unchanged(), the check alone. When the check
// fails, or fn returned an error decided from the cache before anything
// was sent (a refusal must be read from the server), fn runs again with
// locking reads: a storage may call fn more than once (core.Storage's
// contract), and nothing of the first run was kept. A failed check costs
// one round trip more; the runner benchmark counts them (conflicts/msg).
// TestOneStatementCheck changes the row and the lease behind a Store's
// back; its mutant, a save_unchanged that checks nothing, is caught.
//
// A Claim is two round trips: it reads another holder's lease, which the
// cache cannot know, under lock, then writes. (Reading it in a snapshot
// first, and sending the check with the writes, was tried: racing claims
// then failed their checks ten times as often, for no gain.)
//
// A read-only transaction (View) sends COMMIT with its first round trip:
// reading a thread is one round trip. A View whose fn needs a second is
// run again in a transaction that stays open, so that its reads share one
// snapshot.
//
// Transactions' values and the argument buffer are reused: a consuming
// write makes 22 allocations and 2.0 KB, whatever the thread's size.
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
// tell: Update returns an error wrapping core.ErrCommitUnknown. (A write
// sent as one statement has no COMMIT: its commit is the end of the
// pipeline, and the same holds of it.) The
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
// commits; so does a Release that leaves the thread with work (a message
// posted after the holder's last plan, a turn that yielded), since
// runners leave a thread another holder has alone for a while. Listen
// delivers them over a connection of its own; a runner uses it to start
// soon after a post, and polls as well.
//
// # Measured
//
// On a 2-CPU machine shared with other work, PostgreSQL 15 from
// scripts/with-postgres (unix socket, fsync=off, synchronous_commit=off:
// the same server and settings for every write compared). Measured on
// 2026-12-01 while the machine's load average stood at 10-28 (other
// sessions' builds and tests): times vary by ±30-90% between runs, so
// only ratios taken op by op, or in runs alternated on one server, are
// read from them. Allocations do not vary.
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench 'ConsumingWrite$' -benchtime 2000x -count 6 > bench.txt
//	benchstat -col /write bench.txt
//
//	write (RunStart, thread of ≤ 256 runs)   time/op (median)  allocs  bytes
//	fenced: one statement (default)            459 µs ± 88%        22  2.0 KB
//	unfenced (fences off)                      502 µs ± 40%        22  2.0 KB
//	fenced-locking: two round trips            746 µs ± 31%       134  5.9 KB
//	fenced-nocache: whole log folded         1,219 µs ± 16%       667  107 KB
//	update-tx: BEGIN; one UPDATE; COMMIT       494 µs ± 29%         8  226 B
//	update: one autocommitted UPDATE           357 µs ± 53%         4  138 B
//
// BenchmarkConsumingWritePaired alternates a fenced RunStart and an
// autocommitted UPDATE of the thread row op by op, on one pool, so that
// both meet the same load:
//
//	scripts/with-postgres go test ./store/postgres -run '^$' -bench ConsumingWritePaired -benchtime 3000x -count 6
//
//	fenced/update (medians of each run's ops): 1.62, 1.52, 1.43, 1.46, 1.44, 1.57
//	(median 1.49; with the three statements of migration 0004 in
//	BEGIN ... COMMIT, 2.07 in the same benchmark)
//
// The target of 1.3 is not met. Where the time goes was measured on the
// server alone, with pgbench (-M prepared, one client, the variants
// interleaved in one run): a plpgsql call that only runs the UPDATE costs
// 1.05 of the bare UPDATE; reading the lease adds about 0.12 (locking it
// as well, nothing measurable); inserting the event adds about 0.13
// after the foreign key from events to threads is gone, whose check
// (a trigger that reads and key-share-locks the thread's row for each
// insert) cost a further 0.2; the SET search_path clause that 0004's
// functions carry cost 0.08 a call; three nested plpgsql calls cost 0.3
// against one. save_unchanged is the flat form (server alone: about 1.3
// of the UPDATE), and the client adds its Workspace, the fold and the
// encoding (a few µs of CPU) and a larger Bind. The floor is a write
// that updates one row and inserts another under a check that reads a
// third, against an UPDATE of one row.
//
// Fenced and unfenced cost the same because the Workspace calls
// HoldsLease whether or not the fence is on (it traces the lease seen).
//
// # Figures: runners on PostgreSQL
//
// Whole runner.Runners, each as a process would be (its own Store and
// pool, its own Workspace on the system clock, Wake from its own
// Wakeups), a trivial agent, ClaimTTL 2s, PollEvery 50ms, 4 runners over
// 100 threads, messages posted round-robin by 16 posters (with 4, posting
// took 99% of the measured time). The code before this change and after
// it, alternated four times on one server (old, new, old, new, ...):
//
//	scripts/with-postgres sh -c 'for i in 1 2 3 4; do for v in old new; do
//	    ./$v.test -test.run "^$" -test.bench "RunnerThroughput/reads=spec" -test.benchtime 2s >> $v.txt
//	    ./$v.test -test.run "^$" -test.bench "RunnerLatency/wake=notify/threads=100/runners=4" -test.benchtime 200x >> $v.txt
//	done; done'
//	benchstat old.txt new.txt
//
//	                          before                 after
//	msgs/s                    78, 67, 71, 55         110, 126, 86, 178   (median +72%)
//	round trips/msg           9.2, 11.8, 12.0, 10.3  8.8, 8.4, 8.4, 9.7
//	transactions/msg (median) 9.2                    7.1
//	polls/msg (median)        2.5                    1.0
//	post to start p50         3.0, 7.6, 4.7, 4.2 ms  1.7, 3.6, 3.2, 1.2 ms
//	post to start p99         234, 146, 66, 87 ms    41, 67, 45, 37 ms
//
// (the round trips and transactions are the runners' Stores', polls
// included; a Post is 2 more, since the poster never holds the lease.)
// Under this load the p99 is the machine's scheduling, not the runners:
// the 2× and 5 ms targets are not shown.
//
// What bounds the throughput is the round trips a message costs, each a
// wait for the server on two CPUs that the runners, the posters and every
// backend share (the runners' process itself used about a tenth of the
// CPU in a profile; the rest is the server's and the wait for it). Per
// consumed message a runner makes: Claim 2 (a Claim reads another
// holder's lease under lock: the cache cannot know it), Plan 1, RunStart
// 1, RunEnd 1, Plan 1, Release 1 — 7, as a thread rarely has more than
// one message waiting, so nearly every message is a turn of its own —
// plus the poster's 2, its polls (1.0 after this change, 2.5 before),
// and the claims that find the thread taken (0.7-0.8 a message, each one
// round trip and a rollback, and each holding the thread's row lock for
// a round trip, which the winner's next write waits behind: that is the
// post-to-start tail). Each post wakes every runner; a runner now looks
// for work only with a turn slot free, and leaves a thread it found taken
// alone for PollEvery (a Release with work left wakes the runners again).
// Before, the end of a turn that found its thread taken made the runner
// look again, and claim the same thread again: a loop of a poll and a
// refused claim for as long as the other holder worked the thread
// (TestRunLeavesThreadClaimedByAnother counts 379 such claims in 20 ms
// on the in-memory storage without the change).
// PendingThreads now lists each thread's lease as well, and a runner
// leaves out the threads another holder has and has not let expire, so a
// claim finds a thread taken only when the listing was stale: busy turns
// per message fell from 0.23-0.47 to 0.17-0.29 with posts coming in, and
// from 0.04 to 0.002 draining a backlog (BenchmarkRunnerThroughput,
// posted=before, at 3.2 round trips per message: each message's Plan,
// RunStart and RunEnd, which bound it there). What is left to take: a
// turn that ends without its last Plan when the plan before it saw no
// other message (-1), a RunEnd that plans the next message in its own
// transaction (-1 per message while draining), and one runner taking a
// wake-up rather than all four.
package postgres
