-- 0010: the CHECK constraints on the rows every message writes are dropped:
-- threads' eight (a non-empty id, a non-empty lease holder, a lease whole
-- or absent, and non-negative version, taken, last_message, active_runs
-- and log_n), and the positive seq of events and messages.
--
-- PostgreSQL reads a table's CHECK expressions from their stored text,
-- and plans them, again at every execution of a statement that writes the
-- table, prepared statements included (ExecRelCheck): a message's three
-- UPDATEs of its thread's row (its post, its RunStart, its RunEnd) and its
-- three inserts each paid for it: a Post took 1.18-1.24 times as long
-- with them (issue 25; store/postgres/BENCH.md, "The rows' CHECK
-- constraints").
--
-- What they guarded is the Store's to keep, as it keeps the rest of the
-- thread's row: it is the only writer, and every value it writes it
-- computes from the thread it checked (DESIGN.md, "One statement").
-- TestRowsKeepWhatTheChecksSaid writes through the conformance suite and
-- checks every row against the conditions these constraints stated. The
-- foreign keys went the same way in 0006.
ALTER TABLE threads
	DROP CONSTRAINT IF EXISTS threads_id_check,
	DROP CONSTRAINT IF EXISTS threads_version_check,
	DROP CONSTRAINT IF EXISTS threads_taken_check,
	DROP CONSTRAINT IF EXISTS threads_last_message_check,
	DROP CONSTRAINT IF EXISTS threads_active_runs_check,
	DROP CONSTRAINT IF EXISTS threads_lease_holder_check,
	DROP CONSTRAINT IF EXISTS threads_lease_whole,
	DROP CONSTRAINT IF EXISTS threads_log_n_check;
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_seq_check;
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_seq_check;
