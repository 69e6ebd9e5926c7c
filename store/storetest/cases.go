package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/tracecheck"
)

func testThreadsAndMessages(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "hello", "world")
	require.ErrorIs(t, a.ws.CreateThread(ctx, id), core.ErrThreadExists)
	ids, err := a.ws.Threads(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, ids)
	th, err := a.ws.Thread(ctx, id)
	require.NoError(t, err)
	require.Equal(t, core.Seq(2), th.Last())
	require.Equal(t, "world", th.Messages[1].Text)
	require.Equal(t, core.Seq(0), th.Taken)
	require.Equal(t, uint64(2), th.Version)
}

// Both storages refuse the same inputs, with the same error: a NUL byte
// or invalid UTF-8 in a thread id, a message's text, a question or a
// holder (which PostgreSQL's text refuses; the in-memory storage took
// them), through the Workspace and through a transaction alike; and the
// Workspace refuses an id longer than core.MaxIDBytes, so that no trace
// line is longer than tracecheck reads. Nothing is written.
func testInvalidInputRefused(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	before := Snapshot(t, s, id)
	for _, bad := range []string{"nul\x00byte", "bad\xffutf8"} {
		require.ErrorIs(t, a.ws.CreateThread(ctx, core.ThreadID(bad)), core.ErrInvalidArgument, "CreateThread %q", bad)
		_, err := a.ws.Post(ctx, id, bad)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "Post %q", bad)
		_, err = a.ws.Claim(ctx, id, core.Holder(bad), ttl)
		require.ErrorIs(t, err, core.ErrInvalidArgument, "Claim by %q", bad)
		for name, op := range map[string]func(ctx context.Context, tx core.Transaction) error{
			"CreateThread": func(ctx context.Context, tx core.Transaction) error { return tx.CreateThread(ctx, core.ThreadID(bad)) },
			"Append": func(ctx context.Context, tx core.Transaction) error {
				return tx.Append(ctx, id, core.Event{Version: 99, Kind: core.MessagePosted, Message: 2, Text: bad})
			},
			"PutLease": func(ctx context.Context, tx core.Transaction) error {
				return tx.PutLease(ctx, core.Lease{Thread: id, Holder: core.Holder(bad), ExpiresAt: epoch})
			},
			"Append holder": func(ctx context.Context, tx core.Transaction) error {
				return tx.Append(ctx, id, core.Event{Version: 99, Kind: core.MessagePosted, Message: 2, Text: "m2", Holder: core.Holder(bad)})
			},
		} {
			err := s.Update(ctx, op)
			require.ErrorIs(t, err, core.ErrInvalidArgument, "%s with %q", name, bad)
			require.Equal(t, core.CheckText(map[string]string{"CreateThread": "thread id", "Append": "event text", "PutLease": "holder", "Append holder": "event holder"}[name], bad).Error(),
				err.Error(), "%s with %q: the same error from every storage", name, bad)
		}
	}
	// A lease with no holder or no thread (the eighteenth mutation pass:
	// a storage that took a lease with an empty holder passed the suite).
	for _, l := range []core.Lease{{Thread: id, ExpiresAt: epoch}, {Holder: "h1", ExpiresAt: epoch}} {
		err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error { return tx.PutLease(ctx, l) })
		require.ErrorIs(t, err, core.ErrInvalidArgument, "PutLease of %+v", l)
	}
	long := core.ThreadID(strings.Repeat("t", core.MaxIDBytes+1))
	require.ErrorIs(t, a.ws.CreateThread(ctx, long), core.ErrInvalidArgument)
	_, err := a.ws.Claim(ctx, id, core.Holder(strings.Repeat("h", core.MaxIDBytes+1)), ttl)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.NoError(t, a.ws.CreateThread(ctx, core.ThreadID(strings.Repeat("t", core.MaxIDBytes))), "an id of MaxIDBytes")
	require.Equal(t, before, Snapshot(t, s, id), "a refused input changed storage")
}

func testUnknownThread(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	_, err := a.ws.Post(ctx, "nope", "x")
	require.ErrorIs(t, err, core.ErrUnknownThread)
	_, err = a.ws.Claim(ctx, "nope", "h1", ttl)
	require.ErrorIs(t, err, core.ErrUnknownThread)
	_, err = a.ws.Thread(ctx, "nope")
	require.ErrorIs(t, err, core.ErrUnknownThread)
	for name, op := range map[string]func(ctx context.Context, tx core.Transaction) error{
		"Thread":    func(ctx context.Context, tx core.Transaction) error { _, err := tx.Thread(ctx, "nope"); return err },
		"Events":    func(ctx context.Context, tx core.Transaction) error { _, err := tx.Events(ctx, "nope"); return err },
		"Bump":      func(ctx context.Context, tx core.Transaction) error { _, err := tx.Bump(ctx, "nope"); return err },
		"SaveTaken": func(ctx context.Context, tx core.Transaction) error { return tx.SaveTaken(ctx, "nope", 1) },
		"Append": func(ctx context.Context, tx core.Transaction) error {
			return tx.Append(ctx, "nope", core.Event{Version: 1, Kind: core.MessagePosted, Message: 1, Text: "m"})
		},
	} {
		require.ErrorIs(t, s.Update(ctx, op), core.ErrUnknownThread, "%s of an unknown thread", name)
	}
	ids, err := a.ws.Threads(ctx)
	require.NoError(t, err)
	require.Empty(t, ids, "a refused write created a thread")
}

// A lease is its thread's: writing or removing the lease of a thread that
// does not exist is refused with ErrUnknownThread, and leaves nothing
// behind (no lease, no holder that acquired it); reading it finds none.
func testLeaseNeedsItsThread(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	newThread(t, a) // another thread exists
	const id core.ThreadID = "no-such-thread"
	err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return tx.PutLease(ctx, core.Lease{Thread: id, Holder: "h1", ExpiresAt: epoch.Add(ttl)})
	})
	require.ErrorIs(t, err, core.ErrUnknownThread, "a lease was written for a thread that does not exist")
	err = s.Update(ctx, func(ctx context.Context, tx core.Transaction) error { return tx.DeleteLease(ctx, id) })
	require.ErrorIs(t, err, core.ErrUnknownThread, "a lease was removed from a thread that does not exist")
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		l, err := tx.Lease(ctx, id)
		require.NoError(t, err)
		require.Equal(t, core.Lease{}, l, "a thread that does not exist has a lease")
		return nil
	}))

	require.NoError(t, a.ws.CreateThread(ctx, id))
	l, err := a.ws.Lease(ctx, id)
	require.NoError(t, err)
	require.Equal(t, core.Lease{}, l, "the refused lease was kept for the thread made later")
	_, err = a.ws.Claim(ctx, id, "h1", ttl)
	require.NoError(t, err, "the refused lease's holder was kept as having acquired it")
}

func testClaimRenewRelease(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a, b := newProc(s, "a", 0), newProc(s, "b", 0)
	id := newThread(t, a)
	ca, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	require.Equal(t, [2]string{string(id), "ha"}, [2]string{string(ca.Thread), string(ca.Holder)})
	l, err := a.ws.Lease(ctx, id)
	require.NoError(t, err)
	require.Equal(t, core.Holder("ha"), l.Holder)
	require.True(t, l.ExpiresAt.Equal(epoch.Add(ttl)), "expiry %v is not the claimant's now + ttl", l.ExpiresAt)

	_, err = b.ws.Claim(ctx, id, "hb", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy)

	a.clock.Advance(ttl / 2)
	require.NoError(t, a.ws.Renew(ctx, ca, ttl))
	l, err = a.ws.Lease(ctx, id)
	require.NoError(t, err)
	require.True(t, l.ExpiresAt.Equal(epoch.Add(ttl/2+ttl)), "renewal did not extend the lease: %v", l.ExpiresAt)

	require.False(t, holds(t, s, id, "hb"), "a holder that never claimed holds the lease")

	require.NoError(t, a.ws.Release(ctx, ca))
	l, err = a.ws.Lease(ctx, id)
	require.NoError(t, err)
	require.Equal(t, core.Lease{}, l)
	require.False(t, holds(t, s, id, "ha"), "a released claim holds the lease")

	cb, err := b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err, "a released thread could not be claimed")
	// A claim whose lease another took renews nothing.
	a.clock.Advance(ttl)
	ca2, err := a.ws.Claim(ctx, id, "ha2", ttl)
	require.NoError(t, err)
	require.ErrorIs(t, b.ws.Renew(ctx, cb, ttl), core.ErrThreadBusy, "a lost claim renewed")
	l, err = a.ws.Lease(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ca2.Holder, l.Holder)
}

// holds reports whether holder has the thread's lease, asking s's
// HoldsLease in a transaction of its own.
func holds(t *testing.T, s core.Storage, id core.ThreadID, holder core.Holder) bool {
	t.Helper()
	var held bool
	require.NoError(t, s.Update(context.Background(), func(ctx context.Context, tx core.Transaction) error {
		var err error
		held, _, err = tx.HoldsLease(ctx, id, holder)
		return err
	}))
	return held
}

// plan plans p's claim c and requires the plan to be of kind k.
func plan(t *testing.T, p *proc, c core.Claim, k core.PlanKind) core.Plan {
	t.Helper()
	pl, err := p.ws.Plan(context.Background(), c)
	require.NoError(t, err)
	require.Equal(t, k, pl.Kind, "the plan of %s's claim %q", p.ws.Process(), c.Holder)
	return pl
}

// askedAfterRun claims thread id for p, runs its first message, asks
// question in the run and ends it: the claim, with the request left open.
func askedAfterRun(t *testing.T, p *proc, id core.ThreadID, question string) (core.Claim, core.RequestID) {
	t.Helper()
	ctx := context.Background()
	c, err := p.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	plan(t, p, c, core.PlanRun)
	run, err := p.ws.RunStart(ctx, c, 1)
	require.NoError(t, err)
	req, err := p.ws.Ask(ctx, c, run, question)
	require.NoError(t, err)
	require.NoError(t, p.ws.RunEnd(ctx, c, run, ""))
	return c, req
}

func testExpiryByClaimantsClock(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a, b := newProc(s, "a", 0), newProc(s, "b", 0)
	id := newThread(t, a)
	_, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	b.clock.Advance(ttl - time.Nanosecond)
	_, err = b.ws.Claim(ctx, id, "hb", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy, "claimed before the lease expired")
	b.clock.Advance(time.Nanosecond)
	_, err = b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err, "could not claim once the lease expired")
}

// A ttl of a fraction of a microsecond (PostgreSQL keeps microseconds):
// storage may keep a lease a little past the claimant's now + ttl, never
// less, for a Claim and for a Renew alike; a claim at the claimant's now
// + ttl less a nanosecond is refused. (A mutation sweep: an expiry
// rounded down to the microsecond, which lapses the lease before its
// holder asked, passed the suite, whose ttls are whole seconds.)
func testExpiryNeverEarly(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a, b := newProc(s, "a", 0), newProc(s, "b", 0)
	id := newThread(t, a)
	const odd = ttl + 500*time.Nanosecond
	expiresBy := func(what string, at time.Time) {
		t.Helper()
		l, err := a.ws.Lease(ctx, id)
		require.NoError(t, err)
		require.Equal(t, core.Holder("ha"), l.Holder)
		require.False(t, l.ExpiresAt.Before(at), "%s: the lease expires at %v, before the claimant's now + ttl %v", what, l.ExpiresAt, at)
	}
	ca, err := a.ws.Claim(ctx, id, "ha", odd)
	require.NoError(t, err)
	expiresBy("claim", epoch.Add(odd))
	b.clock.Advance(odd - time.Nanosecond)
	_, err = b.ws.Claim(ctx, id, "hb", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy, "claimed before the claim's ttl was up")

	a.clock.Advance(ttl / 2)
	require.NoError(t, a.ws.Renew(ctx, ca, odd))
	expiresBy("renewal", epoch.Add(ttl/2+odd))
	b.clock.Advance(ttl / 2)
	_, err = b.ws.Claim(ctx, id, "hb2", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy, "claimed before the renewal's ttl was up")
}

// Two processes whose clocks disagree: b's runs ahead of a's by more than
// the TTL, so b sees a's fresh claim expired although a's own timers have
// not fired. b takes the lease; a's fenced write is refused.
func testSkewedClocks(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a, b := newProc(s, "a", 0), newProc(s, "b", ttl+time.Second)
	id := newThread(t, a, "m1")
	ca, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	plan(t, a, ca, core.PlanRun)
	cb, err := b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err, "a clock ahead by more than the ttl sees the lease expired")
	_, err = a.ws.RunStart(ctx, ca, 1)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	plan(t, b, cb, core.PlanRun)
	_, err = b.ws.RunStart(ctx, cb, 1)
	require.NoError(t, err)
	// And the other way round: a's clock is behind, so it sees b's lease
	// as live long after b stopped renewing.
	a.clock.Advance(ttl)
	_, err = a.ws.Claim(ctx, id, "ha2", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy)
}

func testHoldsLeaseExpiredNotTaken(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	ca, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	plan(t, a, ca, core.PlanRun)
	a.clock.Advance(10 * ttl)
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		held, l, err := tx.HoldsLease(ctx, id, "ha")
		require.NoError(t, err)
		require.True(t, held, "an expired lease nobody took must still fence its holder in")
		require.Equal(t, core.Holder("ha"), l.Holder)
		held, _, err = tx.HoldsLease(ctx, id, "other")
		require.NoError(t, err)
		require.False(t, held)
		held, _, err = tx.HoldsLease(ctx, "no-such-thread", "ha")
		require.NoError(t, err)
		require.False(t, held)
		return nil
	}))
	_, err = a.ws.RunStart(ctx, ca, 1)
	require.NoError(t, err, "the fence is the holder, not the time")
	require.NoError(t, a.ws.Renew(ctx, ca, ttl), "an expired lease nobody took renews")
}

// A transaction reads its own lease writes (core.Transaction): after a
// PutLease, Lease and HoldsLease see the new lease; after a DeleteLease,
// none, and its holder holds nothing; on a thread whose lease was
// claimed through the Workspace as on one written raw. (A mutation
// sweep: a storage whose transaction kept the deleted lease, so that
// HoldsLease after DeleteLease still passed its holder, passed the suite:
// core never reads a lease after removing it, but the port promises it.)
func testTransactionReadsOwnLeaseWrites(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	sees := func(ctx context.Context, tx core.Transaction, when string, want core.Lease, other core.Holder) {
		t.Helper()
		l, err := tx.Lease(ctx, id)
		require.NoError(t, err)
		require.True(t, l.Holder == want.Holder && l.ExpiresAt.Equal(want.ExpiresAt), "%s: Lease is %+v, want %+v", when, l, want)
		if want.Holder != "" {
			held, _, err := tx.HoldsLease(ctx, id, want.Holder)
			require.NoError(t, err)
			require.True(t, held, "%s: %q does not hold the lease it was written for", when, want.Holder)
		}
		held, l, err := tx.HoldsLease(ctx, id, other)
		require.NoError(t, err)
		require.False(t, held, "%s: %q holds the lease %+v", when, other, l)
	}
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		h1 := core.Lease{Thread: id, Holder: "h1", ExpiresAt: epoch.Add(ttl)}
		require.NoError(t, tx.PutLease(ctx, h1))
		sees(ctx, tx, "put h1", h1, "h2")
		h1.ExpiresAt = epoch.Add(2 * ttl)
		require.NoError(t, tx.PutLease(ctx, h1))
		sees(ctx, tx, "h1 renewed", h1, "h2")
		require.NoError(t, tx.DeleteLease(ctx, id))
		sees(ctx, tx, "h1 deleted", core.Lease{}, "h1")
		h2 := core.Lease{Thread: id, Holder: "h2", ExpiresAt: epoch.Add(ttl)}
		require.NoError(t, tx.PutLease(ctx, h2))
		sees(ctx, tx, "put h2", h2, "h1")
		require.NoError(t, tx.DeleteLease(ctx, id))
		sees(ctx, tx, "h2 deleted", core.Lease{}, "h2")
		return nil
	}))
	c, err := a.ws.Claim(ctx, id, "hw", ttl)
	require.NoError(t, err)
	held := core.Lease{Thread: id, Holder: c.Holder, ExpiresAt: epoch.Add(ttl)}
	errRollback := errors.New("roll back")
	err = s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		sees(ctx, tx, "claimed", held, "h1")
		require.NoError(t, tx.DeleteLease(ctx, id))
		sees(ctx, tx, "the claim's lease deleted", core.Lease{}, c.Holder)
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	require.True(t, holds(t, s, id, c.Holder), "the rolled-back delete was kept")
}

// testHoldsLeaseEmptyHolder: the empty holder holds no lease, not even a
// thread's that nobody holds (whose zero Lease's holder is empty) or whose
// lease was released: a fence asked for "" must not pass on a free
// thread. (The Workspace refuses an empty holder before storage; the
// port's promise holds without it.)
func testHoldsLeaseEmptyHolder(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	check := func(when string) {
		t.Helper()
		require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
			held, l, err := tx.HoldsLease(ctx, id, "")
			require.NoError(t, err)
			require.False(t, held, "%s: the empty holder holds the lease %+v", when, l)
			return nil
		}))
	}
	check("never claimed")
	c, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	check("claimed by ha")
	require.NoError(t, a.ws.Release(ctx, c))
	check("released")
}

func testHoldsLeaseAfterTakeover(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a, b := newProc(s, "a", 0), newProc(s, "b", 0)
	id := newThread(t, a, "m1")
	_, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	b.clock.Advance(ttl)
	_, err = b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err)
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		held, l, err := tx.HoldsLease(ctx, id, "ha")
		require.NoError(t, err)
		require.False(t, held, "the old holder still holds a lease another took")
		require.Equal(t, core.Holder("hb"), l.Holder)
		held, _, err = tx.HoldsLease(ctx, id, "hb")
		require.NoError(t, err)
		require.True(t, held)
		return nil
	}))
}

// The ADR's scenario at the storage level: every fenced write of a claim
// that lost its lease is refused with ErrThreadBusy and writes nothing;
// a refused start's transaction writes only a notice of it (RunRefused).
// Three processes each lose their claim with a fenced write to make: st
// a run's start, r a reply, x an abandon of the live run of b, the claim
// that holds the lease.
func testRefusedWriteLeavesStorageUnchanged(t *testing.T, s core.Storage) {
	ctx := context.Background()
	st, r, x, b := newProc(s, "st", 0), newProc(s, "r", 0), newProc(s, "x", 0), newProc(s, "b", 0)
	id := newThread(t, st, "m1", "m2", "m3")
	cst, err := st.ws.Claim(ctx, id, "hst", ttl)
	require.NoError(t, err)
	plan(t, st, cst, core.PlanRun)

	r.clock.Advance(ttl)
	cr, err := r.ws.Claim(ctx, id, "hr", ttl)
	require.NoError(t, err)
	p := plan(t, r, cr, core.PlanRun)
	run, err := r.ws.RunStart(ctx, cr, p.Message)
	require.NoError(t, err)
	req, err := r.ws.Ask(ctx, cr, run, "which one?")
	require.NoError(t, err)
	require.NoError(t, r.ws.RunEnd(ctx, cr, run, ""))
	p = plan(t, r, cr, core.PlanReply)

	x.clock.Advance(2 * ttl)
	cx, err := x.ws.Claim(ctx, id, "hx", ttl)
	require.NoError(t, err)

	b.clock.Advance(3 * ttl)
	cb, err := b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err)
	pb := plan(t, b, cb, core.PlanReply)
	require.NoError(t, b.ws.Reply(ctx, cb, pb.Request, pb.Message))
	pb = plan(t, b, cb, core.PlanRun)
	runB, err := b.ws.RunStart(ctx, cb, pb.Message)
	require.NoError(t, err)

	before := Snapshot(t, s, id)
	_, err = st.ws.RunStart(ctx, cst, 1)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	require.ErrorIs(t, r.ws.Reply(ctx, cr, req, p.Message), core.ErrThreadBusy)
	require.ErrorIs(t, x.ws.Abandon(ctx, cx, runB), core.ErrThreadBusy)
	after := Snapshot(t, s, id)
	require.Equal(t, before.Thread, after.Thread, "a refused write changed the thread")
	require.Equal(t, before.Lease, after.Lease, "a refused write changed the lease")
	// The refused start, and it alone, is noticed after the fact: one
	// RunRefused event at the version as it stood, changing nothing else.
	require.Len(t, after.Events, len(before.Events)+1, "the log gains exactly the refused start's notice")
	require.Equal(t, before.Events, after.Events[:len(before.Events)], "a refused write changed the log")
	n := after.Events[len(before.Events)]
	n.At = time.Time{}
	require.Equal(t, core.Event{Version: before.Thread.Version, Kind: core.RunRefused, Message: 1, Holder: "hst"}, n, "the notice")
}

func testRollbackLeavesStorageUnchanged(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	before := Snapshot(t, a.storage, id)
	boom := errors.New("boom")
	err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		v := writeEachKind(ctx, t, tx, id)
		th, err := tx.Thread(ctx, id)
		require.NoError(t, err)
		require.Equal(t, core.Seq(2), th.Last(), "a transaction must read its own writes")
		require.Equal(t, core.Seq(2), th.Taken)
		require.Equal(t, v, th.Version)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, before, Snapshot(t, a.storage, id))
	ids, err := a.ws.Threads(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, ids)
}

// writeEachKind writes in tx one of each kind of write on thread id
// (which holds one message): a version bump, an event (message 2), the
// taken cursor, a lease, and a new thread. It returns the new version.
func writeEachKind(ctx context.Context, t *testing.T, tx core.Transaction, id core.ThreadID) uint64 {
	v, err := tx.Bump(ctx, id)
	require.NoError(t, err)
	require.NoError(t, tx.Append(ctx, id, core.Event{Version: v, Kind: core.MessagePosted, Message: 2, Text: "m2"}))
	require.NoError(t, tx.SaveTaken(ctx, id, 2))
	require.NoError(t, tx.PutLease(ctx, core.Lease{Thread: id, Holder: "x", ExpiresAt: epoch}))
	require.NoError(t, tx.CreateThread(ctx, "other-"+id))
	return v
}

// testPanicKeepsNothing: a fn that panics keeps nothing of what it wrote,
// as one that returns an error, and the panic reaches Update's caller;
// the storage goes on (its locks were let go). Before the twentieth pass,
// the in-memory storage kept a panicking fn's writes.
func testPanicKeepsNothing(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	before := Snapshot(t, a.storage, id)
	func() {
		defer func() { require.Equal(t, "fn's bug", recover(), "the panic reaches Update's caller") }()
		_ = s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
			writeEachKind(ctx, t, tx, id)
			panic("fn's bug")
		})
	}()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := a.ws.Post(wctx, id, "m2")
	require.NoError(t, err, "a write of the thread after the panicking transaction")
	_, err = a.ws.Claim(wctx, id, "x", ttl)
	require.NoError(t, err, "the panicking transaction's holder acquires: its acquire was not kept")
	after := Snapshot(t, a.storage, id)
	require.Equal(t, before.Thread.Taken, after.Thread.Taken)
	require.Len(t, after.Thread.Messages, 2, "m1 and the post after the panic")
	ids, err := a.ws.Threads(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, ids)
}

// testKeptTransactionRefused: a transaction is fn's only while fn runs
// (core.Storage's Update): each call of one kept past its Update, or its
// View, is refused with core.ErrInvalidArgument and leaves nothing in
// storage, whether it comes right after, inside a later Update, or after
// that one (a storage that reuses transactions' values may have handed
// the kept one's to the later Update). Before, the PostgreSQL Store sent
// such a call to whichever transaction had the value then, or to the
// server on its own, committed as it ran.
func testKeptTransactionRefused(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	type kept struct {
		name string
		tx   core.Transaction
	}
	var txs []kept
	keep := func(name string) func(ctx context.Context, tx core.Transaction) error {
		return func(ctx context.Context, tx core.Transaction) error {
			txs = append(txs, kept{name, tx})
			_, err := tx.Thread(ctx, id) // a storage that keeps the state in tx has it
			return err
		}
	}
	require.NoError(t, s.Update(ctx, keep("Update")))
	if v, ok := s.(core.Viewer); ok {
		require.NoError(t, v.View(ctx, keep("View")))
	}
	before := Snapshot(t, s, id)
	var lines []core.TraceEvent
	r, traced := s.(traceReader)
	if traced {
		var err error
		lines, err = r.TraceLines(ctx)
		require.NoError(t, err)
	}
	late := "late-" + id
	calls := keptCalls(id, late)
	for _, k := range txs {
		refused := func(when string) {
			for _, c := range calls {
				if err := c.fn(ctx, k.tx); !errors.Is(err, errNotOffered) {
					require.ErrorIs(t, err, core.ErrInvalidArgument, "%s of a transaction kept past its %s, %s", c.name, k.name, when)
				}
			}
		}
		refused("after it returned")
		require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
			refused("inside a later Update")
			_, err := tx.Thread(ctx, id)
			return err
		}))
		refused("after a later Update")
	}
	require.Equal(t, before, Snapshot(t, s, id), "a kept transaction's calls changed the thread")
	ids, err := a.ws.Threads(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, ids, "a kept transaction's CreateThread was kept")
	if traced {
		after, err := r.TraceLines(ctx)
		require.NoError(t, err)
		require.Equal(t, lines, after, "a kept transaction's LogTrace was kept")
	}
	_, err = a.ws.Post(ctx, id, "m2")
	require.NoError(t, err, "a post after the kept transactions' calls")
}

// keptCall is one call of a kept transaction, for
// testKeptTransactionRefused.
type keptCall struct {
	name string
	fn   func(ctx context.Context, tx core.Transaction) error
}

// errNotOffered is a keptCall's error for a method the transaction does
// not have.
var errNotOffered = errors.New("storetest: the transaction has no such method")

// keptCalls are a call of each method of core.Transaction on thread id
// (CreateThread creates late), and of each optional one core looks for
// that tx has: writes, then reads.
func keptCalls(id, late core.ThreadID) []keptCall {
	lease := core.Lease{Thread: id, Holder: "kept", ExpiresAt: epoch.Add(ttl)}
	calls := []keptCall{
		{"CreateThread", func(ctx context.Context, tx core.Transaction) error { return tx.CreateThread(ctx, late) }},
		{"Bump", func(ctx context.Context, tx core.Transaction) error { _, err := tx.Bump(ctx, id); return err }},
		{"Append", func(ctx context.Context, tx core.Transaction) error {
			return tx.Append(ctx, id, core.Event{Version: 2, Kind: core.MessagePosted, Message: 2, Text: "kept"})
		}},
		{"SaveTaken", func(ctx context.Context, tx core.Transaction) error { return tx.SaveTaken(ctx, id, 1) }},
		{"PutLease", func(ctx context.Context, tx core.Transaction) error { return tx.PutLease(ctx, lease) }},
		{"DeleteLease", func(ctx context.Context, tx core.Transaction) error { return tx.DeleteLease(ctx, id) }},
		{"PostMessage", func(ctx context.Context, tx core.Transaction) error {
			p, ok := tx.(interface {
				PostMessage(context.Context, core.ThreadID, time.Time, string) (core.Seq, uint64, core.Seq, error)
			})
			if !ok {
				return errNotOffered
			}
			_, _, _, err := p.PostMessage(ctx, id, epoch, "kept")
			return err
		}},
		{"ClaimLease", func(ctx context.Context, tx core.Transaction) error {
			c, ok := tx.(interface {
				ClaimLease(context.Context, core.ThreadID, core.Holder, time.Time, time.Time) (*core.Thread, core.Lease, uint64, error)
			})
			if !ok {
				return errNotOffered
			}
			_, _, _, err := c.ClaimLease(ctx, id, "kept", epoch, epoch.Add(ttl))
			return err
		}},
		{"ClaimLeaseThenStart", func(ctx context.Context, tx core.Transaction) error {
			c, ok := tx.(interface {
				ClaimLeaseThenStart(context.Context, core.ThreadID, core.Holder, time.Time, time.Time, time.Time, func(*core.Thread) (core.Event, bool)) (*core.Thread, core.Lease, uint64, core.Event, error)
			})
			if !ok {
				return errNotOffered
			}
			_, _, _, _, err := c.ClaimLeaseThenStart(ctx, id, "kept", epoch, epoch.Add(ttl), epoch, func(*core.Thread) (core.Event, bool) { return core.Event{}, false })
			return err
		}},
		{"LogTrace", func(ctx context.Context, tx core.Transaction) error {
			l, ok := tx.(core.TraceLog)
			if !ok {
				return errNotOffered
			}
			return l.LogTrace(ctx, core.TraceEvent{Tick: 99, Action: core.ActionPost, Thread: id, Msg: 2, Proc: "kept"})
		}},
	}
	return append(calls, keptReads(id)...)
}

// keptReads are keptCalls' reads.
func keptReads(id core.ThreadID) []keptCall {
	return []keptCall{
		{"Thread", func(ctx context.Context, tx core.Transaction) error { _, err := tx.Thread(ctx, id); return err }},
		{"ThreadIDs", func(ctx context.Context, tx core.Transaction) error { _, err := tx.ThreadIDs(ctx); return err }},
		{"Events", func(ctx context.Context, tx core.Transaction) error { _, err := tx.Events(ctx, id); return err }},
		{"Lease", func(ctx context.Context, tx core.Transaction) error { _, err := tx.Lease(ctx, id); return err }},
		{"HoldsLease", func(ctx context.Context, tx core.Transaction) error {
			_, _, err := tx.HoldsLease(ctx, id, "kept")
			return err
		}},
		{"EventsAfter", func(ctx context.Context, tx core.Transaction) error {
			r, ok := tx.(interface {
				EventsAfter(context.Context, core.ThreadID, core.Position) ([]core.Event, error)
			})
			if !ok {
				return errNotOffered
			}
			_, err := r.EventsAfter(ctx, id, 0)
			return err
		}},
		{"LoggedTrace", func(ctx context.Context, tx core.Transaction) error {
			r, ok := tx.(core.TraceLogReader)
			if !ok {
				return errNotOffered
			}
			_, _, err := r.LoggedTrace(ctx, id, 1)
			return err
		}},
	}
}

// testRollbackUndoesEachWrite: a transaction that makes one write and
// then fails keeps nothing of it, whichever write it is: the taken cursor
// saved alone, a lease removed, a lease renewed, a lease taken over, an
// answer to an open request (the eighteenth mutation pass: a storage
// that undid none of these alone, or restored a renewed lease as none,
// passed the suite, whose rollback case undoes them together).
func testRollbackUndoesEachWrite(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1", "m2")
	c, req := askedAfterRun(t, a, id, "which one?")
	before := Snapshot(t, s, id)
	require.Equal(t, core.RequestOpen, before.Thread.Requests[0].State, "the request is open before the writes")
	boom := errors.New("boom")
	for _, w := range []struct {
		name string
		fn   func(ctx context.Context, tx core.Transaction) error
	}{
		{"SaveTaken", func(ctx context.Context, tx core.Transaction) error { return tx.SaveTaken(ctx, id, 2) }},
		{"DeleteLease", func(ctx context.Context, tx core.Transaction) error { return tx.DeleteLease(ctx, id) }},
		{"PutLease renewing", func(ctx context.Context, tx core.Transaction) error {
			return tx.PutLease(ctx, core.Lease{Thread: id, Holder: "ha", ExpiresAt: epoch.Add(5 * ttl)})
		}},
		{"PutLease taking over", func(ctx context.Context, tx core.Transaction) error {
			return tx.PutLease(ctx, core.Lease{Thread: id, Holder: "hz", ExpiresAt: epoch.Add(5 * ttl)})
		}},
		{"Append answering", func(ctx context.Context, tx core.Transaction) error {
			th, err := tx.Thread(ctx, id)
			if err != nil {
				return err
			}
			ev := core.Event{Kind: core.Answered, Message: 2, Request: req, Holder: "ha"}
			if err := th.Check(ev); err != nil {
				return err
			}
			if ev.Version, err = tx.Bump(ctx, id); err != nil {
				return err
			}
			return tx.Append(ctx, id, ev)
		}},
	} {
		err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
			if err := w.fn(ctx, tx); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom, "%s", w.name)
		require.Equal(t, before, Snapshot(t, s, id), "a failed transaction kept its %s", w.name)
	}
	p := plan(t, a, c, core.PlanReply)
	require.NoError(t, a.ws.Reply(ctx, c, p.Request, p.Message), "the answer the failed transaction made is made")
}

type ctxKey struct{}

// testUpdateContext: Update passes its context to fn, and one whose
// context has ended writes nothing and returns the context's error; so
// does a PendingLister's listing (the eighteenth mutation pass: a storage
// that gave fn a context of its own, or went on with an ended one,
// passed the suite).
func testUpdateContext(t *testing.T, s core.Storage) {
	ctx := context.WithValue(context.Background(), ctxKey{}, "mine")
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		require.Equal(t, "mine", ctx.Value(ctxKey{}), "fn's context is not Update's")
		return nil
	}))
	ended, cancel := context.WithCancel(ctx)
	cancel()
	before := Snapshot(t, s, id)
	err := s.Update(ended, func(ctx context.Context, tx core.Transaction) error {
		if err := tx.CreateThread(ctx, id+"-ended"); err != nil {
			return err
		}
		return tx.SaveTaken(ctx, id, 1)
	})
	require.ErrorIs(t, err, context.Canceled, "an Update whose context had ended")
	require.Equal(t, before, Snapshot(t, s, id), "an Update whose context had ended wrote")
	ids, err := a.ws.Threads(context.Background())
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, ids, "an Update whose context had ended created a thread")
	if pl, ok := s.(core.PendingLister); ok {
		_, err := pl.PendingThreads(ended)
		require.ErrorIs(t, err, context.Canceled, "a listing whose context had ended")
	}
}

// testHandedOutSlicesAreCopies: the thread ids and events a transaction
// hands out are the caller's: writing into them changes nothing storage
// holds (the eighteenth mutation pass: a storage whose ThreadIDs, Events
// or EventsAfter returned its own slices passed the suite).
func testHandedOutSlicesAreCopies(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	before := Snapshot(t, s, id)
	require.NoError(t, s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		ids, err := tx.ThreadIDs(ctx)
		require.NoError(t, err)
		ids[0] = "written"
		evs, err := tx.Events(ctx, id)
		require.NoError(t, err)
		evs[0].Text = "written"
		if r, ok := tx.(interface {
			EventsAfter(context.Context, core.ThreadID, core.Position) ([]core.Event, error)
		}); ok {
			after, err := r.EventsAfter(ctx, id, 0)
			require.NoError(t, err)
			after[0].Message = 99
		}
		return nil
	}))
	after := Snapshot(t, s, id)
	require.Equal(t, before.Thread, after.Thread, "writing into a read's result changed the thread")
	require.Len(t, after.Events, 1)
	require.Equal(t, [2]any{core.Seq(1), "m1"}, [2]any{after.Events[0].Message, after.Events[0].Text}, "writing into a read's result changed the log")
	ids, err := a.ws.Threads(ctx)
	require.NoError(t, err)
	require.Equal(t, []core.ThreadID{id}, ids, "writing into ThreadIDs' result changed the threads")
}

// A process that claims the same thread twice gets two holders; a write
// delayed from its first claim is refused under the second (the ABA case a
// per-process identity would let through). The process restarted between
// its claims, so its second claim is a new Workspace's (a Workspace keeps
// one round per thread), under the same process name.
func testNewClaimNewHolder(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a, b := newProc(s, "a", 0), newProc(s, "b", 0)
	id := newThread(t, a, "m1")
	first, err := a.ws.Claim(ctx, id, "a-1", ttl)
	require.NoError(t, err)
	plan(t, a, first, core.PlanRun)
	b.clock.Advance(ttl)
	cb, err := b.ws.Claim(ctx, id, "b-1", ttl)
	require.NoError(t, err)
	require.NoError(t, b.ws.Release(ctx, cb))
	restarted := newProc(s, "a", 0)
	second, err := restarted.ws.Claim(ctx, id, "a-2", ttl)
	require.NoError(t, err)
	require.NotEqual(t, first.Holder, second.Holder)
	_, err = a.ws.RunStart(ctx, first, 1)
	require.ErrorIs(t, err, core.ErrThreadBusy, "a write of the first claim went through under the second")
	plan(t, restarted, second, core.PlanRun)
	_, err = restarted.ws.RunStart(ctx, second, 1)
	require.NoError(t, err)
	_, err = newProc(s, "a", 0).ws.Claim(ctx, id, "a-2", ttl)
	require.ErrorIs(t, err, core.ErrInvalidArgument, "a holder must be fresh for every claim")
}

func testRunLifecycle(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1", "m2")
	c, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	p, err := a.ws.Plan(ctx, c)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanRun, Message: 1, Posted: core.Message{Seq: 1, Text: "m1", PostedAt: epoch}}, p)
	run, err := a.ws.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	require.Equal(t, core.RunID(1), run)
	req, err := a.ws.Ask(ctx, c, run, "sure?")
	require.NoError(t, err)
	require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
	// The thread as storage keeps it refuses the ended run's end and
	// questions (the Workspace's round refuses them first).
	th := Snapshot(t, s, id).Thread
	require.ErrorIs(t, th.Check(core.Event{Kind: core.RunEnded, Run: run}), core.ErrRunNotActive)
	require.ErrorIs(t, th.Check(core.Event{Kind: core.Asked, Run: run, Request: req + 1, Text: "again?"}), core.ErrRunNotActive)
	require.ErrorIs(t, a.ws.RunEnd(ctx, c, run, ""), core.ErrOutOfOrder)
	p, err = a.ws.Plan(ctx, c)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanReply, Message: 2, Request: req, Taken: 1, Posted: core.Message{Seq: 2, Text: "m2", PostedAt: epoch}}, p)
	require.NoError(t, a.ws.Reply(ctx, c, p.Request, p.Message))
	p, err = a.ws.Plan(ctx, c)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanNothing, Taken: 2}, p)
	require.ErrorIs(t, Snapshot(t, s, id).Thread.Check(core.Event{Kind: core.RunStarted, Message: 3, Run: 2, Holder: "ha"}), core.ErrUnknownMessage)

	st := Snapshot(t, a.storage, id)
	kinds := make([]core.EventKind, len(st.Events))
	for i, e := range st.Events {
		kinds[i] = e.Kind
	}
	require.Equal(t, []core.EventKind{core.MessagePosted, core.MessagePosted, core.RunStarted, core.Asked, core.RunEnded, core.Answered}, kinds)
	require.Equal(t, core.StateEnded, st.Thread.Runs()[0].State)
	require.Equal(t, core.Request{ID: 1, Run: 1, Question: "sure?", State: core.RequestAnswered, Answer: 2}, st.Thread.Requests[0])
}

func testReplyAnswersOnce(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1", "m2", "m3")
	c, req := askedAfterRun(t, a, id, "q")
	p := plan(t, a, c, core.PlanReply)
	require.Equal(t, [2]int{int(req), 2}, [2]int{int(p.Request), int(p.Message)})
	require.NoError(t, a.ws.Reply(ctx, c, req, 2))
	before := Snapshot(t, s, id)
	// A second answer, or one to a request never asked, is refused by
	// the thread as storage keeps it, and writes nothing.
	require.ErrorIs(t, write(ctx, s, id, core.Event{Kind: core.Answered, Message: 3, Request: req, Holder: "ha"}), core.ErrAlreadyAnswered)
	require.ErrorIs(t, write(ctx, s, id, core.Event{Kind: core.Answered, Message: 3, Request: req + 1, Holder: "ha"}), core.ErrUnknownRequest)
	require.Equal(t, before, Snapshot(t, s, id))
}

// write makes ev on the thread through the port, as the Workspace's
// writes do: in one transaction it reads the thread, checks ev against it
// (core.Thread.Check), bumps the version, appends ev, and saves the taken
// cursor at the message ev consumes. It returns the first error.
func write(ctx context.Context, s core.Storage, id core.ThreadID, ev core.Event) error {
	return s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		th, err := tx.Thread(ctx, id)
		if err != nil {
			return err
		}
		if err := th.Check(ev); err != nil {
			return err
		}
		if ev.Version, err = tx.Bump(ctx, id); err != nil {
			return err
		}
		if err := tx.Append(ctx, id, ev); err != nil {
			return err
		}
		if ev.Consumes() {
			return tx.SaveTaken(ctx, id, ev.Message)
		}
		return nil
	})
}

// A claim abandons only the runs of earlier claims, and only while it has
// the lease: an abandoned run's questions and end are refused, and a claim
// that lost its lease (x's) cannot abandon the live run of the claim that
// took it.
func testAbandonFenced(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a, x, b := newProc(s, "a", 0), newProc(s, "x", 0), newProc(s, "b", 0)
	id := newThread(t, a, "m1", "m2")
	ca, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	plan(t, a, ca, core.PlanRun)
	run, err := a.ws.RunStart(ctx, ca, 1)
	require.NoError(t, err)
	require.ErrorIs(t, a.ws.Abandon(ctx, ca, run), core.ErrOutOfOrder, "a claim abandoned its own run")
	x.clock.Advance(ttl)
	cx, err := x.ws.Claim(ctx, id, "hx", ttl)
	require.NoError(t, err)
	b.clock.Advance(2 * ttl)
	cb, err := b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err)
	p, err := b.ws.Plan(ctx, cb)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanAbandon, Runs: []core.RunID{run}, Taken: 1}, p)
	require.NoError(t, b.ws.Abandon(ctx, cb, run))
	_, err = a.ws.Ask(ctx, ca, run, "q")
	require.ErrorIs(t, err, core.ErrRunAbandoned)
	require.ErrorIs(t, a.ws.RunEnd(ctx, ca, run, ""), core.ErrRunAbandoned)
	plan(t, b, cb, core.PlanRun)
	run2, err := b.ws.RunStart(ctx, cb, 2)
	require.NoError(t, err)
	// x lost its claim: its abandon of b's live run is fenced out.
	require.ErrorIs(t, x.ws.Abandon(ctx, cx, run2), core.ErrThreadBusy)
	th, err := a.ws.Thread(ctx, id)
	require.NoError(t, err)
	require.Equal(t, core.StateActive, th.Runs()[1].State)
}

// Many processes claim one free thread at once: exactly one wins.
func testConcurrentClaimsOneWinner(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := newProc(s, "p", 0)
			_, errs[i] = p.ws.Claim(ctx, id, core.Holder(string(rune('a'+i))), ttl)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		require.ErrorIs(t, err, core.ErrThreadBusy)
	}
	require.Equal(t, 1, won)
}

func testVersionCountsWrites(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	version := func() uint64 {
		th, err := a.ws.Thread(ctx, id)
		require.NoError(t, err)
		return th.Version
	}
	require.Equal(t, uint64(1), version())
	c, err := a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	require.NoError(t, a.ws.Renew(ctx, c, ttl))
	_, err = a.ws.Plan(ctx, c)
	require.NoError(t, err)
	require.Equal(t, uint64(3), version(), "a plan is a read")
	run, err := a.ws.RunStart(ctx, c, 1)
	require.NoError(t, err)
	require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
	require.NoError(t, a.ws.Release(ctx, c))
	require.Equal(t, uint64(6), version())
	c, err = a.ws.Claim(ctx, id, "ha2", ttl)
	require.NoError(t, err)
	b := newProc(s, "b", 2*ttl)
	_, err = b.ws.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err)
	require.Equal(t, uint64(8), version())
	require.NoError(t, a.ws.Release(ctx, c), "releasing a lost claim is no error")
	require.Equal(t, uint64(8), version(), "releasing a lost claim wrote")
}

// hidden hides every interface of a storage but core.Storage, so that the
// Workspace falls back to reading each thread.
type hidden struct{ core.Storage }

// Pending lists exactly the threads with a message not yet taken or a run
// still active, in creation order, each with its lease, whether the
// storage lists them itself (core.PendingLister) or the Workspace reads
// each thread.
func testPendingThreads(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	for _, id := range []core.ThreadID{"idle", "unconsumed", "active", "done", "abandoned"} {
		require.NoError(t, a.ws.CreateThread(ctx, id))
	}
	post := func(id core.ThreadID) {
		_, err := a.ws.Post(ctx, id, "m")
		require.NoError(t, err)
	}
	start := func(id core.ThreadID, holder core.Holder) (core.Claim, core.RunID) {
		c, err := a.ws.Claim(ctx, id, holder, ttl)
		require.NoError(t, err)
		plan(t, a, c, core.PlanRun)
		run, err := a.ws.RunStart(ctx, c, 1)
		require.NoError(t, err)
		return c, run
	}
	post("unconsumed")
	post("active")
	claimed := a.clock.Now()
	start("active", "h1")
	post("done")
	c, run := start("done", "h2")
	require.NoError(t, a.ws.RunEnd(ctx, c, run, ""))
	post("abandoned")
	_, run = start("abandoned", "h3")
	b := newProc(s, "b", ttl)
	c2, err := b.ws.Claim(ctx, "abandoned", "h4", ttl)
	require.NoError(t, err)
	require.NoError(t, b.ws.Abandon(ctx, c2, run))

	want := []core.ThreadID{"unconsumed", "active"}
	check := func(how string, got []core.PendingThread) {
		t.Helper()
		require.Equal(t, want, pendingIDs(got), how)
		require.Equal(t, core.Lease{}, got[0].Lease, "%s: nobody holds %q", how, got[0].ID)
		l := got[1].Lease
		require.Equal(t, core.Holder("h1"), l.Holder, "%s: the lease of %q", how, got[1].ID)
		require.False(t, l.Expired(claimed.Add(ttl-time.Millisecond)), "%s: h1's lease expires a ttl after its claim", how)
		require.True(t, l.Expired(claimed.Add(ttl)), "%s: h1's lease expires a ttl after its claim", how)
	}
	got, err := a.ws.Pending(ctx)
	require.NoError(t, err)
	check("listed", got)
	scan := core.NewWorkspace(hidden{s}, a.clock)
	got, err = scan.Pending(ctx)
	require.NoError(t, err)
	check("read thread by thread", got)
}

// A holder acquires a thread's lease once: after a release, after a lapse
// and another holder's claim, and through a raw PutLease alike, its
// second acquire is refused with ErrHolderReused and writes nothing. The
// second claims are made by new Workspaces (restarted processes), which
// remember no holder: storage refuses them.
func testHolderReused(t *testing.T, s core.Storage) {
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	ctx := context.Background()
	c, err := a.ws.Claim(ctx, id, "h1", ttl)
	require.NoError(t, err)
	require.NoError(t, a.ws.Renew(ctx, c, ttl), "a renewal is not an acquire")
	require.NoError(t, a.ws.Release(ctx, c))
	before := Snapshot(t, s, id)
	_, err = newProc(s, "a", 0).ws.Claim(ctx, id, "h1", ttl)
	require.ErrorIs(t, err, core.ErrHolderReused, "a claim by a holder that released the thread")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.Equal(t, before, Snapshot(t, s, id), "a refused claim changed storage")

	_, err = a.ws.Claim(ctx, id, "h2", ttl)
	require.NoError(t, err)
	b := newProc(s, "b", 0)
	b.clock.Advance(ttl)
	_, err = b.ws.Claim(ctx, id, "h3", ttl)
	require.NoError(t, err)
	_, err = newProc(s, "a", 3*ttl).ws.Claim(ctx, id, "h2", ttl)
	require.ErrorIs(t, err, core.ErrHolderReused, "a claim by a holder whose lease lapsed and was taken")

	err = s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return tx.PutLease(ctx, core.Lease{Thread: id, Holder: "h1", ExpiresAt: epoch.Add(ttl)})
	})
	require.ErrorIs(t, err, core.ErrHolderReused, "a raw PutLease for a holder that held the lease")

	// Holders are per thread: the same name on another thread is fresh.
	other := core.ThreadID(string(id) + "-other")
	require.NoError(t, a.ws.CreateThread(ctx, other))
	_, err = newProc(s, "a", 0).ws.Claim(ctx, other, "h1", ttl)
	require.NoError(t, err)
}

// reuseHolder plays, through the public API alone, what a caller that
// reuses a holder across claims does: process a claims the thread as
// "h" and plans a run for message 1, then stalls; b takes the thread over
// after the TTL and starts that run; a restarted a (a new Workspace, which
// remembers no holder), once b's lease has lapsed too, claims again as
// "h"; and the stalled round then finishes the start it planned. Storage
// that enforces holder freshness refuses the second claim: reuseHolder
// returns that error. Storage that does not lets the stale start pass the
// fence: reuseHolder returns the thread, in which message 1 was consumed
// twice and two runs are active.
func reuseHolder(ctx context.Context, s core.Storage) (*core.Thread, error) {
	a, b := newProc(s, "a", 0), newProc(s, "b", 0)
	id := core.ThreadID("reused-holder")
	if err := a.ws.CreateThread(ctx, id); err != nil {
		return nil, err
	}
	if _, err := a.ws.Post(ctx, id, "m1"); err != nil {
		return nil, err
	}
	ca, err := a.ws.Claim(ctx, id, "h", ttl)
	if err != nil {
		return nil, err
	}
	p, err := a.ws.Plan(ctx, ca)
	if err != nil {
		return nil, err
	}
	if p.Kind != core.PlanRun {
		return nil, fmt.Errorf("storetest: a's plan is %v, want a run", p.Kind)
	}
	b.clock.Advance(ttl)
	cb, err := b.ws.Claim(ctx, id, "hb", ttl)
	if err != nil {
		return nil, err
	}
	pb, err := b.ws.Plan(ctx, cb)
	if err != nil {
		return nil, err
	}
	if _, err := b.ws.RunStart(ctx, cb, pb.Message); err != nil {
		return nil, err
	}
	restarted := newProc(s, "a", 3*ttl)
	if _, err := restarted.ws.Claim(ctx, id, "h", ttl); err != nil {
		return nil, err
	}
	if _, err := a.ws.RunStart(ctx, ca, p.Message); err != nil {
		return nil, fmt.Errorf("storetest: the stale start was refused after all: %w", err)
	}
	return a.ws.Thread(ctx, id)
}

// CheckReuseHolderMutant requires that s, a storage with holder freshness
// switched off, lets reuseHolder consume a message twice with two runs
// active: the mutant the HolderReused case exists to catch.
func CheckReuseHolderMutant(t *testing.T, s core.Storage) {
	t.Helper()
	th, err := reuseHolder(context.Background(), s)
	require.NoError(t, err, "without freshness the reused holder's claim must pass")
	require.Equal(t, 2, th.Consumed()[1], "message 1 consumed twice")
	require.Len(t, th.ActiveRuns(), 2, "two runs active")
}

func testReuseHolderRefused(t *testing.T, s core.Storage) {
	_, err := reuseHolder(context.Background(), s)
	require.ErrorIs(t, err, core.ErrHolderReused)
}

// testRolledBackAcquireFreesHolder: an acquire whose transaction rolled
// back leaves no trace of its holder, which may then claim the thread
// (ErrHolderReused is for a holder that held the lease).
func testRolledBackAcquireFreesHolder(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a := newProc(s, "a", 0)
	id := newThread(t, a, "m1")
	boom := errors.New("boom")
	err := s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		if err := tx.PutLease(ctx, core.Lease{Thread: id, Holder: "ha", ExpiresAt: epoch.Add(ttl)}); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = a.ws.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err, "a claim by the holder of an acquire that rolled back")
}

// The fence's central property (CheckAcquireWaits).
func testAcquireWaitsForFencedWrite(t *testing.T, s core.Storage) {
	require.NoError(t, CheckAcquireWaits(context.Background(), s, core.AllFences()))
}

// testRunEndThenPlan: a run's end and the next plan in one transaction
// (RunEndThenStart with no start) plan what RunEnd and then Plan would
// (the plan reads the end it follows, and the messages and requests
// posted before it), trace the same lines, and a refused end plans
// nothing; so does a claim and its first plan (ClaimThenPlan).
func testRunEndThenPlan(t *testing.T, s core.Storage) {
	ctx := context.Background()
	rec, clock, a, id, post := fusedCase(t, s)
	post("m1")
	post("m2")
	c, err := a.Claim(ctx, id, "ha", ttl)
	require.NoError(t, err)
	p, err := a.Plan(ctx, c)
	require.NoError(t, err)
	run, err := a.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	req, err := a.Ask(ctx, c, run, "which?")
	require.NoError(t, err)

	p, _, err = a.RunEndThenStart(ctx, c, run, "", -1, false)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanReply, Message: 2, Request: req, Taken: 1, Posted: core.Message{Seq: 2, Text: "m2", PostedAt: epoch}}, p)
	require.NoError(t, a.Reply(ctx, c, p.Request, p.Message))

	post("m3")
	p, err = a.Plan(ctx, c)
	require.NoError(t, err)
	run, err = a.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	post("m4") // while the run goes on: the plan after its end sees it
	p, _, err = a.RunEndThenStart(ctx, c, run, "", -1, false)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanRun, Message: 4, Taken: 3, Posted: core.Message{Seq: 4, Text: "m4", PostedAt: epoch}}, p)
	run, err = a.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	p, _, err = a.RunEndThenStart(ctx, c, run, "", -1, false)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanNothing, Taken: 4}, p)
	_, _, err = a.RunEndThenStart(ctx, c, run, "", -1, false)
	require.ErrorIs(t, err, core.ErrOutOfOrder, "the run has ended: only Release, Abandon or Plan may follow")
	require.NoError(t, a.Release(ctx, c))

	// Another claim abandons the run of a lapsed one: its end is refused,
	// and nothing is planned.
	post("m5")
	c, p, err = a.ClaimThenPlan(ctx, id, "ha2", ttl)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanRun, Message: 5, Taken: 4, Posted: core.Message{Seq: 5, Text: "m5", PostedAt: epoch}}, p)
	run, err = a.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	clock.Advance(ttl)
	b := core.NewWorkspace(s, clock, core.WithProcess("b"), core.WithTracer(rec))
	cb, pb, err := b.ClaimThenPlan(ctx, id, "hb", ttl)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanAbandon, Runs: []core.RunID{run}, Taken: 5}, pb)
	other := core.NewWorkspace(s, clock, core.WithProcess("c"), core.WithTracer(rec))
	_, _, err = other.ClaimThenPlan(ctx, id, "hc", ttl)
	require.ErrorIs(t, err, core.ErrThreadBusy, "a live lease")
	require.NoError(t, b.Abandon(ctx, cb, run))
	p, _, err = a.RunEndThenStart(ctx, c, run, "", -1, false)
	require.ErrorIs(t, err, core.ErrRunAbandoned)
	require.Equal(t, core.Plan{}, p)

	var (
		lines []string
		own   []core.TraceEvent
	)
	for _, l := range rec.Lines() {
		if l.Proc == "a" {
			lines = append(lines, fmt.Sprintf("%s@%d", l.Action, l.Tick))
			own = append(own, l)
		}
	}
	// A fused plan's line (these) carries the call and return of the
	// write it was read in; any other line's call follows the return of
	// the line before.
	fused := map[int]bool{5: true, 10: true, 15: true}
	for i, l := range own {
		switch {
		case fused[i]:
			require.Equal(t, [2]int64{own[i-1].Call, own[i-1].Return}, [2]int64{l.Call, l.Return}, "line %d, %s", i, lines[i])
		case i > 0:
			require.Greater(t, l.Call, own[i-1].Return, "line %d, %s", i, lines[i])
		}
		require.Less(t, l.Call, l.Return, "line %d, %s", i, lines[i])
	}
	require.Equal(t, []string{
		"Claim@3", "Plan@3", "RunStart@4", "Ask@5", "RunEnd@6", "Plan@6", "Reply@7",
		"Plan@8", "RunStart@9", "RunEnd@11", "Plan@11", "RunStart@12", "RunEnd@13", "Release@14",
		"Claim@16", "Plan@16", "RunStart@17", "EndRefused@19",
	}, lines)
	_, err = tracecheck.Check(rec.Lines())
	require.NoError(t, err)
}

// testRunEndThenStart: a run's end, the next plan and, when that is a
// run, its start in one transaction write and trace what RunEnd, Plan and
// RunStart would, the three lines with the transaction's call and return;
// a plan that is no run starts nothing; a start the fence refuses there
// writes nothing of the start (the end stands) and is left to RunStart,
// which records the refusal; a refused end writes and plans nothing.
func testRunEndThenStart(t *testing.T, s core.Storage) {
	ctx := context.Background()
	rec, clock, a, id, post := fusedCase(t, s)
	post("m1")
	post("m2")
	post("m3")
	c, p, err := a.ClaimThenPlan(ctx, id, "ha", ttl)
	require.NoError(t, err)
	run, err := a.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	// One message waits after the next prompt, not two: the run is
	// planned, and RunStart starts it.
	p, started, err := a.RunEndThenStart(ctx, c, run, "", 2, false)
	require.NoError(t, err)
	require.Zero(t, started)
	require.Equal(t, core.Plan{Kind: core.PlanRun, Message: 2, Taken: 1, Posted: core.Message{Seq: 2, Text: "m2", PostedAt: epoch}}, p)
	run, err = a.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	p, next, err := a.RunEndThenStart(ctx, c, run, "said", 0, false)
	require.NoError(t, err)
	require.Equal(t, core.Plan{Kind: core.PlanRun, Message: 3, Taken: 2, Posted: core.Message{Seq: 3, Text: "m3", PostedAt: epoch}}, p)
	require.Equal(t, run+1, next)
	_, err = a.RunStart(ctx, c, p.Message)
	require.ErrorIs(t, err, core.ErrOutOfOrder, "the plan was carried out: the run is started")
	th := Snapshot(t, s, id).Thread
	require.Equal(t, core.Seq(3), th.Taken)
	require.Equal(t, "said", th.Runs()[run-1].Output)
	require.Equal(t, core.StateEnded, th.Runs()[run-1].State)
	require.Equal(t, core.StateActive, th.Runs()[next-1].State)
	require.Equal(t, core.Seq(3), th.Runs()[next-1].Prompt)

	// Nothing left: the plan is nothing, and nothing starts.
	p, started, err = a.RunEndThenStart(ctx, c, next, "", 0, false)
	require.NoError(t, err)
	require.Zero(t, started)
	require.Equal(t, core.Plan{Kind: core.PlanNothing, Taken: 3}, p)
	require.NoError(t, a.Release(ctx, c))

	// The lease lapses and another claim takes it while the run works:
	// the end stands (it is not fenced), the start is not written, and
	// RunStart records its refusal.
	post("m4")
	post("m5")
	c, run, b, cb := lapsedRun(t, s, rec, clock, a, id)
	p, started, err = a.RunEndThenStart(ctx, c, run, "", 0, false)
	require.NoError(t, err)
	require.Zero(t, started, "the fence refused the start")
	require.Equal(t, core.PlanRun, p.Kind)
	require.Equal(t, core.Seq(5), p.Message)
	_, err = a.RunStart(ctx, c, p.Message)
	require.ErrorIs(t, err, core.ErrThreadBusy)
	th = Snapshot(t, s, id).Thread
	require.Equal(t, core.Seq(4), th.Taken, "nothing of the refused start is written")
	require.Equal(t, core.StateEnded, th.Runs()[run-1].State)
	require.Len(t, th.Runs(), int(run))

	// A run another claim abandoned: its end is refused, nothing planned.
	_, err = b.RunStart(ctx, cb, 5)
	require.ErrorIs(t, err, core.ErrOutOfOrder, "b has not planned")
	pb, err := b.Plan(ctx, cb)
	require.NoError(t, err)
	brun, err := b.RunStart(ctx, cb, pb.Message)
	require.NoError(t, err)
	clock.Advance(ttl)
	c, pa, err := a.ClaimThenPlan(ctx, id, "ha3", ttl)
	require.NoError(t, err)
	require.Equal(t, []core.RunID{brun}, pa.Runs)
	require.NoError(t, a.Abandon(ctx, c, brun))
	p, started, err = b.RunEndThenStart(ctx, cb, brun, "", 0, false)
	require.ErrorIs(t, err, core.ErrRunAbandoned)
	require.Zero(t, started)
	require.Equal(t, core.Plan{}, p)
	require.NoError(t, a.Release(ctx, c))

	requireTransactions(t, rec, "a", []string{
		"Claim@4", "Plan@4", "RunStart@5", "RunEnd@6", "Plan@6", "RunStart@7", "RunEnd@8", "Plan@8", "RunStart@9", "RunEnd@10", "Release@11",
		"Claim@14", "Plan@14", "RunStart@15", "RunEnd@17", "Plan@17", "StartFenced@17",
		"Claim@19", "Abandon@20", "Release@21",
	}, 1, 4, 7, 8, 12, 15)
}

// testRunEndThenRelease: a run's end with release, when nothing is left
// to plan, gives the lease up in its transaction: the RunEnd and Release
// lines carry that transaction's call and return, the lease is gone, and
// the round is over (a Release after it is refused, writing nothing). A
// message posted while the run worked is planned instead, and the claim
// kept. A lease that lapsed to another claim is not given up: the end
// stands (it is not fenced), the Release is a read, and the round is over
// all the same, the other claim's lease untouched.
func testRunEndThenRelease(t *testing.T, s core.Storage) {
	ctx := context.Background()
	rec, clock, a, id, post := fusedCase(t, s)
	post("m1")
	c, p, err := a.ClaimThenPlan(ctx, id, "ha", ttl)
	require.NoError(t, err)
	run, err := a.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	post("m2") // while the run works: planned, not released
	p, started, err := a.RunEndThenStart(ctx, c, run, "", 0, true)
	require.NoError(t, err)
	require.Equal(t, core.PlanRun, p.Kind)
	require.Equal(t, core.Seq(2), p.Message)
	require.Equal(t, run+1, started, "a backlog of 0 starts the planned run")
	l := Snapshot(t, s, id).Lease
	require.Equal(t, core.Holder("ha"), l.Holder, "a claim with work is kept")

	p, started, err = a.RunEndThenStart(ctx, c, started, "done", 0, true)
	require.NoError(t, err)
	require.Zero(t, started)
	require.Equal(t, core.Plan{Kind: core.PlanNothing, Taken: 2}, p)
	snap := Snapshot(t, s, id)
	require.Empty(t, snap.Lease.Holder, "released with the end")
	require.Equal(t, core.StateEnded, snap.Thread.Runs()[1].State)
	require.Equal(t, "done", snap.Thread.Runs()[1].Output)
	version := snap.Thread.Version
	require.ErrorIs(t, a.Release(ctx, c), core.ErrRoundOver)
	require.ErrorIs(t, a.Renew(ctx, c, ttl), core.ErrRoundOver)
	require.Equal(t, version, Snapshot(t, s, id).Thread.Version, "nothing written after the round")

	// The lease lapses and b claims while a's run works: a's end stands,
	// its release reads b's lease and gives nothing up.
	post("m3")
	c, run, b, cb := lapsedRun(t, s, rec, clock, a, id)
	p, started, err = a.RunEndThenStart(ctx, c, run, "", 0, true)
	require.NoError(t, err)
	require.Zero(t, started)
	require.Equal(t, core.PlanNothing, p.Kind)
	snap = Snapshot(t, s, id)
	require.Equal(t, core.Holder("hb"), snap.Lease.Holder, "the other claim's lease is untouched")
	require.Equal(t, core.StateEnded, snap.Thread.Runs()[run-1].State)
	require.ErrorIs(t, a.Release(ctx, c), core.ErrRoundOver)
	require.NoError(t, b.Release(ctx, cb))

	own := requireTransactions(t, rec, "a", []string{
		"Claim@2", "Plan@2", "RunStart@3", "RunEnd@5", "Plan@5", "RunStart@6", "RunEnd@7", "Release@8",
		"Claim@10", "Plan@10", "RunStart@11", "RunEnd@13", "Release@13",
	}, 1, 4, 5, 7, 9, 12)
	require.False(t, own[7].Read, "the release gave the lease up")
	require.True(t, own[12].Read, "the release found b's lease")
}

// lapsedRun claims thread id for a (holder ha2), starts the planned run,
// lets the lease lapse, and has process b claim the thread (holder hb)
// while the run works. It returns a's claim and run, and b with its claim.
func lapsedRun(t *testing.T, s core.Storage, rec core.Tracer, clock *coretest.Clock, a *core.Workspace, id core.ThreadID) (core.Claim, core.RunID, *core.Workspace, core.Claim) {
	t.Helper()
	ctx := context.Background()
	c, p, err := a.ClaimThenPlan(ctx, id, "ha2", ttl)
	require.NoError(t, err)
	run, err := a.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	clock.Advance(ttl)
	b := core.NewWorkspace(s, clock, core.WithProcess("b"), core.WithTracer(rec))
	cb, err := b.Claim(ctx, id, "hb", ttl)
	require.NoError(t, err)
	return c, run, b, cb
}

// requireTransactions checks the lines proc traced, as Action@Tick, are
// want, and that the lines at fused carry the call and return of the line
// before them (one transaction), where every other line's call follows
// the return of the line before; and that the whole trace is accepted.
// It returns proc's lines.
func requireTransactions(t *testing.T, rec *countingRecorder, proc string, want []string, fused ...int) []core.TraceEvent {
	t.Helper()
	var lines []string
	var own []core.TraceEvent
	for _, l := range rec.Lines() {
		if l.Proc == proc {
			lines = append(lines, fmt.Sprintf("%s@%d", l.Action, l.Tick))
			own = append(own, l)
		}
	}
	require.Equal(t, want, lines)
	for i := 1; i < len(own); i++ {
		if slices.Contains(fused, i) {
			require.Equal(t, [2]int64{own[i-1].Call, own[i-1].Return}, [2]int64{own[i].Call, own[i].Return}, "line %d, %s", i, lines[i])
		} else {
			require.Greater(t, own[i].Call, own[i-1].Return, "line %d, %s", i, lines[i])
		}
	}
	_, err := tracecheck.Check(rec.Lines())
	require.NoError(t, err)
	return own
}

// fusedCase is the setup of the fused writes' cases: a counting
// recorder, a clock, process a over s, and a new thread with a poster.
func fusedCase(t *testing.T, s core.Storage) (*countingRecorder, *coretest.Clock, *core.Workspace, core.ThreadID, func(string)) {
	ctx := context.Background()
	rec := &countingRecorder{}
	clock := coretest.NewClock(epoch)
	a := core.NewWorkspace(s, clock, core.WithProcess("a"), core.WithTracer(rec))
	poster := core.NewWorkspace(s, clock, core.WithProcess("poster"), core.WithTracer(rec))
	id := core.ThreadID("thread-" + t.Name())
	require.NoError(t, poster.CreateThread(ctx, id))
	post := func(text string) {
		t.Helper()
		_, err := poster.Post(ctx, id, text)
		require.NoError(t, err)
	}
	return rec, clock, a, id, post
}

// countingRecorder stamps each line with a counter for its call and
// return (core.TraceClock).
type countingRecorder struct {
	tracecheck.Recorder
	n atomic.Int64
}

// TraceNow returns the next count.
func (r *countingRecorder) TraceNow() int64 { return r.n.Add(1) }

// A lease's TTL need not be a whole number of microseconds (a third of a
// second is not): storage may keep expiries to the microsecond only, but
// the trace a claim, a renewal and the takeover after them write must
// still be the spec's: each line's expires = now + ttl, and the takeover's
// replaced the expiry the last of them stamped.
func testOddTTLTraced(t *testing.T, s core.Storage) {
	ctx := context.Background()
	rec := &tracecheck.Recorder{}
	a, b := newProc(s, "a", 0, core.WithTracer(rec)), newProc(s, "b", 0, core.WithTracer(rec))
	id := newThread(t, a, "m1")
	const odd = ttl/3 + 500*time.Nanosecond
	ca, err := a.ws.Claim(ctx, id, "ha", odd)
	require.NoError(t, err)
	a.clock.Advance(time.Second)
	require.NoError(t, a.ws.Renew(ctx, ca, odd))
	b.clock.Advance(time.Second + odd + time.Microsecond)
	cb, err := b.ws.Claim(ctx, id, "hb", odd)
	require.NoError(t, err, "the renewal's lease has expired by b's clock")
	require.NoError(t, b.ws.Release(ctx, cb))
	_, err = tracecheck.Check(rec.Lines())
	require.NoError(t, err, "the trace of claims and a renewal with a TTL of %v", odd)
	l, err := b.ws.Lease(ctx, id)
	require.NoError(t, err)
	require.Zero(t, l.Holder, "released")
}
