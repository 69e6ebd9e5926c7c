package core

import (
	"context"
	"fmt"
	"time"
)

// EventWatcher is implemented by a Storage that tells when threads' logs
// grow, so that a follower of a thread's events (Workspace.Follow) waits
// for them instead of polling.
type EventWatcher interface {
	// WatchEvents returns a channel that receives after each commit that
	// appended events to the thread's log, once the watch has begun (when
	// WatchEvents returned). A receive may also come for no new event
	// (another thread's, a reconnection), and receives may be coalesced,
	// but none is lost: after such a commit, some receive comes after it.
	// The channel is closed when ctx ends. It returns an error when
	// storage cannot watch.
	WatchEvents(ctx context.Context, id ThreadID) (<-chan struct{}, error)
}

// eventsAfterReader is implemented by a Transaction that reads the part
// of a thread's log after a position, so that Follow reads on each wake
// only what is new, not the whole log: EventsAfter returns the events
// after position after, oldest first, ErrUnknownThread, and
// ErrInvalidArgument for a position past the log's end. (Unexported,
// as the library's exported identifiers have a budget: a storage
// implements it by the method alone; both of this module's do.)
type eventsAfterReader interface {
	EventsAfter(ctx context.Context, id ThreadID, after Position) ([]Event, error)
}

// Position is where an event sits in its thread's log: 1 for the first
// event, one more for each after it. The log is append-only, so a
// position names one event forever; a follower that resumes after the
// last position it handled (Workspace.Follow) misses none and sees none
// twice.
type Position int64

// ThreadEvent is one event of a thread's log with its position.
type ThreadEvent struct {
	Thread   ThreadID
	Position Position
	Event
}

// followPoll is how often Follow reads the log when storage is no
// EventWatcher, or as a safety net when it is one.
const followPoll = time.Second

// Follow calls fn with each event of the thread's log after position
// after (0: from the first), in log order, and then with each event
// appended later, until ctx ends or fn returns an error. The events are
// the thread's story as a person sees it: MessagePosted, RunStarted,
// Asked, Answered (a Reply consumed an answer), RunEnded, RunOutput (the
// run's answer to the person, written with its end), RunAbandoned,
// RunSteered (a message a run was given while it worked, recorded), and
// RunRefused (a run's start the fence refused: a notice, which changes
// none of the thread's state). The other refusals (ReplyFenced,
// AbandonFenced, EndRefused, SteerRefused) are no events: a refused end
// or steering record follows the RunAbandoned that refused it, and the
// runner's OnTurn reports each.
//
// To resume, call Follow again with the Position of the last event fn
// handled: the log is append-only, so nothing is missed or repeated. When
// storage is an EventWatcher, Follow waits for its notices (and reads the
// log every second as well); otherwise it reads the log every second, on
// the workspace's clock. Follow writes nothing and traces nothing.
//
// It returns nil when ctx ends, fn's error when fn returns one,
// ErrUnknownThread, ErrInvalidArgument for a nil fn, a negative position
// or one past the log's end (no follower was given it; storage that lost
// commits it had acknowledged can have a shorter log than a follower
// saw), and storage's errors.
func (w *Workspace) Follow(ctx context.Context, id ThreadID, after Position, fn func(ThreadEvent) error) error {
	if ctx == nil {
		return nilContext("Follow")
	}
	switch {
	case after < 0:
		return fmt.Errorf("follow thread %q: %w: position %d", id, ErrInvalidArgument, after)
	case fn == nil:
		return fmt.Errorf("follow thread %q: %w: no function to call", id, ErrInvalidArgument)
	}
	var notices <-chan struct{}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if ew, ok := w.storage.(EventWatcher); ok {
		var err error
		if notices, err = ew.WatchEvents(wctx, id); err != nil {
			return fmt.Errorf("follow thread %q: %w", id, err)
		}
	}
	for {
		// The watch began before this read: a commit after the read
		// sends a notice this loop waits for.
		var evs []Event // the log after position after
		err := w.view(ctx, func(ctx context.Context, tx Transaction) error {
			var err error
			if r, ok := tx.(eventsAfterReader); ok {
				evs, err = r.EventsAfter(ctx, id, after)
				return err
			}
			if evs, err = tx.Events(ctx, id); err != nil {
				return err
			}
			if int(after) > len(evs) {
				return fmt.Errorf("%w: thread %q: position %d is past the log's end (%d events)", ErrInvalidArgument, id, after, len(evs))
			}
			evs = evs[after:]
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("follow thread %q: %w", id, err)
		}
		for _, ev := range evs {
			if err := fn(ThreadEvent{Thread: id, Position: after + 1, Event: ev}); err != nil {
				return err
			}
			after++
		}
		if !w.awaitNotice(ctx, &notices) {
			return nil
		}
	}
}

// awaitNotice waits for a notice that the thread may have new events, or
// for followPoll; it reports false when ctx ended. A closed notice channel
// leaves polling.
func (w *Workspace) awaitNotice(ctx context.Context, notices *<-chan struct{}) bool {
	poll := w.clock.After(followPoll)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-poll:
			return true
		case _, ok := <-*notices:
			if ok {
				return true
			}
			*notices = nil
		}
	}
}
