package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// WatchEvents delivers a notice after each commit, by any process, that
// wrote to the thread (an event's append among them): it is
// core.EventWatcher, which core.Workspace.Follow waits on. It marks the
// thread followed (its row's followed_until, set followerTTL ahead and
// renewed every followerRenew; migration 0008): only a followed thread's
// writes NOTIFY the channel Options.Schema+".events", so the writes of
// threads nobody follows do not wait for PostgreSQL's notification queue
// at commit; a thread stays followed up to followerTTL after its last
// follower stopped. The Store's watchers share one LISTEN connection of
// its own, outside the pool, open while any watches; when it breaks it
// reconnects and every watcher gets a notice once it has (writes
// committed in between were not notified: a follower reads its log
// again). The mark is an UPDATE of the thread's row, which every write
// locks: a write either committed before the mark did (and a read after
// WatchEvents returns sees it) or updates the row after it, and its
// trigger sees the mark; so no write falls between. The channel is closed
// when ctx ends. It returns an error
// when the shared connection cannot be opened or the mark fails.
func (s *Store) WatchEvents(ctx context.Context, id core.ThreadID) (<-chan struct{}, error) {
	out, err := s.hub.subscribe(s, id)
	if err != nil {
		return nil, err
	}
	mark := func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.follow, string(id), followerTTL.Seconds())
		return err
	}
	if err := mark(ctx); err != nil {
		s.hub.unsubscribe(id, out)
		return nil, err
	}
	go func() {
		defer s.hub.unsubscribe(id, out) // closes out
		renew := time.NewTicker(followerRenew)
		defer renew.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-renew.C:
				_ = mark(ctx) // a failure is retried at the next tick; the mark lasts followerTTL
			}
		}
	}()
	return out, nil
}

// followerTTL is how long a mark of a followed thread lasts unrenewed, and
// followerRenew how often WatchEvents renews it.
const (
	followerTTL   = 2 * time.Minute
	followerRenew = 30 * time.Second
)

// eventHub shares one LISTEN on the events channel among a Store's
// watchers.
type eventHub struct {
	mu     sync.Mutex
	subs   map[core.ThreadID]map[chan struct{}]struct{}
	stop   context.CancelFunc // ends the listener; nil while none runs
	closed bool               // the Store is closed: no new watcher
}

// subscribe adds a watcher of thread id, starting the listener when none
// runs; the LISTEN is active when it returns.
func (h *eventHub) subscribe(s *Store, id core.ThreadID) (chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errStoreClosed
	}
	if h.stop == nil {
		lctx, stop := context.WithCancel(context.Background())
		ids, err := s.listenOn(lctx, s.schema+".events")
		if err != nil {
			stop()
			return nil, err
		}
		h.stop = stop
		go h.run(ids)
	}
	if h.subs == nil {
		h.subs = map[core.ThreadID]map[chan struct{}]struct{}{}
	}
	if h.subs[id] == nil {
		h.subs[id] = map[chan struct{}]struct{}{}
	}
	ch := make(chan struct{}, 1)
	h.subs[id][ch] = struct{}{}
	return ch, nil
}

// unsubscribe removes the watcher and closes its channel; the last one
// stops the listener.
func (h *eventHub) unsubscribe(id core.ThreadID, ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[id], ch)
	if len(h.subs[id]) == 0 {
		delete(h.subs, id)
	}
	close(ch)
	if len(h.subs) == 0 && h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// run hands each notification to the watchers of its thread (every
// watcher for the empty payload: a reconnection, or an id too long),
// coalesced: a watcher with a notice pending gets no second.
func (h *eventHub) run(ids <-chan core.ThreadID) {
	for t := range ids {
		h.mu.Lock()
		for id, chans := range h.subs {
			if t != "" && t != id {
				continue
			}
			for ch := range chans {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
		h.mu.Unlock()
	}
}

// close stops the listener and refuses new watchers.
func (h *eventHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
}
