package postgres

import (
	"context"
	"fmt"

	"github.com/threadclaim/threadclaim/core"
)

var _ core.PendingLister = (*Store)(nil)

// pendingQuery lists the threads whose taken cursor is behind their newest
// message or that have a run active, from the columns every write keeps
// on the thread's row (migration 0003): one statement, no locks, O(threads).
const pendingQuery = `SELECT id FROM %s.threads WHERE taken < last_message OR active_runs > 0 ORDER BY created`

// PendingThreads lists the threads with a message not yet taken or a run
// still active, in creation order, without locking any row: a poll does
// not wait for, or hold up, a thread's writes. The answer may be stale.
func (s *Store) PendingThreads(ctx context.Context) ([]core.ThreadID, error) {
	s.stats.transactions.Add(1)
	s.stats.roundTrips.Add(1)
	rows, err := s.pool.Query(ctx, s.q.pending)
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
