package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// The tests of this file came from the fourth mutation pass (6 Dec
// 2026): each fails with the mutant its comment names, where no test
// failed before.

// staleCache returns a Store whose cache holds thread "t" under the
// lease the Store wrote (it claimed it: the entry may be speculated on),
// and a message, "m2", that another Store posted since, which the cache
// lacks.
func staleCache(t *testing.T) (*Store, core.ThreadID) {
	t.Helper()
	s := newStore(t)
	_, c := claimedThread(t, s)
	e := s.cached(c.Thread)
	require.True(t, e != nil && e.ownLease && !e.distrusted, "the Store speculates on its claimed thread")
	other := newProc(openOther(t, s), "other")
	_, err := other.ws.Post(context.Background(), c.Thread, "m2")
	require.NoError(t, err)
	require.Equal(t, core.Seq(1), s.cached(c.Thread).state.Last(), "the cache lacks the other Store's post")
	return s, c.Thread
}

// A speculating transaction reads a thread from the Store's cache only
// until its first round trip, whose check covers what it read: a thread
// read after that round trip is read from the server, locked, as a
// locking read would be (txn.load's !t.begun). Otherwise nothing ever
// checks it: the transaction's function decides on a stale state, and a
// write on it commits with no check. (Mutant: the !t.begun dropped.)
func TestSpeculationEndsWithTheFirstRoundTrip(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s, id := staleCache(t)
	var last core.Seq
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		if _, err := tx.ThreadIDs(ctx); err != nil { // a round trip: the transaction has begun
			return err
		}
		th, err := tx.Thread(ctx, id)
		if err != nil {
			return err
		}
		last = th.Last()
		return nil
	}))
	require.Equal(t, core.Seq(2), last, "a thread read after the transaction's first round trip is storage's, not the cache's")
}

// An error the transaction's function returns, decided from the cache
// before anything was sent, is not the transaction's outcome: what the
// function read may be stale, so it is run again, reading from the
// server (txn.retry's !t.begun), and its outcome is that run's. (Mutant:
// the !t.begun dropped from retry.)
func TestSpeculativeRefusalRunsAgainFromTheServer(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s, id := staleCache(t)
	errStale := errors.New("the thread lacks message 2")
	runs := 0
	err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		runs++
		th, err := tx.Thread(ctx, id)
		if err != nil {
			return err
		}
		if th.Last() < 2 {
			return errStale
		}
		return nil
	})
	require.NoError(t, err, "the refusal was decided on the cache, which lacked the post: run again from the server")
	require.Equal(t, 2, runs, "once from the cache, once from the server")
}

// A cache entry is the Store's own lease's (ownLease: transactions may
// speculate on it) only while the lease it read is the one the Store
// wrote: once another process claimed the thread over the lapsed lease,
// the Store's next read of it leaves an entry that is not, so that its
// transactions read the thread from the server rather than speculate on
// a thread another process now writes (each speculation a failed check
// and a transaction run twice). (Mutant: fold's ownLease ignoring whose
// lease it read; a cost, never a wrong write.)
func TestEntryOwnsNoLeaseAnotherClaimed(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	_, c := claimedThread(t, s)
	require.True(t, s.cached(c.Thread).ownLease, "the Store's own claim")
	b := newProc(openOther(t, s), "b")
	b.clock.Advance(2 * ttl)
	_, err := b.ws.Claim(ctx, c.Thread, "hb", ttl)
	require.NoError(t, err)
	require.NoError(t, s.View(ctx, func(ctx context.Context, tx core.Transaction) error {
		_, err := tx.Thread(ctx, c.Thread) // the thread, and its lease, read from the server
		return err
	}))
	e := s.cached(c.Thread)
	require.NotNil(t, e)
	require.Equal(t, core.Holder("hb"), e.lease.Holder, "the lease the read found")
	require.False(t, e.ownLease, "another process's lease is not the Store's own")
}

// A Claim refused in one round trip (the lease is another holder's, and
// live) wrote nothing: claimSQL's claimed column is NULL. When the log
// read back with it then does not fold (a corrupt event), the claim's
// outcome is known all the same: refused, nothing committed. The error is
// core.ErrInconsistentLog, not core.ErrCommitUnknown, which is for a
// claim that committed. (Mutant: claimRow.read taking a NULL claimed for
// a claim made.)
func TestRefusedOneTripClaimOnCorruptLogIsNotInDoubt(t *testing.T) {
	t.Parallel() // a schema of its own
	ctx := testCtx(t)
	s := newStore(t)
	_, c := claimedThread(t, s) // holder "ha", live; event 1, the post of m1
	_, err := admin(t).Exec(ctx, `INSERT INTO `+pgx.Identifier{s.Schema()}.Sanitize()+
		`.events (thread_id, seq, version, kind, at, message, text, run, request, holder) VALUES ($1, 2, 1, 'bogus', now(), 0, '', 0, 0, '')`,
		string(c.Thread))
	require.NoError(t, err)
	other := openOther(t, s)
	b := newProc(other, "b")
	_, err = b.ws.Claim(ctx, c.Thread, "hb", ttl)
	require.Equal(t, int64(1), other.stats.oneTripClaims.Load(), "the claim was made in one round trip")
	require.ErrorIs(t, err, core.ErrInconsistentLog)
	require.NotErrorIs(t, err, core.ErrCommitUnknown, "the claim was refused: nothing committed")
}
