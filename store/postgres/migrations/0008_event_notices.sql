-- 0008: every event appended to a thread's log NOTIFYs the channel
-- <schema>.events with the thread's id (Store.WatchEvents, which
-- core.Workspace.Follow waits on), once the write commits. The channel of
-- posted messages (<schema>.posted, Store.Listen and Wakeups) is
-- unchanged. A thread id too long for a NOTIFY payload notifies the
-- empty payload: any thread may have new events. PostgreSQL sends one
-- notice per distinct payload and transaction.
CREATE FUNCTION notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(TG_TABLE_SCHEMA || '.events',
		CASE WHEN octet_length(NEW.thread_id) < 8000 THEN NEW.thread_id ELSE '' END);
	RETURN NULL;
END
$$;

CREATE TRIGGER events_notify AFTER INSERT ON events
	FOR EACH ROW EXECUTE FUNCTION notify_event();
