-- 0003: what a poll for work reads, kept on the thread's row by every
-- write (the row it locks anyway): the newest message's seq and how many
-- runs are active. PendingThreads then reads threads alone, in O(threads),
-- however long the threads' logs grow.
ALTER TABLE threads
	ADD COLUMN last_message bigint NOT NULL DEFAULT 0 CHECK (last_message >= 0),
	ADD COLUMN active_runs  bigint NOT NULL DEFAULT 0 CHECK (active_runs >= 0);

UPDATE threads t SET
	last_message = coalesce((SELECT max(seq) FROM messages m WHERE m.thread_id = t.id), 0),
	active_runs  = (SELECT count(*) FILTER (WHERE kind = 'run_started')
	                     - count(*) FILTER (WHERE kind IN ('run_ended', 'run_abandoned'))
	                  FROM events e WHERE e.thread_id = t.id);
