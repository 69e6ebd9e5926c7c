package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
)

// Follow reads, on each wake, only the log after the position it has
// delivered (EventsAfter): one round trip in a View, the events after the
// position and no others, nothing for a position at the log's end,
// ErrInvalidArgument for one past it, and ErrUnknownThread for a thread
// that does not exist. Before it, each wake
// read the thread's whole log.
func TestEventsAfterReadsOnlyNewEvents(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStoreWith(t, Options{})
	ws := core.NewWorkspace(s, coretest.NewClock(time.Unix(0, 0)))
	require.NoError(t, ws.CreateThread(ctx, "t"))
	for range 20 {
		_, err := ws.Post(ctx, "t", "m")
		require.NoError(t, err)
	}
	after := func(id core.ThreadID, pos core.Position) ([]core.Event, int64, error) {
		var evs []core.Event
		trips := s.stats.roundTrips.Load()
		err := s.View(ctx, func(ctx context.Context, tx core.Transaction) error {
			r, ok := tx.(interface {
				EventsAfter(context.Context, core.ThreadID, core.Position) ([]core.Event, error)
			})
			require.True(t, ok, "the Store's transaction reads the log after a position")
			var err error
			evs, err = r.EventsAfter(ctx, id, pos)
			return err
		})
		return evs, s.stats.roundTrips.Load() - trips, err
	}
	evs, trips, err := after("t", 17)
	require.NoError(t, err)
	require.Len(t, evs, 3, "the events after position 17 of 20")
	for i, ev := range evs {
		require.Equal(t, core.Seq(18+i), ev.Message)
	}
	require.Equal(t, int64(1), trips, "round trips of the read")
	evs, _, err = after("t", 20)
	require.NoError(t, err)
	require.Empty(t, evs, "nothing after the log's end")
	_, _, err = after("t", 21)
	require.ErrorIs(t, err, core.ErrInvalidArgument, "a position past the log's end")
	_, _, err = after("nope", 0)
	require.ErrorIs(t, err, core.ErrUnknownThread)
}
