package memory

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/threadclaim/threadclaim/core"
)

var (
	_ core.Storage       = (*Store)(nil)
	_ core.PendingLister = (*Store)(nil)
	_ core.EventWatcher  = (*Store)(nil)
)

// Store holds threads and leases in memory. It is safe for concurrent use.
// The zero Store is an empty one, as New() returns.
type Store struct {
	mu      sync.Mutex
	order   []core.ThreadID
	threads map[core.ThreadID]*thread
	leases  map[core.ThreadID]core.Lease
	// held records every (thread, holder) that acquired a lease: a holder
	// acquires a thread's lease once (core.ErrHolderReused).
	held        map[heldLease]struct{}
	reuseHolder bool // the mutant: holder freshness not enforced
	copyReads   bool // WithCopiedReads

	watchMu  sync.Mutex
	watchers map[chan struct{}]struct{} // WatchEvents' channels
}

type heldLease struct {
	thread core.ThreadID
	holder core.Holder
}

// Option configures a Store.
type Option func(*Store)

// WithHolderReuseForTesting switches holder freshness off: a holder may
// acquire a lease it held before. It exists for the mutation test that
// shows what freshness prevents (a round left behind passing a later
// claim's fence); no deployment reaches it.
func WithHolderReuseForTesting() Option { return func(s *Store) { s.reuseHolder = true } }

// WithCopiedReads makes a transaction's Thread return a copy of the
// thread as it is at the read, as a storage that reads rows (PostgreSQL)
// does, where by default it returns the Store's own state, which later
// writes of the same transaction change in place. With copies, code that
// reads a thread and then writes it sees what it read, not what it wrote:
// a plan made from a read taken before its own write (a fused plan's
// defect) shows on memory as it would on PostgreSQL. The simulations use
// it; a program gains nothing from it.
func WithCopiedReads() Option { return func(s *Store) { s.copyReads = true } }

type thread struct {
	state  *core.Thread
	events []core.Event
}

// New returns an empty Store.
func New(opts ...Option) *Store {
	s := &Store{threads: map[core.ThreadID]*thread{}, leases: map[core.ThreadID]core.Lease{}, held: map[heldLease]struct{}{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Clone returns a store that holds what s holds now: every thread, its
// events, the leases and the holders that acquired them. The two share
// nothing afterwards. A simulation uses it to fork an execution at a
// point it goes on from in several ways.
func (s *Store) Clone() *Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Store{
		order:       append([]core.ThreadID(nil), s.order...),
		threads:     make(map[core.ThreadID]*thread, len(s.threads)),
		leases:      make(map[core.ThreadID]core.Lease, len(s.leases)),
		held:        make(map[heldLease]struct{}, len(s.held)),
		reuseHolder: s.reuseHolder,
		copyReads:   s.copyReads,
	}
	for id, th := range s.threads {
		c.threads[id] = &thread{state: th.state.Clone(), events: append([]core.Event(nil), th.events...)}
	}
	for k, l := range s.leases {
		c.leases[k] = l
	}
	for k := range s.held {
		c.held[k] = struct{}{}
	}
	return c
}

// Update runs fn holding the store's lock. fn's writes change the store in
// place and leave an undo record; when fn returns an error the records are
// played back, newest first, so nothing fn wrote is kept.
//
// The transaction is fn's only while fn runs: a call of it after Update
// returned is refused (core.ErrInvalidArgument) and writes nothing. A fn
// that panics has its writes undone as one that returns an error, and the
// panic goes on. fn must not call the Store itself (Update, PendingThreads,
// Clone): it holds the lock they wait for.
func (s *Store) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.threads == nil { // the zero Store
		s.threads, s.leases, s.held = map[core.ThreadID]*thread{}, map[core.ThreadID]core.Lease{}, map[heldLease]struct{}{}
	}
	tx := &txn{s: s}
	committed := false
	defer func() {
		tx.over.Store(true)
		if !committed { // an error, or a panic
			for i := len(tx.undo) - 1; i >= 0; i-- {
				tx.undo[i]()
			}
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	committed = true
	if tx.appended {
		s.notify()
	}
	return nil
}

// WatchEvents returns a channel that receives after each commit that
// appended events to any thread (coalesced: while a receive is pending,
// later commits add none, and the pending one comes after them). It is
// closed when ctx ends.
func (s *Store) WatchEvents(ctx context.Context, _ core.ThreadID) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	s.watchMu.Lock()
	if s.watchers == nil {
		s.watchers = map[chan struct{}]struct{}{}
	}
	s.watchers[ch] = struct{}{}
	s.watchMu.Unlock()
	go func() {
		<-ctx.Done()
		s.watchMu.Lock()
		delete(s.watchers, ch)
		close(ch)
		s.watchMu.Unlock()
	}()
	return ch, nil
}

// notify wakes every watcher; it is called holding s.mu, after a commit.
func (s *Store) notify() {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	for ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default: // one is pending, and comes after this commit
		}
	}
}

// txn is one transaction, holding the store's lock.
type txn struct {
	s        *Store
	undo     []func()
	appended bool        // an event was appended: watchers are told at commit
	over     atomic.Bool // its Update returned: the lock is no longer held
}

// errTxOver refuses a call of a transaction whose Update has returned.
var errTxOver = fmt.Errorf("%w: transaction used after its Update returned", core.ErrInvalidArgument)

var _ core.Transaction = (*txn)(nil)

func (t *txn) read(id core.ThreadID) (*thread, error) {
	if th, ok := t.s.threads[id]; ok {
		return th, nil
	}
	return nil, fmt.Errorf("thread %q: %w", id, core.ErrUnknownThread)
}

func (t *txn) CreateThread(_ context.Context, id core.ThreadID) error {
	if t.over.Load() {
		return errTxOver
	}
	if err := core.CheckText("thread id", string(id)); err != nil {
		return err // refused as PostgreSQL refuses it
	}
	if _, ok := t.s.threads[id]; ok {
		return fmt.Errorf("thread %q: %w", id, core.ErrThreadExists)
	}
	t.s.threads[id] = &thread{state: core.NewThread(id)}
	t.s.order = append(t.s.order, id)
	t.undo = append(t.undo, func() {
		delete(t.s.threads, id)
		t.s.order = t.s.order[:len(t.s.order)-1]
	})
	return nil
}

func (t *txn) ThreadIDs(context.Context) ([]core.ThreadID, error) {
	if t.over.Load() {
		return nil, errTxOver
	}
	return append([]core.ThreadID(nil), t.s.order...), nil
}

func (t *txn) Thread(_ context.Context, id core.ThreadID) (*core.Thread, error) {
	if t.over.Load() {
		return nil, errTxOver
	}
	th, err := t.read(id)
	if err != nil {
		return nil, err
	}
	if t.s.copyReads {
		return th.state.Clone(), nil
	}
	return th.state, nil
}

func (t *txn) Events(_ context.Context, id core.ThreadID) ([]core.Event, error) {
	if t.over.Load() {
		return nil, errTxOver
	}
	th, err := t.read(id)
	if err != nil {
		return nil, err
	}
	return append([]core.Event(nil), th.events...), nil
}

// EventsAfter returns the thread's log after position after (the events
// Follow has not yet delivered).
func (t *txn) EventsAfter(_ context.Context, id core.ThreadID, after core.Position) ([]core.Event, error) {
	if t.over.Load() {
		return nil, errTxOver
	}
	th, err := t.read(id)
	if err != nil {
		return nil, err
	}
	if int(after) > len(th.events) {
		return nil, fmt.Errorf("%w: thread %q: position %d is past the log's end (%d events)", core.ErrInvalidArgument, id, after, len(th.events))
	}
	return append([]core.Event(nil), th.events[after:]...), nil
}

func (t *txn) Bump(_ context.Context, id core.ThreadID) (uint64, error) {
	if t.over.Load() {
		return 0, errTxOver
	}
	th, err := t.read(id)
	if err != nil {
		return 0, err
	}
	old := th.state.Version
	t.undo = append(t.undo, func() { th.state.Version = old })
	th.state.Version++
	return th.state.Version, nil
}

// Append folds ev into the thread in place. Its undo restores the
// thread's header (the slices' lengths, the version, the runs, which
// Apply replaces and never changes in place) and the one request the
// event may change; appended elements past a restored length are
// unreachable.
func (t *txn) Append(_ context.Context, id core.ThreadID, ev core.Event) error {
	if t.over.Load() {
		return errTxOver
	}
	if err := checkEvent(ev); err != nil {
		return err
	}
	th, err := t.read(id)
	if err != nil {
		return err
	}
	if err := th.state.Check(ev); err != nil {
		return err
	}
	st := th.state
	header, events := *st, len(th.events)
	var restore func()
	switch ev.Kind {
	case core.Answered:
		i, old := ev.Request-1, st.Requests[ev.Request-1]
		restore = func() { st.Requests[i] = old }
	}
	t.undo = append(t.undo, func() {
		if restore != nil {
			restore()
		}
		*st = header
		th.events = th.events[:events]
	})
	st.Apply(ev)
	th.events = append(th.events, ev)
	t.appended = true
	return nil
}

func (t *txn) SaveTaken(_ context.Context, id core.ThreadID, taken core.Seq) error {
	if t.over.Load() {
		return errTxOver
	}
	th, err := t.read(id)
	if err != nil {
		return err
	}
	old := th.state.Taken
	t.undo = append(t.undo, func() { th.state.Taken = old })
	th.state.Taken = taken
	return nil
}

func (t *txn) Lease(_ context.Context, id core.ThreadID) (core.Lease, error) {
	if t.over.Load() {
		return core.Lease{}, errTxOver
	}
	return t.s.leases[id], nil
}

func (t *txn) HoldsLease(_ context.Context, id core.ThreadID, holder core.Holder) (bool, core.Lease, error) {
	if t.over.Load() {
		return false, core.Lease{}, errTxOver
	}
	l := t.s.leases[id]
	return holder != "" && l.Holder == holder, l, nil
}

func (t *txn) PutLease(_ context.Context, l core.Lease) error {
	if t.over.Load() {
		return errTxOver
	}
	if l.Thread == "" || l.Holder == "" {
		return fmt.Errorf("%w: lease with empty thread or holder", core.ErrInvalidArgument)
	}
	if err := core.CheckText("holder", string(l.Holder)); err != nil {
		return err
	}
	if _, err := t.read(l.Thread); err != nil {
		return err
	}
	if old := t.s.leases[l.Thread]; old.Holder != l.Holder {
		h := heldLease{l.Thread, l.Holder}
		switch _, ok := t.s.held[h]; {
		case ok && !t.s.reuseHolder:
			return fmt.Errorf("holder %q of thread %q's lease: %w", l.Holder, l.Thread, core.ErrHolderReused)
		case !ok:
			t.s.held[h] = struct{}{}
			t.undo = append(t.undo, func() { delete(t.s.held, h) })
		}
	}
	t.saveLease(l.Thread)
	t.s.leases[l.Thread] = l
	return nil
}

func (t *txn) DeleteLease(_ context.Context, id core.ThreadID) error {
	if t.over.Load() {
		return errTxOver
	}
	if _, err := t.read(id); err != nil {
		return err
	}
	t.saveLease(id)
	delete(t.s.leases, id)
	return nil
}

func (t *txn) saveLease(id core.ThreadID) {
	old, had := t.s.leases[id]
	t.undo = append(t.undo, func() {
		if had {
			t.s.leases[id] = old
		} else {
			delete(t.s.leases, id)
		}
	})
}

// PendingThreads lists the threads with a message not yet taken or a run
// still active, in creation order, each with its lease.
func (s *Store) PendingThreads(ctx context.Context) ([]core.PendingThread, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []core.PendingThread
	for _, id := range s.order {
		t := s.threads[id].state
		if t.Unconsumed() || len(t.ActiveRuns()) > 0 {
			out = append(out, core.PendingThread{ID: id, Lease: s.leases[id]})
		}
	}
	return out, nil
}

// checkEvent refuses an event whose strings PostgreSQL would refuse (a
// NUL byte, invalid UTF-8), with core.CheckText's error, as the
// PostgreSQL storage does: the two storages take the same inputs.
func checkEvent(ev core.Event) error {
	if err := core.CheckText("event text", ev.Text); err != nil {
		return err
	}
	return core.CheckText("event holder", string(ev.Holder))
}
