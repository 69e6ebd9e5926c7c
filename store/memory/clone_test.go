package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/storetest"
)

// A clone holds what the store held, and the two share nothing after:
// writes to either (messages, runs, events, leases, holders) leave the
// other as it was.
func TestClone(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	clock := coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC))
	w := core.NewWorkspace(s, clock, core.WithProcess("p1"))
	require.NoError(t, w.CreateThread(ctx, "t"))
	_, err := w.Post(ctx, "t", "m1")
	require.NoError(t, err)
	c, err := w.Claim(ctx, "t", "h1", time.Minute)
	require.NoError(t, err)
	_, err = w.Plan(ctx, c)
	require.NoError(t, err)
	_, err = w.RunStart(ctx, c, 1)
	require.NoError(t, err)

	before := storetest.Snapshot(t, s, "t")
	c2 := s.Clone()
	require.Equal(t, before, storetest.Snapshot(t, c2, "t"))

	// Writes to the original: the clone keeps its copy.
	_, err = w.Post(ctx, "t", "m2")
	require.NoError(t, err)
	require.NoError(t, w.RunEnd(ctx, c, 1, ""))
	require.NoError(t, w.Release(ctx, c))
	require.Equal(t, before, storetest.Snapshot(t, c2, "t"), "a write to the store changed its clone")

	// Writes to the clone: the original keeps its own.
	after := storetest.Snapshot(t, s, "t")
	w2 := core.NewWorkspace(c2, clock, core.WithProcess("p2"))
	_, err = w2.Post(ctx, "t", "m2'")
	require.NoError(t, err)
	require.NoError(t, w2.CreateThread(ctx, "u"))
	require.Equal(t, after, storetest.Snapshot(t, s, "t"), "a write to the clone changed the store")
	_, err = w.Thread(ctx, "u")
	require.ErrorIs(t, err, core.ErrUnknownThread, "a thread the clone created is in the store")

	// The holders that acquired a lease are the clone's too: h1 is not
	// fresh there.
	clock.Advance(2 * time.Minute)
	_, err = w2.Claim(ctx, "t", "h2", time.Minute)
	require.NoError(t, err)
	clock.Advance(2 * time.Minute)
	_, err = core.NewWorkspace(c2, clock).Claim(ctx, "t", "h1", time.Minute)
	require.ErrorIs(t, err, core.ErrHolderReused)

	// A store and its clone both writing after the clone, at every length
	// of the thread's log (whatever room its slices have left).
	for i := range 8 {
		c := s.Clone()
		_, err := w.Post(ctx, "t", fmt.Sprintf("a%d", i))
		require.NoError(t, err)
		_, err = core.NewWorkspace(c, clock).Post(ctx, "t", fmt.Sprintf("b%d", i))
		require.NoError(t, err)
		for _, st := range []*memory.Store{s, c} {
			snap := storetest.Snapshot(t, st, "t")
			last := snap.Events[len(snap.Events)-1]
			require.Equal(t, map[*memory.Store]string{s: "a", c: "b"}[st]+fmt.Sprint(i), last.Text)
			require.Equal(t, snap.Thread.Messages[len(snap.Thread.Messages)-1].Text, last.Text)
		}
	}
}
