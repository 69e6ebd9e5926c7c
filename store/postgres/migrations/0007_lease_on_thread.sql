-- 0007: a thread's lease is held on the thread's row, and a write decided
-- from the cache is one SQL statement with no PL/pgSQL on its way.
--
-- The lease moves into the thread's row (lease_holder, lease_expires; both
-- NULL while the thread has no lease), and leases becomes a view of it
-- with the same columns: a thread with a lease is a row of the view. The
-- lease's row is then the thread's row, so:
--
--  * locking the thread's row locks its lease: a write that holds the
--    thread's row (a fenced write's UPDATE) keeps every reader FOR UPDATE
--    and every writer of the lease waiting until it commits, through the
--    view or not, as locking the lease's own row did;
--  * the check of a write decided from the cache — the same thread, at
--    the version it had, under the same lease — is the WHERE of the one
--    UPDATE of the thread's row it makes anyway: no other table is read;
--  * a lease write is an UPDATE of the thread's row, which every write
--    locks first anyway.
--
-- Statements of the binary before keep working on the view: reads, FOR
-- UPDATE, and INSERT ... ON CONFLICT (key) DO UPDATE, which PostgreSQL
-- turns into the thread row's UPDATE. A DELETE from the view is turned
-- into clearing the two columns (the rule below), never a thread row's
-- delete. A lease whose key names no thread has no row to live on: such
-- leases (the Store never writes one: a claim locks its thread's row
-- first) are not kept.
ALTER TABLE threads
	ADD COLUMN lease_holder  text CHECK (lease_holder <> ''),
	ADD COLUMN lease_expires timestamptz,
	ADD CONSTRAINT threads_lease_whole CHECK ((lease_holder IS NULL) = (lease_expires IS NULL));

UPDATE threads t SET lease_holder = l.holder, lease_expires = l.expires_at
	FROM leases l WHERE l.key = t.id;

DROP TABLE leases;

CREATE VIEW leases AS
	SELECT id AS key, lease_holder AS holder, lease_expires AS expires_at
	  FROM threads WHERE lease_holder IS NOT NULL;

CREATE RULE leases_delete AS ON DELETE TO leases DO INSTEAD
	UPDATE threads SET lease_holder = NULL, lease_expires = NULL WHERE id = OLD.key;

-- conflict raises the error a failed check raises: SQLSTATE TC001, as
-- unchanged() (0004) and save_unchanged() (0006) raise, which stay for a
-- binary of an earlier version still running against the schema. A
-- statement calls it only when its check failed, so a write that passes
-- runs no PL/pgSQL.
DO $migration$
BEGIN
EXECUTE format($create$
CREATE FUNCTION %1$I.conflict(p_thread text) RETURNS void LANGUAGE plpgsql AS $body$
BEGIN
	RAISE EXCEPTION 'thread %% or its lease changed since this process last wrote it', p_thread
		USING ERRCODE = 'TC001';
END $body$
$create$, current_schema());
END $migration$;
