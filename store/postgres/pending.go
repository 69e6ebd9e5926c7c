package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/threadclaim/threadclaim/core"
)

var _ core.PendingLister = (*Store)(nil)

// pendingQuery lists the threads whose taken cursor is behind their newest
// message or that have a run active, from the columns every write keeps
// on the thread's row (migration 0003), with each one's lease, which lives
// on the same row (migration 0007; NULL when nobody holds the thread): one
// statement, no join, no locks, O(threads).
const pendingQuery = `SELECT id, lease_holder, lease_expires FROM %[1]s.threads
	WHERE taken < last_message OR active_runs > 0 ORDER BY created`

// PendingThreads lists the threads with a message not yet taken or a run
// still active, in creation order, each with its lease, without locking
// any row: a poll does not wait for, or hold up, a thread's writes. The
// answer may be stale.
func (s *Store) PendingThreads(ctx context.Context) ([]core.PendingThread, error) {
	s.stats.transactions.Add(1)
	s.stats.roundTrips.Add(1)
	rows, err := s.pool.Query(ctx, s.q.pending)
	if err != nil {
		return nil, fmt.Errorf("postgres: pending threads: %w", err)
	}
	defer rows.Close()
	// As long as the last answer: a runner polls often, and the list
	// grows by copying otherwise.
	out := make([]core.PendingThread, 0, max(s.pendingLen.Load(), 8))
	var (
		id      string
		holder  pgtype.Text
		expires pgtype.Timestamptz
	)
	for rows.Next() {
		if err := rows.Scan(&id, &holder, &expires); err != nil {
			return nil, fmt.Errorf("postgres: pending threads: %w", err)
		}
		p := core.PendingThread{ID: core.ThreadID(id)}
		if holder.Valid && expires.Valid {
			p.Lease = core.Lease{Thread: p.ID, Holder: core.Holder(holder.String), ExpiresAt: expires.Time.UTC()}
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: pending threads: %w", err)
	}
	s.pendingLen.Store(int64(len(out)))
	return out, nil
}
