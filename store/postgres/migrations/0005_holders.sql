-- 0005: holder freshness. A holder names one claim: once it has taken a
-- thread's lease it never takes that lease again, or a round it left
-- behind would pass the fence of a later claim under the same name. Every
-- acquire (a lease written for a holder other than the one that had it)
-- inserts (key, holder) here, in the acquire's transaction; the primary
-- key refuses a second acquire by the same holder, and the Store reports
-- it as core.ErrHolderReused.
CREATE TABLE holders (
	key    text NOT NULL CHECK (key <> ''),
	holder text NOT NULL CHECK (holder <> ''),
	PRIMARY KEY (key, holder)
);

-- Holders that acquired before this migration: the lease holders of now,
-- and every holder a fenced event names (each wrote under a claim of its
-- thread's lease).
INSERT INTO holders (key, holder)
	SELECT key, holder FROM leases
	UNION
	SELECT thread_id, holder FROM events WHERE holder <> ''
ON CONFLICT DO NOTHING;
