-- 0008: a write to a followed thread NOTIFYs the channel <schema>.events
-- with the thread's id, once it commits (Store.WatchEvents, which
-- core.Workspace.Follow waits on). Every write of a thread bumps its
-- row's version, an event's write among them, so the notice is a trigger
-- on that UPDATE. A thread is followed until followed_until: WatchEvents
-- sets it ahead and renews it while it watches; a follower that stopped or
-- died leaves it to pass. The trigger's WHEN is evaluated without calling
-- the function, so a write to a thread nobody follows pays for no NOTIFY
-- (which would queue its commit behind PostgreSQL's notification queue).
-- A write that is no event (a renewal) notifies too: a follower that
-- reads the log again finds nothing new. The channel of posted messages
-- (<schema>.posted, Store.Listen and Wakeups) is unchanged.
ALTER TABLE threads ADD COLUMN followed_until timestamptz;

-- A thread id too long for a NOTIFY payload notifies the empty payload:
-- any followed thread may have new events. PostgreSQL sends one notice per
-- distinct payload and transaction.
CREATE FUNCTION notify_followers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(TG_TABLE_SCHEMA || '.events',
		CASE WHEN octet_length(NEW.id) < 8000 THEN NEW.id ELSE '' END);
	RETURN NULL;
END
$$;

CREATE TRIGGER threads_notify_followers AFTER UPDATE OF version ON threads
	FOR EACH ROW WHEN (NEW.followed_until > now())
	EXECUTE FUNCTION notify_followers();
