// Package memory is an in-memory core.Storage: one lock serialises every
// transaction, and a lease acquire takes that lock as any transaction does,
// so a fenced write's HoldsLease stays true until its transaction ends.
//
// It is what the command-line tool and the simulations run on by default,
// and the reference the PostgreSQL storage is held to by storetest.
package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/threadclaim/threadclaim/core"
)

var _ core.Storage = (*Store)(nil)

// Store holds threads and leases in memory. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	order   []core.ThreadID
	threads map[core.ThreadID]*thread
	leases  map[string]core.Lease
}

type thread struct {
	state  *core.Thread
	events []core.Event
}

// New returns an empty Store.
func New() *Store {
	return &Store{threads: map[core.ThreadID]*thread{}, leases: map[string]core.Lease{}}
}

// Update runs fn holding the store's lock. fn's writes go to copies of what
// they change; the copies replace the originals when fn returns nil, and
// are dropped when it returns an error.
func (s *Store) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := &txn{s: s}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	tx.commit()
	return nil
}

// txn is one transaction: reads fall through to the store, writes land in
// copy-on-write shadows.
type txn struct {
	s       *Store
	created []core.ThreadID
	threads map[core.ThreadID]*thread // shadows of threads written
	leases  map[string]*core.Lease    // shadows of leases written; nil value = deleted
}

var _ core.Transaction = (*txn)(nil)

func (t *txn) commit() {
	t.s.order = append(t.s.order, t.created...)
	for id, th := range t.threads {
		t.s.threads[id] = th
	}
	for k, l := range t.leases {
		if l == nil {
			delete(t.s.leases, k)
		} else {
			t.s.leases[k] = *l
		}
	}
}

func (t *txn) read(id core.ThreadID) (*thread, error) {
	if th, ok := t.threads[id]; ok {
		return th, nil
	}
	if th, ok := t.s.threads[id]; ok {
		return th, nil
	}
	return nil, fmt.Errorf("thread %q: %w", id, core.ErrUnknownThread)
}

// shadow returns the transaction's own copy of the thread, made on first write.
func (t *txn) shadow(id core.ThreadID) (*thread, error) {
	if th, ok := t.threads[id]; ok {
		return th, nil
	}
	th, err := t.read(id)
	if err != nil {
		return nil, err
	}
	c := &thread{state: th.state.Clone(), events: th.events[:len(th.events):len(th.events)]}
	if t.threads == nil {
		t.threads = map[core.ThreadID]*thread{}
	}
	t.threads[id] = c
	return c, nil
}

func (t *txn) CreateThread(_ context.Context, id core.ThreadID) error {
	if _, err := t.read(id); err == nil {
		return fmt.Errorf("thread %q: %w", id, core.ErrThreadExists)
	}
	if t.threads == nil {
		t.threads = map[core.ThreadID]*thread{}
	}
	t.threads[id] = &thread{state: core.NewThread(id)}
	t.created = append(t.created, id)
	return nil
}

func (t *txn) ThreadIDs(context.Context) ([]core.ThreadID, error) {
	ids := append([]core.ThreadID(nil), t.s.order...)
	return append(ids, t.created...), nil
}

func (t *txn) Thread(_ context.Context, id core.ThreadID) (*core.Thread, error) {
	th, err := t.read(id)
	if err != nil {
		return nil, err
	}
	return th.state, nil
}

func (t *txn) Events(_ context.Context, id core.ThreadID) ([]core.Event, error) {
	th, err := t.read(id)
	if err != nil {
		return nil, err
	}
	return append([]core.Event(nil), th.events...), nil
}

func (t *txn) Bump(_ context.Context, id core.ThreadID) (uint64, error) {
	th, err := t.shadow(id)
	if err != nil {
		return 0, err
	}
	th.state.Version++
	return th.state.Version, nil
}

func (t *txn) Append(_ context.Context, id core.ThreadID, ev core.Event) error {
	th, err := t.shadow(id)
	if err != nil {
		return err
	}
	if err := th.state.Check(ev); err != nil {
		return err
	}
	th.state.Apply(ev)
	th.events = append(th.events, ev)
	return nil
}

func (t *txn) SaveTaken(_ context.Context, id core.ThreadID, taken core.Seq) error {
	th, err := t.shadow(id)
	if err != nil {
		return err
	}
	th.state.Taken = taken
	return nil
}

func (t *txn) Lease(_ context.Context, key string) (core.Lease, error) {
	if l, ok := t.leases[key]; ok {
		if l == nil {
			return core.Lease{}, nil
		}
		return *l, nil
	}
	return t.s.leases[key], nil
}

func (t *txn) HoldsLease(ctx context.Context, key string, holder core.Holder) (bool, core.Lease, error) {
	l, err := t.Lease(ctx, key)
	if err != nil {
		return false, core.Lease{}, err
	}
	return holder != "" && l.Holder == holder, l, nil
}

func (t *txn) PutLease(_ context.Context, l core.Lease) error {
	if l.Key == "" || l.Holder == "" {
		return fmt.Errorf("%w: lease with empty key or holder", core.ErrInvalidArgument)
	}
	t.setLease(l.Key, &l)
	return nil
}

func (t *txn) DeleteLease(_ context.Context, key string) error {
	t.setLease(key, nil)
	return nil
}

func (t *txn) setLease(key string, l *core.Lease) {
	if t.leases == nil {
		t.leases = map[string]*core.Lease{}
	}
	t.leases[key] = l
}
