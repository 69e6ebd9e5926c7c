package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadclaim/threadclaim/core"
)

// Listen delivers a wake-up, the thread's id, each time work for a thread
// that nobody holds commits in the Store's schema, by any process: a
// message posted to a thread with no live lease (none, or one expired by
// the server's clock), or a thread released with work left. A post to a
// thread whose lease is live wakes nobody: its holder plans the message,
// or its release wakes. A wake-up is a hint that a thread has work, never
// a claim; a runner polls as well, since wake-ups can be missed.
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

// listenOn delivers the payloads of channel's notifications, as Listen
// says.
func (s *Store) listenOn(ctx context.Context, channel string) (<-chan core.ThreadID, error) {
	return s.listenAs(ctx, channel, "", nil)
}

// listenAs is listenOn on a connection whose application_name is app
// (unless empty); connected, when set, is told each connection's backend
// process id, the first and each one after a reconnection.
func (s *Store) listenAs(ctx context.Context, channel, app string, connected func(pid uint32)) (<-chan core.ThreadID, error) {
	conn, err := s.listen(ctx, channel, app)
	if err != nil {
		return nil, err
	}
	if connected != nil {
		connected(conn.PgConn().PID())
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
			for conn, err = s.listen(ctx, channel, app); err != nil; conn, err = s.listen(ctx, channel, app) {
				t := time.NewTimer(time.Second)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			if connected != nil {
				connected(conn.PgConn().PID())
			}
			if !send("") {
				return
			}
		}
	}()
	return out, nil
}

func (s *Store) listen(ctx context.Context, channel, app string) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	if app != "" {
		if cfg.RuntimeParams == nil {
			cfg.RuntimeParams = map[string]string{}
		}
		cfg.RuntimeParams["application_name"] = app
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
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
