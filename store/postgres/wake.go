package postgres

import (
	"context"

	"github.com/threadclaim/threadclaim/core"
)

// Wakeups adapts Listen to runner.Config.Wake: a channel that receives
// whenever a message is posted to the Store's schema, by any process, once
// the post commits. It is buffered (one) and never blocks the listener: a
// burst of posts while the runner is busy coalesces into one wake-up, which
// is all a runner needs, since a wake-up makes it look at every thread.
// A reconnection of the listening connection (Listen's empty ThreadID,
// after which posts may have been missed) is a wake-up too.
//
// Wake-ups are hints, never claims, and can come late or not at all: a
// listening connection cut off without the client noticing keeps silent
// until TCP gives up on it. Polling (runner.Config.PollEvery) stays the
// fallback and should stay on; with wake-ups it can be slow, since it
// only bounds how late work is found when a wake-up is lost.
//
// The channel is closed when ctx ends. Pass the context the runner's Run
// gets, or one that outlives it: a closed channel is always ready, and a
// runner still running would then look for work without pause.
//
// It returns Listen's error when the first connection or its LISTEN fails.
func (s *Store) Wakeups(ctx context.Context) (<-chan struct{}, error) {
	ids, err := s.Listen(ctx)
	if err != nil {
		return nil, err
	}
	return coalesce(ids), nil
}

// coalesce turns each receive from ids into a send on a channel buffered
// one that never blocks: while a wake-up is pending, more are dropped. It
// closes its channel once ids is closed.
func coalesce(ids <-chan core.ThreadID) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for range ids {
			select {
			case out <- struct{}{}:
			default: // one is pending already
			}
		}
	}()
	return out
}
