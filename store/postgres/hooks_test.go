package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// hooked is a core.Storage whose transactions call a test's hooks after
// HoldsLease and after Append, so a test can act while a real transaction
// on the real server is at that point. Each hook runs once.
type hooked struct {
	core.Storage
	mu              sync.Mutex
	afterHoldsLease func(ctx context.Context, tx core.Transaction)
	afterAppend     func(ctx context.Context, tx core.Transaction)
}

func (h *hooked) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return h.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, hookedTx{tx, h})
	})
}

func (h *hooked) take(f *func(context.Context, core.Transaction)) func(context.Context, core.Transaction) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := *f
	*f = nil
	return g
}

type hookedTx struct {
	core.Transaction
	h *hooked
}

func (x hookedTx) HoldsLease(ctx context.Context, key string, holder core.Holder) (bool, core.Lease, error) {
	held, l, err := x.Transaction.HoldsLease(ctx, key, holder)
	if f := x.h.take(&x.h.afterHoldsLease); f != nil && err == nil {
		f(ctx, x.Transaction)
	}
	return held, l, err
}

func (x hookedTx) Append(ctx context.Context, id core.ThreadID, ev core.Event) error {
	err := x.Transaction.Append(ctx, id, ev)
	if f := x.h.take(&x.h.afterAppend); f != nil && err == nil {
		f(ctx, x.Transaction)
	}
	return err
}

// backendPID is the server process serving tx.
func backendPID(tx core.Transaction) uint32 { return tx.(*txn).conn.PgConn().PID() }

// waitFor polls the server until query (returning one boolean) is true.
// It observes the server's state; it is not a sleep standing in for an
// ordering.
func waitFor(t *testing.T, conn *pgx.Conn, what, query string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		require.NoError(t, conn.QueryRow(context.Background(), query, args...).Scan(&ok))
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for the server to show %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rowCounts reads, with plain SQL, how many rows the schema holds for the
// thread: what a half-written transaction would leave.
func rowCounts(t *testing.T, conn *pgx.Conn, schema string, id core.ThreadID) (events, messages int, version, taken int64) {
	t.Helper()
	ctx := context.Background()
	q := pgx.Identifier{schema}.Sanitize()
	require.NoError(t, conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+q+`.events WHERE thread_id = $1),
		(SELECT count(*) FROM `+q+`.messages WHERE thread_id = $1), version, taken FROM `+q+`.threads WHERE id = $1`,
		string(id)).Scan(&events, &messages, &version, &taken))
	return
}
