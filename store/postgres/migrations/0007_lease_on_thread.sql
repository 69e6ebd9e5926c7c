-- 0007: the thread's row carries a copy of its lease, so that a write
-- decided from the cache checks everything it assumed in the WHERE of
-- the one UPDATE it makes anyway, and reads no other table.
--
-- The copy (lease_holder, lease_expires; both NULL while the thread has no
-- lease) is kept by a trigger on leases, not by the Store: every write of
-- a lease row, whoever makes it (this binary, the binary before it, SQL
-- typed by hand), updates the copy in its own transaction. The copy can
-- therefore never disagree with the lease row in any committed state, and
-- a lease writer must take the thread row's lock to write it: a write
-- that holds the thread's row locked (a fenced write's UPDATE) keeps every
-- lease writer waiting until it commits, which is what locking the lease
-- row gave before. Under READ COMMITTED, an UPDATE that waited for a
-- lease writer rechecks its WHERE on the row that writer left, so it sees
-- the new lease.
--
-- The cost moves to the lease's writes (a Claim, a Renew, a Release),
-- which update the thread's row once more; a consuming write, which does
-- not write the lease, reads one table fewer.
ALTER TABLE threads
	ADD COLUMN lease_holder  text,
	ADD COLUMN lease_expires timestamptz;

UPDATE threads t SET lease_holder = l.holder, lease_expires = l.expires_at
	FROM leases l WHERE l.key = t.id;

DO $migration$
BEGIN
EXECUTE format($create$
CREATE FUNCTION %1$I.lease_copy() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
	IF TG_OP = 'TRUNCATE' THEN
		UPDATE %1$I.threads SET lease_holder = NULL, lease_expires = NULL WHERE lease_holder IS NOT NULL;
		RETURN NULL;
	END IF;
	IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.key <> NEW.key) THEN
		UPDATE %1$I.threads SET lease_holder = NULL, lease_expires = NULL WHERE id = OLD.key;
	END IF;
	IF TG_OP <> 'DELETE' THEN
		UPDATE %1$I.threads SET lease_holder = NEW.holder, lease_expires = NEW.expires_at WHERE id = NEW.key;
	END IF;
	RETURN NULL;
END $body$
$create$, current_schema());

-- conflict raises the error a failed check raises (SQLSTATE TC001, as
-- unchanged() does). The one-statement write calls it only when its
-- check matched no row, so a write that passes runs no PL/pgSQL at all.
EXECUTE format($create$
CREATE FUNCTION %1$I.conflict(p_thread text) RETURNS void LANGUAGE plpgsql AS $body$
BEGIN
	RAISE EXCEPTION 'thread %% or its lease changed since this process last wrote it', p_thread
		USING ERRCODE = 'TC001';
END $body$
$create$, current_schema());
END $migration$;

CREATE TRIGGER lease_copy AFTER INSERT OR UPDATE OR DELETE ON leases
	FOR EACH ROW EXECUTE FUNCTION lease_copy();
CREATE TRIGGER lease_copy_truncate AFTER TRUNCATE ON leases
	FOR EACH STATEMENT EXECUTE FUNCTION lease_copy();
