-- 0008: a thread's row names the end of its log: log_n, the events in it,
-- and log_at, the time of the last (NULL while there is none).
--
-- A write decided from the cache checks them with the row's version and
-- lease, in the UPDATE's WHERE it has anyway: storage that lost commits
-- the Store saw acknowledged (synchronous_commit = off and a crash, a
-- failover to an asynchronous replica), and then took as many writes from
-- others, can be back at the version the cache has, under the same lease,
-- with other events where the cache's were. Every write of the thread's
-- row sets them. A binary before this one leaves them as they were: a
-- later binary's check then fails, and its write runs again reading under
-- lock, which reads the log itself and sets them.
ALTER TABLE threads
	ADD COLUMN log_n  bigint NOT NULL DEFAULT 0 CHECK (log_n >= 0),
	ADD COLUMN log_at timestamptz;

UPDATE threads t SET log_n = e.seq, log_at = e.at
	FROM (SELECT DISTINCT ON (thread_id) thread_id, seq, at FROM events ORDER BY thread_id, seq DESC) e
	WHERE e.thread_id = t.id;
