package sim

import (
	"context"
	"errors"

	"github.com/threadclaim/threadclaim/core"
)

// fenceOwnTx is the FenceInOwnTransaction mutant (Mutants), a storage
// that a process's Workspace writes through: a fenced write (RunStart,
// Reply, Abandon) checks its claim in a transaction of its own, which
// ends before the write's begins, and the write's transaction then takes
// that check's word for it. Between the two, another holder can take the
// lease (the scheduler runs other operations there when it interleaves),
// so the fence no longer excludes it.
//
// Each transaction runs first as the check: the Workspace's function runs
// whole in it. A fence that refuses refuses there, traced as the fence
// does. Any other write commits there. A fenced write (one that appends a
// run's start, an answer or an abandonment) is rolled back and made again
// in a second transaction, in which HoldsLease reports the claim's holder
// as holding the lease whoever holds it now: the write's line carries the
// lease it saw, as an unfenced write's does.
type fenceOwnTx struct {
	core.Storage
}

var (
	_ core.Viewer        = fenceOwnTx{}
	_ core.PendingLister = fenceOwnTx{}
)

// errChecked rolls the check's transaction of a fenced write back.
var errChecked = errors.New("sim: the fence was checked in a transaction of its own")

// Update runs fn as the check, then, for a fenced write, once more as
// the write.
func (s fenceOwnTx) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	err := s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		check := &checkTx{Transaction: tx}
		if err := fn(ctx, check); err != nil {
			return err
		}
		if check.fenced {
			return errChecked
		}
		return nil
	})
	if !errors.Is(err, errChecked) {
		return err
	}
	return s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, writeTx{tx})
	})
}

// View passes reads through, read-only when the storage is a Viewer.
func (s fenceOwnTx) View(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if v, ok := s.Storage.(core.Viewer); ok {
		return v.View(ctx, fn)
	}
	return s.Storage.Update(ctx, fn)
}

// PendingThreads passes through to the wrapped storage when it lists
// pending threads itself, and lists them by reading each thread if not.
func (s fenceOwnTx) PendingThreads(ctx context.Context) ([]core.PendingThread, error) {
	if pl, ok := s.Storage.(core.PendingLister); ok {
		return pl.PendingThreads(ctx)
	}
	return core.NewWorkspace(s.Storage, core.SystemClock{}).Pending(ctx)
}

// checkTx is the check's transaction: it notes whether the write is a
// fenced one, from the event it appends.
type checkTx struct {
	core.Transaction
	fenced bool
}

func (t *checkTx) Append(ctx context.Context, id core.ThreadID, ev core.Event) error {
	switch ev.Kind {
	case core.RunStarted, core.Answered, core.RunAbandoned:
		t.fenced = true
	}
	return t.Transaction.Append(ctx, id, ev)
}

func (t *checkTx) LogTrace(ctx context.Context, ev core.TraceEvent) error {
	return logTrace(ctx, t.Transaction, ev)
}

// LoggedTrace passes the Crash's question on (core.TraceLogReader).
func (t *checkTx) LoggedTrace(ctx context.Context, id core.ThreadID, tick uint64) (core.TraceEvent, bool, error) {
	return loggedTrace(ctx, t.Transaction, id, tick)
}

// writeTx is a fenced write's own transaction: its claim was checked
// before it, so HoldsLease says held.
type writeTx struct {
	core.Transaction
}

func (t writeTx) HoldsLease(ctx context.Context, thread core.ThreadID, holder core.Holder) (bool, core.Lease, error) {
	_, l, err := t.Transaction.HoldsLease(ctx, thread, holder)
	return err == nil, l, err
}

func (t writeTx) LogTrace(ctx context.Context, ev core.TraceEvent) error {
	return logTrace(ctx, t.Transaction, ev)
}

// LoggedTrace passes the Crash's question on (core.TraceLogReader).
func (t writeTx) LoggedTrace(ctx context.Context, id core.ThreadID, tick uint64) (core.TraceEvent, bool, error) {
	return loggedTrace(ctx, t.Transaction, id, tick)
}

// logTrace passes a trace line on to tx when it keeps them
// (core.TraceLog): the fault injector's transactions read the write's
// line there.
func logTrace(ctx context.Context, tx core.Transaction, ev core.TraceEvent) error {
	if l, ok := tx.(core.TraceLog); ok {
		return l.LogTrace(ctx, ev)
	}
	return nil
}
