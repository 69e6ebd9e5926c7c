package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

func receive(t *testing.T, ch <-chan core.ThreadID) core.ThreadID {
	t.Helper()
	select {
	case id, ok := <-ch:
		require.True(t, ok, "the wake-up channel closed")
		return id
	case <-time.After(30 * time.Second):
		t.Fatal("no wake-up")
		return ""
	}
}

// A committed post wakes a listener, from another Store (another process);
// a post whose transaction rolled back does not. Notifications arrive in
// commit order, so the rolled-back post, made first, would be seen first.
func TestListenWakesOnCommittedPost(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	schema := testSchema(t)
	listener := openStore(t, poolConfig(t, "tc"), schema)
	poster := openStore(t, poolConfig(t, "tc"), schema)
	ws := core.NewWorkspace(poster, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "rolled-back"))
	require.NoError(t, ws.CreateThread(ctx, "posted"))
	wake, err := listener.Listen(ctx)
	require.NoError(t, err)

	boom := errors.New("boom")
	err = poster.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		v, err := tx.Bump(ctx, "rolled-back")
		if err != nil {
			return err
		}
		if err := tx.Append(ctx, "rolled-back", core.Event{Version: v, Kind: core.MessagePosted, At: time.Now(), Message: 1, Text: "m"}); err != nil {
			return err
		}
		_, err = tx.Events(ctx, "rolled-back") // the NOTIFY reached the server
		if err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = ws.Post(ctx, "posted", "m")
	require.NoError(t, err)
	require.Equal(t, core.ThreadID("posted"), receive(t, wake))

	cancel()
	for range wake { // closes once ctx ends
	}
}

// When the listening connection breaks, Listen reconnects and says so
// with the empty ThreadID (posts in between were missed), then goes on.
func TestListenReconnects(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	app := randomName("tc_")
	s := openStore(t, poolConfig(t, app), testSchema(t))
	ws := core.NewWorkspace(s, core.SystemClock{})
	require.NoError(t, ws.CreateThread(ctx, "t"))
	wake, err := s.Listen(ctx)
	require.NoError(t, err)
	look := admin(t)
	var pid int32
	require.NoError(t, look.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&pid))
	terminate(t, look, uint32(pid))
	require.Equal(t, core.ThreadID(""), receive(t, wake), "a reconnect must say that wake-ups may have been missed")
	_, err = ws.Post(ctx, "t", "m")
	require.NoError(t, err)
	require.Equal(t, core.ThreadID("t"), receive(t, wake))
}
