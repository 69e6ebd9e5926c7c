-- 0001: threads, their logs, their messages, and leases.
-- Runs with search_path set to the store's schema.

-- One row per thread. Every write on a thread locks this row first
-- (SELECT ... FOR UPDATE), so writes on one thread are serialised.
CREATE TABLE threads (
	id      text PRIMARY KEY CHECK (id <> ''),
	created bigint GENERATED ALWAYS AS IDENTITY UNIQUE, -- creation order
	version bigint NOT NULL DEFAULT 0 CHECK (version >= 0),
	taken   bigint NOT NULL DEFAULT 0 CHECK (taken >= 0)   -- the taken cursor
);

-- Each thread's append-only log, seq 1, 2, ... in the order appended.
CREATE TABLE events (
	thread_id text        NOT NULL REFERENCES threads (id),
	seq       bigint      NOT NULL CHECK (seq > 0),
	version   bigint      NOT NULL,
	kind      text        NOT NULL,
	at        timestamptz NOT NULL,
	message   bigint      NOT NULL DEFAULT 0,
	text      text        NOT NULL DEFAULT '',
	run       bigint      NOT NULL DEFAULT 0,
	request   bigint      NOT NULL DEFAULT 0,
	holder    text        NOT NULL DEFAULT '',
	PRIMARY KEY (thread_id, seq)
);

-- The messages people posted, written with their message_posted event.
CREATE TABLE messages (
	thread_id text        NOT NULL REFERENCES threads (id),
	seq       bigint      NOT NULL CHECK (seq > 0),
	text      text        NOT NULL,
	posted_at timestamptz NOT NULL,
	PRIMARY KEY (thread_id, seq)
);

-- Claims. A thread's lease is keyed by the thread's id; the expiry is
-- stamped with the claimant's own clock, never the database's.
CREATE TABLE leases (
	key        text        PRIMARY KEY CHECK (key <> ''),
	holder     text        NOT NULL CHECK (holder <> ''),
	expires_at timestamptz NOT NULL
);
