package postgres

import (
	"context"
	"fmt"

	"github.com/threadclaim/threadclaim/core"
)

var _ core.PendingLister = (*Store)(nil)

// pendingQuery lists, in one statement and so one snapshot, without locks,
// the threads whose taken cursor is behind their newest message or that
// have a run started and neither ended nor abandoned.
const pendingQuery = `SELECT t.id FROM %[1]s.threads t
WHERE t.taken < (SELECT coalesce(max(m.seq), 0) FROM %[1]s.messages m WHERE m.thread_id = t.id)
   OR EXISTS (SELECT 1 FROM %[1]s.events s
               WHERE s.thread_id = t.id AND s.kind = $1
                 AND NOT EXISTS (SELECT 1 FROM %[1]s.events e
                                  WHERE e.thread_id = t.id AND e.run = s.run AND e.kind IN ($2, $3)))
ORDER BY t.created`

// PendingThreads lists the threads with a message not yet taken or a run
// still active, in creation order, without locking any row: a poll does
// not wait for, or hold up, a thread's writes. The answer may be stale.
func (s *Store) PendingThreads(ctx context.Context) ([]core.ThreadID, error) {
	rows, err := s.pool.Query(ctx, s.q.pending, string(core.RunStarted), string(core.RunEnded), string(core.RunAbandoned))
	if err != nil {
		return nil, fmt.Errorf("postgres: pending threads: %w", err)
	}
	defer rows.Close()
	var out []core.ThreadID
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("postgres: pending threads: %w", err)
		}
		out = append(out, core.ThreadID(id))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: pending threads: %w", err)
	}
	return out, nil
}
