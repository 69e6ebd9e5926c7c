package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// handle is the core.Transaction fn is given: one attempt's transaction,
// and nothing after it. The Store reuses transactions' values (Store.txns),
// so fn is not given the *txn itself: a tx kept past its Update or View
// would reach whichever transaction had the value then. Each attempt
// has a handle of its own (newHandle), ended when the attempt ends; every
// method of an ended handle returns errTxOver and touches neither the txn
// nor the server.
type handle struct {
	t    *txn
	over atomic.Bool // the attempt ended: t is no longer this handle's
}

// handleSlab is how many handles a txn allocates at once (16 bytes each).
const handleSlab = 64

// newHandle returns a handle to t that no fn has had: the next of t's
// slab, which is never handed out again, so that a kept handle stays
// ended. A slab is one allocation for handleSlab attempts, where a handle
// allocated alone would be one an attempt (BenchmarkUpdateOverhead); a
// kept handle keeps its slab (1 KB) alive, and its txn, as before.
func (t *txn) newHandle() *handle {
	if len(t.handles) == 0 {
		t.handles = make([]handle, handleSlab)
	}
	h := &t.handles[0]
	t.handles = t.handles[1:]
	h.t = t
	return h
}

// errTxOver refuses a call of a transaction whose Update or View has
// returned (store/memory's error, for the same misuse).
var errTxOver = fmt.Errorf("postgres: %w: transaction used after its Update or View returned", core.ErrInvalidArgument)

// The interfaces core looks for on a Transaction by type assertion, the
// unexported ones spelled out here: the handle has each that the txn has,
// so core's fast paths find it (TestHandleHasTxnMethods checks that no
// method of the txn is missing).
type (
	messagePoster interface {
		PostMessage(ctx context.Context, id core.ThreadID, at time.Time, text string) (core.Seq, uint64, core.Seq, error)
	}
	leaseClaimer interface {
		ClaimLease(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires time.Time) (*core.Thread, core.Lease, uint64, error)
	}
	leaseStartClaimer interface {
		ClaimLeaseThenStart(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires, at time.Time, plan func(*core.Thread) (core.Event, bool)) (*core.Thread, core.Lease, uint64, core.Event, error)
	}
	traceKeeper       interface{ KeepsTrace() bool }
	eventsAfterReader interface {
		EventsAfter(ctx context.Context, id core.ThreadID, after core.Position) ([]core.Event, error)
	}
)

var (
	_ core.Transaction    = (*handle)(nil)
	_ core.TraceLog       = (*handle)(nil)
	_ core.TraceLogReader = (*handle)(nil)
	_ messagePoster       = (*handle)(nil)
	_ leaseClaimer        = (*handle)(nil)
	_ leaseStartClaimer   = (*handle)(nil)
	_ traceKeeper         = (*handle)(nil)
	_ eventsAfterReader   = (*handle)(nil)

	_ messagePoster     = (*txn)(nil)
	_ leaseClaimer      = (*txn)(nil)
	_ leaseStartClaimer = (*txn)(nil)
	_ traceKeeper       = (*txn)(nil)
	_ eventsAfterReader = (*txn)(nil)
)

// ended reports whether the handle's attempt has ended.
func (h *handle) ended() bool { return h.over.Load() }

func (h *handle) CreateThread(ctx context.Context, id core.ThreadID) error {
	if h.ended() {
		return errTxOver
	}
	return h.t.CreateThread(ctx, id)
}

func (h *handle) ThreadIDs(ctx context.Context) ([]core.ThreadID, error) {
	if h.ended() {
		return nil, errTxOver
	}
	return h.t.ThreadIDs(ctx)
}

func (h *handle) Thread(ctx context.Context, id core.ThreadID) (*core.Thread, error) {
	if h.ended() {
		return nil, errTxOver
	}
	return h.t.Thread(ctx, id)
}

func (h *handle) Events(ctx context.Context, id core.ThreadID) ([]core.Event, error) {
	if h.ended() {
		return nil, errTxOver
	}
	return h.t.Events(ctx, id)
}

// EventsAfter is txn.EventsAfter.
func (h *handle) EventsAfter(ctx context.Context, id core.ThreadID, after core.Position) ([]core.Event, error) {
	if h.ended() {
		return nil, errTxOver
	}
	return h.t.EventsAfter(ctx, id, after)
}

func (h *handle) Bump(ctx context.Context, id core.ThreadID) (uint64, error) {
	if h.ended() {
		return 0, errTxOver
	}
	return h.t.Bump(ctx, id)
}

func (h *handle) Append(ctx context.Context, id core.ThreadID, ev core.Event) error {
	if h.ended() {
		return errTxOver
	}
	return h.t.Append(ctx, id, ev)
}

func (h *handle) SaveTaken(ctx context.Context, id core.ThreadID, taken core.Seq) error {
	if h.ended() {
		return errTxOver
	}
	return h.t.SaveTaken(ctx, id, taken)
}

func (h *handle) Lease(ctx context.Context, id core.ThreadID) (core.Lease, error) {
	if h.ended() {
		return core.Lease{}, errTxOver
	}
	return h.t.Lease(ctx, id)
}

func (h *handle) HoldsLease(ctx context.Context, id core.ThreadID, holder core.Holder) (bool, core.Lease, error) {
	if h.ended() {
		return false, core.Lease{}, errTxOver
	}
	return h.t.HoldsLease(ctx, id, holder)
}

func (h *handle) PutLease(ctx context.Context, l core.Lease) error {
	if h.ended() {
		return errTxOver
	}
	return h.t.PutLease(ctx, l)
}

func (h *handle) DeleteLease(ctx context.Context, id core.ThreadID) error {
	if h.ended() {
		return errTxOver
	}
	return h.t.DeleteLease(ctx, id)
}

// PostMessage is txn.PostMessage.
func (h *handle) PostMessage(ctx context.Context, id core.ThreadID, at time.Time, text string) (core.Seq, uint64, core.Seq, error) {
	if h.ended() {
		return 0, 0, 0, errTxOver
	}
	return h.t.PostMessage(ctx, id, at, text)
}

// ClaimLease is txn.ClaimLease.
func (h *handle) ClaimLease(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires time.Time) (*core.Thread, core.Lease, uint64, error) {
	if h.ended() {
		return nil, core.Lease{}, 0, errTxOver
	}
	return h.t.ClaimLease(ctx, id, holder, now, expires)
}

// ClaimLeaseThenStart is txn.ClaimLeaseThenStart; an ended handle does
// not call plan.
func (h *handle) ClaimLeaseThenStart(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires, at time.Time, plan func(*core.Thread) (core.Event, bool)) (*core.Thread, core.Lease, uint64, core.Event, error) {
	if h.ended() {
		return nil, core.Lease{}, 0, core.Event{}, errTxOver
	}
	return h.t.ClaimLeaseThenStart(ctx, id, holder, now, expires, at, plan)
}

// LogTrace is txn.LogTrace; an ended handle refuses it even when the
// Store keeps no trace lines (where the txn's does nothing).
func (h *handle) LogTrace(ctx context.Context, ev core.TraceEvent) error {
	if h.ended() {
		return errTxOver
	}
	return h.t.LogTrace(ctx, ev)
}

// KeepsTrace is txn.KeepsTrace; an ended handle returns false, the zero
// value, which says that LoggedTrace's answer means nothing (and an
// ended handle's LoggedTrace answers only errTxOver).
func (h *handle) KeepsTrace() bool {
	if h.ended() {
		return false
	}
	return h.t.KeepsTrace()
}

// LoggedTrace is txn.LoggedTrace.
func (h *handle) LoggedTrace(ctx context.Context, id core.ThreadID, tick uint64) (core.TraceEvent, bool, error) {
	if h.ended() {
		return core.TraceEvent{}, false, errTxOver
	}
	return h.t.LoggedTrace(ctx, id, tick)
}
