-- 0002: the trace lines of committed writes, kept only by a Store opened
-- with Options.KeepTrace (trace validation of many-process runs). Each is
-- inserted by the write's own transaction, so the lines are exactly the
-- writes that committed, in the order the thread's row lock serialised them.
CREATE TABLE trace_lines (
	thread_id text   NOT NULL,
	tick      bigint NOT NULL,
	line      jsonb  NOT NULL,
	PRIMARY KEY (thread_id, tick)
);
