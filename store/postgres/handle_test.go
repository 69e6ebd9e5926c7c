package postgres

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// The handle fn is given has every method the txn has, with the same
// signature: core finds its fast paths (PostMessage, ClaimLease,
// ClaimLeaseThenStart, EventsAfter, the trace log's) by type assertion,
// and a method missing from the handle would turn one off unseen.
func TestHandleHasTxnMethods(t *testing.T) {
	tt, ht := reflect.TypeFor[*txn](), reflect.TypeFor[*handle]()
	for i := range tt.NumMethod() {
		m := tt.Method(i)
		hm, ok := ht.MethodByName(m.Name)
		if !ok {
			t.Errorf("the handle has no %s", m.Name)
			continue
		}
		if !sameSignature(m.Type, hm.Type) {
			t.Errorf("the handle's %s is %v, the txn's %v", m.Name, hm.Type, m.Type)
		}
	}
	require.Equal(t, tt.NumMethod(), ht.NumMethod(), "the handle's exported methods are the txn's")
}

// sameSignature compares two methods' types, receivers aside.
func sameSignature(a, b reflect.Type) bool {
	if a.NumIn() != b.NumIn() || a.NumOut() != b.NumOut() {
		return false
	}
	for i := 1; i < a.NumIn(); i++ {
		if a.In(i) != b.In(i) {
			return false
		}
	}
	for i := range a.NumOut() {
		if a.Out(i) != b.Out(i) {
			return false
		}
	}
	return true
}

// callEnded calls every exported method of the ended handle h with zero
// arguments (ctx for a context) and fails t unless each refuses: an
// error wrapping core.ErrInvalidArgument, and every other result zero
// (KeepsTrace, with no error to return, false).
func callEnded(t *testing.T, ctx context.Context, h *handle, when string) {
	t.Helper()
	v := reflect.ValueOf(h)
	errType := reflect.TypeFor[error]()
	for i := range v.NumMethod() {
		m, name := v.Method(i), v.Type().Method(i).Name
		args := make([]reflect.Value, m.Type().NumIn())
		for j := range args {
			args[j] = reflect.Zero(m.Type().In(j))
			if m.Type().In(j) == reflect.TypeFor[context.Context]() {
				args[j] = reflect.ValueOf(ctx)
			}
		}
		out := m.Call(args)
		for j, o := range out {
			if m.Type().Out(j) == errType {
				err, _ := o.Interface().(error)
				require.ErrorIs(t, err, core.ErrInvalidArgument, "%s of a handle %s", name, when)
				require.ErrorIs(t, err, errTxOver, "%s of a handle %s", name, when)
				continue
			}
			require.True(t, o.IsZero(), "%s of a handle %s: result %d is %v, want zero", name, when, j, o)
		}
	}
}

// A tx kept past its Update or View is refused without the server: each
// method of its handle fails with errTxOver, with no round trip and no
// connection taken, after the Update, inside a later one (whose txn is
// likely the kept handle's, from the pool) and after that; the later
// transaction commits unharmed. (Before, fn was given the pooled txn:
// TestConformance's KeptTransactionRefused found the kept tx's
// CreateThread sent to the server on its own, committed, and its
// connection kept from the pool, so that Close waited for it.)
func TestKeptTransactionRefusedOffTheServer(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStoreWith(t, Options{KeepTrace: true})
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	var kept []*handle
	keep := func(ctx context.Context, tx core.Transaction) error {
		kept = append(kept, tx.(*handle))
		_, err := tx.Thread(ctx, "t")
		return err
	}
	require.NoError(t, s.Update(ctx, keep))
	require.NoError(t, s.View(ctx, keep))
	require.Len(t, kept, 2)
	trips, txns := s.stats.roundTrips.Load(), s.stats.transactions.Load()
	for _, h := range kept {
		callEnded(t, ctx, h, "kept past its transaction")
	}
	require.Equal(t, [2]int64{trips, txns}, [2]int64{s.stats.roundTrips.Load(), s.stats.transactions.Load()}, "a kept handle's calls reached the server")
	require.Zero(t, s.pool.Stat().AcquiredConns(), "a kept handle's call took a connection")
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		for _, h := range kept {
			callEnded(t, ctx, h, "kept, inside a later Update")
		}
		return tx.CreateThread(ctx, "u")
	}))
	for _, h := range kept {
		callEnded(t, ctx, h, "kept, after a later Update")
	}
	ids, err := ws.Threads(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{"t", "u"}, ids)
}

// A View whose one-shot read needs a second round trip runs fn again
// (errAgain): the first attempt's tx is refused in the second, which may
// run on the same txn.
func TestKeptTransactionRefusedInARetry(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	var attempts []core.Transaction
	require.NoError(t, s.View(ctx, func(ctx context.Context, tx core.Transaction) error {
		attempts = append(attempts, tx)
		if len(attempts) == 2 {
			_, err := attempts[0].Thread(ctx, "t")
			require.ErrorIs(t, err, errTxOver, "the first attempt's tx in the second")
		}
		if _, err := tx.Thread(ctx, "t"); err != nil {
			return err
		}
		_, err := tx.ThreadIDs(ctx) // a second round trip
		return err
	}))
	require.Len(t, attempts, 2, "the one-shot read was run again")
}

// A handle is never handed out twice: each Update's is its own, across
// its txn's slabs (newHandle), and each refuses once its Update returned.
func TestHandlesNeverReused(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	seen := map[*handle]bool{}
	for range 2*handleSlab + 1 {
		var h *handle
		require.NoError(t, s.Update(ctx, func(_ context.Context, tx core.Transaction) error {
			h = tx.(*handle)
			require.False(t, h.ended(), "a live transaction's handle is ended")
			return nil
		}))
		require.False(t, seen[h], "a handle handed out twice")
		seen[h] = true
	}
	for h := range seen {
		callEnded(t, ctx, h, "kept past its Update")
	}
}
