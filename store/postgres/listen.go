package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadclaim/threadclaim/core"
)

// Listen delivers a wake-up for every message posted to the Store's
// schema, by any process, once the post commits: the id of the thread it
// was posted to. A wake-up is a hint that a thread has work, never a
// claim; a runner polls as well, since wake-ups can be missed.
//
// Listen holds a connection of its own, outside the pool, until ctx ends;
// then it closes the channel. When that connection breaks, Listen
// reconnects (retrying every second until ctx ends) and delivers the
// empty ThreadID once it has: posts made in between were not seen, so
// the receiver should look at every thread. A receiver that falls behind
// makes the server queue the notifications; none is dropped.
//
// It returns an error when the first connection or its LISTEN fails.
func (s *Store) Listen(ctx context.Context) (<-chan core.ThreadID, error) {
	return s.listenOn(ctx, s.channel)
}

// WatchEvents delivers a notice after each commit, by any process, that
// appended events to the thread's log: it is core.EventWatcher, which
// core.Workspace.Follow waits on. It LISTENs on the channel
// Options.Schema+".events" on a connection of its own, and marks the
// thread followed (its row's followed_until, set followerTTL ahead and
// renewed every followerRenew; migration 0008): only a followed thread's
// writes NOTIFY, so the writes of threads nobody follows do not wait for
// PostgreSQL's notification queue at commit. A thread stays followed up
// to followerTTL after its last follower stopped. A write whose statement
// ran before the mark committed and that commits after the follower's
// first read is not notified; Follow's own poll finds it. When the
// connection breaks it reconnects and delivers a notice once it has
// (events committed in between were not notified: a follower reads its
// thread's log again). The channel is closed when ctx ends. It returns an
// error when the first connection, its LISTEN or the mark fails.
func (s *Store) WatchEvents(ctx context.Context, id core.ThreadID) (<-chan struct{}, error) {
	ctx, cancel := context.WithCancel(ctx)
	ids, err := s.listenOn(ctx, s.schema+".events")
	if err != nil {
		cancel()
		return nil, err
	}
	mark := func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.q.follow, string(id), followerTTL.Seconds())
		return err
	}
	if err := mark(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("postgres: watch events of thread %q: %w", id, err)
	}
	out := make(chan struct{}, 1)
	notice := func() {
		select {
		case out <- struct{}{}:
		default: // one is pending, and comes after this commit
		}
	}
	go func() {
		defer close(out)
		defer cancel()
		renew := time.NewTicker(followerRenew)
		defer renew.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-renew.C:
				_ = mark(ctx) // a failure is retried at the next tick; the row lasts followerTTL
			case t, ok := <-ids:
				if !ok {
					return
				}
				if t == "" { // reconnected: the mark may have expired meanwhile
					_ = mark(ctx)
				}
				if t == id || t == "" {
					notice()
				}
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

// listenOn delivers the payloads of channel's notifications, as Listen
// says.
func (s *Store) listenOn(ctx context.Context, channel string) (<-chan core.ThreadID, error) {
	conn, err := s.listen(ctx, channel)
	if err != nil {
		return nil, err
	}
	out := make(chan core.ThreadID, 16)
	go func() {
		defer close(out)
		defer func() { closeConn(conn) }()
		send := func(id core.ThreadID) bool {
			select {
			case out <- id:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			n, err := conn.WaitForNotification(ctx)
			if err == nil {
				if !send(core.ThreadID(n.Payload)) {
					return
				}
				continue
			}
			if ctx.Err() != nil {
				return
			}
			closeConn(conn)
			for conn, err = s.listen(ctx, channel); err != nil; conn, err = s.listen(ctx, channel) {
				t := time.NewTimer(time.Second)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			if !send("") {
				return
			}
		}
	}()
	return out, nil
}

func (s *Store) listen(ctx context.Context, channel string) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("postgres: listen: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("postgres: listen: %w", err)
	}
	return conn, nil
}

func closeConn(c *pgx.Conn) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
