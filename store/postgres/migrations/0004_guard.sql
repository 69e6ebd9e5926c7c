-- 0004: the check that lets a write be sent in one round trip. A Store
-- that knows a thread's state from its own last transaction on it (its
-- cache) decides the write from that state without asking the server,
-- and sends the write with this check in front of it, in the same
-- pipeline as BEGIN and COMMIT. The check locks the thread's row and its
-- lease's row, in the order every write locks them, and raises
-- SQLSTATE TC001 unless both still are what the Store assumed: the same
-- thread (created), at the same version, under the same lease. (Every
-- write of an event bumps the version; a log that grew without one makes
-- the write's event insert collide with the events' key, which the Store
-- takes as the same conflict.) The error aborts the transaction before any of
-- the write's statements runs, and the Store runs the write again with
-- locking reads. A write that passes the check is exactly the write the
-- locking path would have made, at the moment of the check.
CREATE FUNCTION unchanged(p_thread text, p_created bigint, p_version bigint,
                          p_holder text, p_expires timestamptz)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
	c bigint;
	v bigint;
	h text;
	e timestamptz;
BEGIN
	SELECT created, version INTO c, v FROM threads WHERE id = p_thread FOR UPDATE;
	SELECT holder, expires_at INTO h, e FROM leases WHERE key = p_thread FOR UPDATE;
	IF c IS DISTINCT FROM p_created OR v IS DISTINCT FROM p_version
	   OR coalesce(h, '') <> p_holder OR (h IS NOT NULL AND e <> p_expires) THEN
		RAISE EXCEPTION 'thread % changed since this process last wrote it', p_thread
			USING ERRCODE = 'TC001';
	END IF;
END $$;

-- unchanged_save is unchanged() followed by the thread row's UPDATE every
-- write makes (version, taken and the columns of migration 0003), in one
-- statement: a write's round trip runs one statement fewer.
CREATE FUNCTION unchanged_save(p_thread text, p_created bigint, p_version bigint,
                               p_holder text, p_expires timestamptz,
                               p_new_version bigint, p_taken bigint, p_last_message bigint, p_active_runs bigint)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	PERFORM unchanged(p_thread, p_created, p_version, p_holder, p_expires);
	UPDATE threads SET version = p_new_version, taken = p_taken, last_message = p_last_message,
		active_runs = p_active_runs WHERE id = p_thread;
END $$;

-- unchanged_save_event is unchanged_save() followed by the insert of the
-- write's event: the whole of a RunStart, Reply, Abandon or RunEnd (and
-- of a Post under the Store's own lease) in one statement.
CREATE FUNCTION unchanged_save_event(p_thread text, p_created bigint, p_version bigint,
                                     p_holder text, p_expires timestamptz,
                                     p_new_version bigint, p_taken bigint, p_last_message bigint, p_active_runs bigint,
                                     p_seq bigint, p_event_version bigint, p_kind text, p_at timestamptz,
                                     p_message bigint, p_text text, p_run bigint, p_request bigint, p_event_holder text)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	PERFORM unchanged_save(p_thread, p_created, p_version, p_holder, p_expires,
	                       p_new_version, p_taken, p_last_message, p_active_runs);
	INSERT INTO events (thread_id, seq, version, kind, at, message, text, run, request, holder)
		VALUES (p_thread, p_seq, p_event_version, p_kind, p_at, p_message, p_text, p_run, p_request, p_event_holder);
END $$;
