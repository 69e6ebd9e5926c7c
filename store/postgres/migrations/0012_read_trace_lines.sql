-- 0012: a read's trace line is kept beside the write at its tick when a
-- later write of its transaction went by it: RunEndThenStart's Plan,
-- before the RunStart it planned (core's traced). A process killed after
-- such a commit, before it wrote its own lines, leaves in storage the
-- writes and the Plan between them; without the Plan, a merged trace has
-- a RunStart that nothing planned. A tick keeps at most one write's line
-- and one read's.
ALTER TABLE trace_lines ADD COLUMN read boolean NOT NULL DEFAULT false;
ALTER TABLE trace_lines DROP CONSTRAINT trace_lines_pkey;
ALTER TABLE trace_lines ADD PRIMARY KEY (thread_id, tick, read);
