-- 0007: a write decided from the cache is one SQL statement, with no
-- PL/pgSQL on its way (the Store's checkedWriteSQL and checkedSQL, in
-- fastpath.go): the check, the thread row's UPDATE, the lease's lock and
-- the event's insert as one WITH query. conflict() is the error such a
-- statement raises when its check fails — SQLSTATE TC001, as unchanged()
-- (0004) and save_unchanged() (0006) raise, which stay for a binary of
-- an earlier version still running against the schema. It runs only
-- when the check failed, so a write that passes calls no function.
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
