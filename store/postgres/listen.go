package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/threadclaim/threadclaim/core"
)

// Listen delivers a wake-up, the thread's id, each time work for a thread
// that nobody holds commits in the Store's schema, by any process: a
// message posted to a thread that had no work and has no live lease
// (none, or one expired by the server's clock), or a thread released
// with work left. A post to a thread whose lease is live wakes nobody:
// its holder plans the message, or its release wakes; nor does a post to
// a thread that has work already (see postSQL). A wake-up is a hint that a thread has work, never
// a claim; a runner polls as well, since wake-ups can be missed.
//
// Listen holds a connection of its own, outside the pool, until ctx ends;
// then it closes the channel. When that connection breaks, Listen
// reconnects (retrying every second until ctx ends) and delivers the
// empty ThreadID once it has: posts made in between were not seen, so
// the receiver should look at every thread. A receiver that falls behind
// makes the server queue the notifications; none is dropped.
//
// It returns an error when the first connection or its LISTEN fails, or
// the Store is closed.
func (s *Store) Listen(ctx context.Context) (<-chan core.ThreadID, error) {
	all := []string{s.channel}
	for k := range uint32(wakeShards) {
		all = append(all, s.shardChannel(k))
	}
	return s.listenAs(ctx, func() []string { return all }, nil, "", nil, nil)
}

// moves counts the changes of what a listener's channels function returns
// (changes) and, of them, the last its connection LISTENs for (followed):
// the connection has caught up with the channels when the two are equal.
type moves struct {
	changes, followed atomic.Uint64
}

// listenOn delivers the payloads of channel's notifications, as Listen
// says.
func (s *Store) listenOn(ctx context.Context, channel string) (<-chan core.ThreadID, error) {
	return s.listenAs(ctx, func() []string { return []string{channel} }, nil, "", nil, nil)
}

// listenAs delivers the payloads of the notifications on the channels
// that channels returns, as Listen says, on a connection whose
// application_name is app (unless empty). moved, when set, counts the
// changes of what channels returns: after each notification, the
// connection LISTENs again (and UNLISTENs) when it has moved, and then
// records the count it caught up with (moves.followed); a
// notification on the Store's control channel (Wakeups' nudge) is for
// that, and for told (when set), which gets its payload; it is not
// delivered. connected, when set, is told each connection's backend
// process id, the first and each one after a reconnection.
func (s *Store) listenAs(ctx context.Context, channels func() []string, moved *moves, app string, connected func(pid uint32), told func(payload string)) (<-chan core.ThreadID, error) {
	if s.closed.Load() {
		return nil, errStoreClosed
	}
	l := &listener{s: s, channels: channels, moved: moved, app: app}
	if err := l.connect(ctx); err != nil {
		return nil, err
	}
	if connected != nil {
		connected(l.conn.PgConn().PID())
	}
	out := make(chan core.ThreadID, 16)
	go func() {
		defer close(out)
		defer func() { closeConn(l.conn) }()
		send := func(id core.ThreadID) bool {
			select {
			case out <- id:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			n, err := l.conn.WaitForNotification(ctx)
			switch {
			case err != nil:
			case n.Channel != s.control:
				s.stats.notices.Add(1)
				if !send(core.ThreadID(n.Payload)) {
					return
				}
			case told != nil:
				told(n.Payload)
			}
			if err == nil {
				err = l.follow(ctx)
			}
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			closeConn(l.conn)
			for err = l.connect(ctx); err != nil; err = l.connect(ctx) {
				t := time.NewTimer(time.Second)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			if connected != nil {
				connected(l.conn.PgConn().PID())
			}
			if !send("") {
				return
			}
		}
	}()
	return out, nil
}

// listener is listenAs's connection and the channels it LISTENs on.
type listener struct {
	s         *Store
	channels  func() []string
	moved     *moves
	app       string
	conn      *pgx.Conn
	listening map[string]bool
	seen      uint64 // moved's count when listening was last brought up to date
}

// connect opens a connection and LISTENs on the channels.
func (l *listener) connect(ctx context.Context) error {
	cfg := l.s.pool.Config().ConnConfig.Copy()
	// The connection waits idle for notifications: when ctx ends there
	// is no statement for a cancel request to stop (the pool's
	// connections send one, and close 5s later), so the wait ends at once
	// and the connection is closed, and the other listeners soon see it
	// gone.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	if l.app != "" {
		if cfg.RuntimeParams == nil {
			cfg.RuntimeParams = map[string]string{}
		}
		cfg.RuntimeParams["application_name"] = l.app
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres: listen: connect: %w", err)
	}
	l.conn, l.listening = conn, map[string]bool{}
	if err := l.follow(ctx); err != nil {
		closeConn(conn)
		return err
	}
	return nil
}

// follow LISTENs on the channels not listened on yet and UNLISTENs those
// no longer wanted, in one round trip, when they may have changed.
func (l *listener) follow(ctx context.Context) error {
	var n uint64
	if l.moved != nil {
		n = l.moved.changes.Load()
		if n == l.seen && len(l.listening) > 0 {
			return nil
		}
	} else if len(l.listening) > 0 {
		return nil
	}
	want := l.channels()
	var sql strings.Builder
	wanted := make(map[string]bool, len(want))
	for _, c := range want {
		wanted[c] = true
		if !l.listening[c] {
			sql.WriteString("LISTEN " + pgx.Identifier{c}.Sanitize() + ";")
		}
	}
	for c := range l.listening {
		if !wanted[c] {
			sql.WriteString("UNLISTEN " + pgx.Identifier{c}.Sanitize() + ";")
		}
	}
	if sql.Len() > 0 {
		if _, err := l.conn.Exec(ctx, sql.String()); err != nil {
			return fmt.Errorf("postgres: listen: %w", err)
		}
	}
	l.listening, l.seen = wanted, n
	if l.moved != nil {
		l.moved.followed.Store(n)
	}
	return nil
}

func closeConn(c *pgx.Conn) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
