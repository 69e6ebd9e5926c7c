package storetest

import (
	"context"
	"sync"

	"github.com/threadclaim/threadclaim/core"
)

// Hooked is a core.Storage that runs a test's hooks at points inside the
// transactions it passes to the storage it wraps, so that a test can act
// while a real transaction is at that point. Each hook runs once, in the
// first transaction that reaches its point; set them before the
// transaction starts. Reads (core.Viewer) and polls (core.PendingLister)
// pass through unhooked. Storage must be set: the zero Hooked has no
// storage to pass to.
type Hooked struct {
	core.Storage

	mu sync.Mutex
	// BeforeUpdate runs when Update is called, before the storage starts
	// the transaction.
	BeforeUpdate func()
	// AfterHoldsLease runs after a HoldsLease that returned no error.
	AfterHoldsLease func(ctx context.Context, tx core.Transaction)
	// AfterAppend runs after an Append that returned no error.
	AfterAppend func(ctx context.Context, tx core.Transaction)
}

var (
	_ core.Viewer        = (*Hooked)(nil)
	_ core.PendingLister = (*Hooked)(nil)
)

// Update runs fn in the wrapped storage's transaction, hooked.
func (h *Hooked) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if f := take(h, &h.BeforeUpdate); f != nil {
		f()
	}
	return h.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, hookedTx{tx, h})
	})
}

// View passes through to the wrapped storage's View, or runs Update.
func (h *Hooked) View(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if v, ok := h.Storage.(core.Viewer); ok {
		return v.View(ctx, fn)
	}
	return h.Storage.Update(ctx, fn)
}

// PendingThreads passes through to the wrapped storage when it lists
// pending threads itself, and lists them by reading each thread if not.
func (h *Hooked) PendingThreads(ctx context.Context) ([]core.PendingThread, error) {
	if pl, ok := h.Storage.(core.PendingLister); ok {
		return pl.PendingThreads(ctx)
	}
	return core.NewWorkspace(h.Storage, core.SystemClock{}).Pending(ctx)
}

func take[F any](h *Hooked, f *F) F {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := *f
	var zero F
	*f = zero
	return g
}

type hookedTx struct {
	core.Transaction
	h *Hooked
}

// LogTrace passes a trace line to the wrapped transaction when it keeps
// them.
func (x hookedTx) LogTrace(ctx context.Context, ev core.TraceEvent) error {
	if l, ok := x.Transaction.(core.TraceLog); ok {
		return l.LogTrace(ctx, ev)
	}
	return nil
}

func (x hookedTx) HoldsLease(ctx context.Context, id core.ThreadID, holder core.Holder) (bool, core.Lease, error) {
	held, l, err := x.Transaction.HoldsLease(ctx, id, holder)
	if f := take(x.h, &x.h.AfterHoldsLease); f != nil && err == nil {
		f(ctx, x.Transaction)
	}
	return held, l, err
}

func (x hookedTx) Append(ctx context.Context, id core.ThreadID, ev core.Event) error {
	err := x.Transaction.Append(ctx, id, ev)
	if f := take(x.h, &x.h.AfterAppend); f != nil && err == nil {
		f(ctx, x.Transaction)
	}
	return err
}
