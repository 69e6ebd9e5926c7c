-- 0006: a write decided from the cache is one statement, autocommitted.
--
-- save_unchanged() does in one flat function what unchanged_save_event()
-- (0004) did in three nested ones, and cheaper:
--
--  * the thread row's UPDATE carries the check of the row (the same thread,
--    at the version the Store assumed) in its WHERE: the UPDATE locks the
--    row, and under READ COMMITTED rechecks its WHERE on the newest version
--    of a row another transaction changed meanwhile. No row updated: the
--    thread changed (or is gone), and the function raises TC001;
--  * the lease's row is then locked and read, as unchanged() did: the lock
--    order of every write (thread row, then lease row), and a writer of the
--    lease that skips the thread's row waits for this write all the same.
--    The read, a statement after the thread's lock was granted, sees every
--    lease write that committed before. A lease other than the assumed one
--    raises TC001, which rolls the UPDATE back;
--  * the event, when there is one (p_seq not NULL), is inserted last.
--
-- Names are qualified with the schema when the function is created, so a
-- call sets no search_path (a SET clause costs each call a configuration
-- save and restore).
--
-- The foreign keys from events and messages to threads are dropped: each
-- made every insert re-read and key-share-lock the thread's row, which
-- every transaction that inserts an event or a message already holds
-- locked (a write locks the thread's row before it appends), and no
-- thread is ever deleted. They cost a fifth of a consuming write.
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_thread_id_fkey;
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_thread_id_fkey;

DO $migration$
BEGIN
EXECUTE format($create$
CREATE FUNCTION %1$I.save_unchanged(p_thread text, p_created bigint, p_version bigint,
                                    p_holder text, p_expires timestamptz,
                                    p_new_version bigint, p_taken bigint, p_last_message bigint, p_active_runs bigint,
                                    p_seq bigint, p_event_version bigint, p_kind text, p_at timestamptz,
                                    p_message bigint, p_text text, p_run bigint, p_request bigint, p_event_holder text)
RETURNS void LANGUAGE plpgsql AS $body$
DECLARE
	h text;
	e timestamptz;
BEGIN
	UPDATE %1$I.threads SET version = p_new_version, taken = p_taken, last_message = p_last_message,
		active_runs = p_active_runs
		WHERE id = p_thread AND created = p_created AND version = p_version;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'thread %% changed since this process last wrote it', p_thread USING ERRCODE = 'TC001';
	END IF;
	SELECT holder, expires_at INTO h, e FROM %1$I.leases WHERE key = p_thread FOR UPDATE;
	IF coalesce(h, '') <> p_holder OR (h IS NOT NULL AND e <> p_expires) THEN
		RAISE EXCEPTION 'the lease of thread %% changed since this process last wrote it', p_thread USING ERRCODE = 'TC001';
	END IF;
	IF p_seq IS NOT NULL THEN
		INSERT INTO %1$I.events (thread_id, seq, version, kind, at, message, text, run, request, holder)
			VALUES (p_thread, p_seq, p_event_version, p_kind, p_at, p_message, p_text, p_run, p_request, p_event_holder);
	END IF;
END $body$
$create$, current_schema());
END $migration$;
