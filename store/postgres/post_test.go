package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/storetest"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// A post by a process that does not hold the thread is one round trip
// (PostMessage, postSQL), in both read modes: the same message, version
// and trace line as the post that reads the thread first, the thread's
// log and row as that post leaves them, and ErrUnknownThread for a
// thread that does not exist, with nothing written.
func TestPostOneRoundTrip(t *testing.T) {
	t.Parallel() // a schema of its own
	eachReadMode(t, func(t *testing.T, opts Options) {
		ctx := testCtx(t)
		for _, keep := range []bool{false, true} {
			opts.KeepTrace = keep
			s := newStoreWith(t, opts)
			rec := &tracecheck.Recorder{}
			clock := coretest.NewClock(time.Unix(0, 0))
			ws := core.NewWorkspace(s, clock, core.WithProcess("p"), core.WithTracer(rec))
			require.NoError(t, ws.CreateThread(ctx, "t"))
			for i := 1; i <= 3; i++ {
				clock.Advance(time.Millisecond)
				trips := s.stats.roundTrips.Load()
				seq, err := ws.Post(ctx, "t", "m")
				require.NoError(t, err)
				require.Equal(t, core.Seq(i), seq)
				want := int64(1)
				if keep {
					want = 2 // the trace line goes with COMMIT
				}
				require.Equal(t, want, s.stats.roundTrips.Load()-trips, "keep trace %v", keep)
			}
			// The reading post, after the server's: it reads what they wrote.
			s.readPost = true
			seq, err := ws.Post(ctx, "t", "m")
			require.NoError(t, err)
			require.Equal(t, core.Seq(4), seq)
			s.readPost = false
			th, err := ws.Thread(ctx, "t")
			require.NoError(t, err)
			require.Equal(t, core.Seq(4), th.Last())
			require.Equal(t, uint64(4), th.Version)
			for i, l := range rec.Lines() {
				require.Equal(t, core.TraceEvent{Tick: uint64(i + 1), Action: core.ActionPost, Thread: "t", Msg: core.Seq(i + 1), Proc: "p"},
					core.TraceEvent{Tick: l.Tick, Action: l.Action, Thread: l.Thread, Msg: l.Msg, Taken: l.Taken, Proc: l.Proc})
			}
			if keep {
				stored, err := s.TraceLines(ctx)
				require.NoError(t, err)
				require.Len(t, stored, 4)
			}
			_, err = ws.Post(ctx, "nope", "m")
			require.ErrorIs(t, err, core.ErrUnknownThread)
			events, messages, version, _ := rowCounts(t, admin(t), s.Schema(), "t")
			require.Equal(t, []int64{4, 4, 4}, []int64{int64(events), int64(messages), version})
		}
	})
}

// untraced is a Store as a storage that keeps no trace lines shows
// itself: no TraceLines, so storetest skips the trace log's checks.
type untraced struct{ s *Store }

func (u untraced) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return u.s.Update(ctx, fn)
}

func (u untraced) View(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return u.s.View(ctx, fn)
}

func (u untraced) WatchEvents(ctx context.Context, id core.ThreadID) (<-chan struct{}, error) {
	return u.s.WatchEvents(ctx, id)
}

func (u untraced) PendingThreads(ctx context.Context) ([]core.PendingThread, error) {
	return u.s.PendingThreads(ctx)
}

// The conformance suite on a Store that keeps no trace lines, a
// deployment's: there a post is one autocommitted statement (PostMessage),
// where TestConformance's Stores, which keep trace lines, send the post's
// statement with BEGIN and its trace line with COMMIT.
func TestConformanceUntraced(t *testing.T) {
	t.Parallel() // a schema of its own
	storetest.Run(t, func(t *testing.T) core.Storage { return untraced{newStoreWith(t, Options{})} })
}

// A post in a View's transaction, which may not write, is refused and
// writes nothing, in both read modes: PostMessage's one statement, which
// commits on its own, is for a transaction that may write. (The eighth
// mutation pass: a PostMessage that took its one statement in a View
// failed no test; the View committed the post.)
func TestPostInAViewWritesNothing(t *testing.T) {
	t.Parallel() // a schema of its own
	eachReadMode(t, func(t *testing.T, opts Options) {
		ctx := testCtx(t)
		s := newStoreWith(t, opts)
		ws := core.NewWorkspace(s, core.SystemClock{})
		require.NoError(t, ws.CreateThread(ctx, "t"))
		err := s.View(ctx, func(ctx context.Context, tx core.Transaction) error {
			_, _, _, err := tx.(*handle).PostMessage(ctx, "t", time.Now(), "m")
			return err
		})
		require.Error(t, err, "a post in a read-only transaction")
		th, err := ws.Thread(ctx, "t")
		require.NoError(t, err)
		require.Zero(t, th.Last(), "a View wrote a message")
		events, messages, version, _ := rowCounts(t, admin(t), s.Schema(), "t")
		require.Equal(t, []int64{0, 0, 0}, []int64{int64(events), int64(messages), version})
	})
}

// A post by the Store that holds the thread's lease, its cache entry
// distrusted (a check that speculated on it failed), is postSQL's one
// statement, one round trip: the reading path is one only when it may
// speculate on the entry, and here it reads the thread from the server
// first. (The eighth mutation pass: PostMessage taking the reading path
// on a distrusted entry, two round trips, failed no test.)
func TestPostOnADistrustedEntryOneRoundTrip(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	a, c := claimedThread(t, s)
	s.distrust([]assumption{{id: string(c.Thread)}})
	e := s.cached(c.Thread)
	require.True(t, e != nil && e.ownLease && e.distrusted, "the entry of the Store's claimed thread, distrusted")
	trips := s.stats.roundTrips.Load()
	seq, err := a.ws.Post(ctx, c.Thread, "m2")
	require.NoError(t, err)
	require.Equal(t, core.Seq(2), seq)
	require.Equal(t, int64(1), s.stats.roundTrips.Load()-trips, "round trips of the post")
}

// A post to a thread whose row's log end is behind its log (an older
// binary's post, before migration 0008, left it so) is made all the same,
// reading the thread: the one statement's event collides with the log's
// and writes nothing, and the post goes on in a transaction of its own,
// which sets the row's log end again; the next post is one statement
// again. With KeepTrace the one statement is in a transaction, which the
// collision loses: the transaction is run again, its post reading.
// (The ninth mutation pass: a post that went on as though its one
// statement had committed the transaction failed no test; and with
// KeepTrace the post failed, "duplicate key value violates unique
// constraint events_pkey".)
func TestPostAfterAnOlderBinarysPost(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("KeepTrace=%v", keep), func(t *testing.T) {
			t.Parallel() // a schema of its own
			ctx := testCtx(t)
			s := newStoreWith(t, Options{KeepTrace: keep})
			ws := core.NewWorkspace(s, core.SystemClock{})
			require.NoError(t, ws.CreateThread(ctx, "t"))
			_, err := ws.Post(ctx, "t", "m1")
			require.NoError(t, err)
			olderBinaryPost(t, s.Schema(), "t") // message 2
			for _, m := range []core.Seq{3, 4} {
				seq, err := ws.Post(ctx, "t", fmt.Sprintf("m%d", m))
				require.NoError(t, err, "post of m%d", m)
				require.Equal(t, m, seq)
			}
			evs := events(t, s, "t")
			require.Len(t, evs, 4)
			for i, ev := range evs {
				require.Equal(t, core.MessagePosted, ev.Kind)
				require.Equal(t, core.Seq(i+1), ev.Message)
			}
			require.Equal(t, "m4", evs[3].Text)
			th, err := ws.Thread(ctx, "t")
			require.NoError(t, err)
			require.Equal(t, core.Seq(4), th.Last())
		})
	}
}
