package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadclaim/threadclaim/core"
)

// claimSQL is a Claim decided in the server (%[1]s is the schema). It
// locks the thread's row (old); when the row's lease is free, or expired
// at $4 (the claimant's clock: Lease.Expired's rule, an expiry at or
// before it), and not holder $2's, it bumps the row's version and writes
// the lease on it, $2 until $3 (w), and inserts the holder into holders
// (h), whose key refuses a holder's second acquire. It returns the row as
// it found it, and the new version (NULL: nothing written). No row: the
// thread does not exist.
const claimSQL = `WITH old AS (
	SELECT id, created, version, taken, lease_holder, lease_expires FROM %[1]s.threads WHERE id = $1 FOR UPDATE
), w AS (
	UPDATE %[1]s.threads t SET version = old.version + 1, lease_holder = $2, lease_expires = $3
	  FROM old
	 WHERE t.id = old.id AND (old.lease_holder IS NULL OR old.lease_expires IS NULL OR old.lease_expires <= $4)
	   AND old.lease_holder IS DISTINCT FROM $2
	RETURNING t.version
), h AS (
	INSERT INTO %[1]s.holders (key, holder) SELECT $1, $2 FROM w
)
SELECT old.created, old.version, old.taken, coalesce(old.lease_holder, ''), old.lease_expires, (SELECT version FROM w) FROM old`

// ClaimLease is what core.Workspace's Claim calls, when a transaction has
// it, in place of reading the thread and then writing (core's unexported
// leaseClaimer; TestClaimInOneStatement fails if the two ever part): the
// claim decided in the server, claimSQL, sent with the read of the
// thread's new events in the round trip that begins the transaction. The
// row, locked, the lease and the log are read, and the claim written, by
// the first round trip; COMMIT, with the Claim's trace line under
// KeepTrace, is the second. The reading path took the same two round
// trips with three statements more (the lease's read, the holder's
// insert and the row's UPDATE), deciding in the client between them.
// Either way the row stays locked until COMMIT.
//
// A transaction that has read or written already takes the reading path.
func (t *txn) ClaimLease(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires time.Time) (*core.Thread, core.Lease, uint64, error) {
	if holder == "" {
		return nil, core.Lease{}, 0, fmt.Errorf("%w: lease with empty thread or holder", core.ErrInvalidArgument)
	}
	if err := core.CheckText("holder", string(holder)); err != nil {
		return nil, core.Lease{}, 0, err
	}
	if t.err != nil {
		return nil, core.Lease{}, 0, t.err
	}
	fresh := !t.begun && !t.shot && len(t.pending) == 0 && len(t.assumed) == 0 && len(t.threads) == 0 && len(t.leases) == 0
	if !fresh || t.readOnly || t.s.readClaim {
		return t.claimRead(ctx, id, holder, now, expires)
	}
	t.s.stats.serverClaims.Add(1)
	expires = leaseExpiry(expires)
	c := t.s.cached(id)
	after, from := logFrom(c)
	b := t.batch() // BEGIN
	var row threadRow
	var was core.Lease
	var version *int64
	b.Queue(t.s.q.claim, string(id), string(holder), expires, now).QueryRow(func(r pgx.Row) error {
		var wasHolder string
		var wasExpires *time.Time
		err := r.Scan(&row.created, &row.version, &row.taken, &wasHolder, &wasExpires, &version)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		row.found = err == nil
		if wasHolder != "" {
			was = core.Lease{Thread: id, Holder: core.Holder(wasHolder)}
			if wasExpires != nil {
				was.ExpiresAt = wasExpires.UTC()
			}
		}
		return err
	})
	var evs []eventRow
	t.queueEvents(b, id, from, &evs)
	if err := t.send(ctx, b); err != nil {
		return nil, core.Lease{}, 0, err
	}
	if !row.found {
		return nil, core.Lease{}, 0, fmt.Errorf("thread %q: %w", id, core.ErrUnknownThread)
	}
	t.leases[id] = was
	th, err := t.fold(ctx, id, c, after, row, evs)
	if err != nil {
		return nil, core.Lease{}, 0, err
	}
	if version == nil {
		return th.state, was, 0, nil // refused: nothing written
	}
	// The row as claimSQL left it; written already, so not dirty.
	th.header()
	th.state.Version = uint64(*version)
	t.leases[id] = core.Lease{Thread: id, Holder: holder, ExpiresAt: expires}
	th.ownLease = true
	return th.state, was, uint64(*version), nil
}

// claimRead is a Claim as the Workspace makes it on a Transaction without
// ClaimLease: read the thread and its lease, decide, bump, put the lease.
func (t *txn) claimRead(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires time.Time) (*core.Thread, core.Lease, uint64, error) {
	th, err := t.thread(ctx, id)
	if err != nil {
		return nil, core.Lease{}, 0, err
	}
	l, err := t.lease(ctx, id)
	if err != nil {
		return nil, core.Lease{}, 0, err
	}
	if l.Holder == holder || l.Holder != "" && !l.Expired(now) {
		return th.state, l, 0, nil
	}
	v, err := t.Bump(ctx, id)
	if err != nil {
		return nil, core.Lease{}, 0, err
	}
	if err := t.PutLease(ctx, core.Lease{Thread: id, Holder: holder, ExpiresAt: expires}); err != nil {
		return nil, core.Lease{}, 0, err
	}
	return th.state, l, v, nil
}
