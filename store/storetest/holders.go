package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
)

// A holder acquires a thread's lease once: after a release, after a lapse
// and another holder's claim, and through a raw PutLease alike, its
// second acquire is refused with ErrHolderReused and writes nothing.
func testHolderReused(t *testing.T, s core.Storage) {
	ctx := context.Background()
	a, b := newProc(s, "a", 0), newProc(s, "b", 0)
	id := newThread(t, a, "m1")

	c, err := a.ws.Claim(ctx, id, "h1", ttl)
	require.NoError(t, err)
	require.NoError(t, a.ws.Renew(ctx, c, ttl), "a renewal is not an acquire")
	require.NoError(t, a.ws.Release(ctx, c))
	before := Snapshot(t, s, id)
	_, err = a.ws.Claim(ctx, id, "h1", ttl)
	require.ErrorIs(t, err, core.ErrHolderReused, "a claim by a holder that released the thread")
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	require.Equal(t, before, Snapshot(t, s, id), "a refused claim changed storage")

	_, err = a.ws.Claim(ctx, id, "h2", ttl)
	require.NoError(t, err)
	b.clock.Advance(ttl)
	_, err = b.ws.Claim(ctx, id, "h3", ttl)
	require.NoError(t, err)
	a.clock.Advance(3 * ttl)
	_, err = a.ws.Claim(ctx, id, "h2", ttl)
	require.ErrorIs(t, err, core.ErrHolderReused, "a claim by a holder whose lease lapsed and was taken")

	err = s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return tx.PutLease(ctx, core.Lease{Key: string(id), Holder: "h1", ExpiresAt: epoch.Add(ttl)})
	})
	require.ErrorIs(t, err, core.ErrHolderReused, "a raw PutLease for a holder that held the lease")

	// Holders are per thread: the same name on another thread is fresh.
	other := core.ThreadID(string(id) + "-other")
	require.NoError(t, a.ws.CreateThread(ctx, other))
	_, err = a.ws.Claim(ctx, other, "h1", ttl)
	require.NoError(t, err)
}

// ReuseHolder plays, through the public API alone, what a caller that
// reuses a holder across claims does: process a claims the thread as
// "h" and plans a run for message 1, then stalls; b takes the thread over
// after the TTL and starts that run; a, once b's lease has lapsed too,
// claims again as "h" and then finishes the start its first round
// planned. Storage that enforces holder freshness refuses a's second
// claim: ReuseHolder returns that error. Storage that does not lets the
// stale start pass the fence: ReuseHolder returns the thread, in which
// message 1 was consumed twice and two runs are active.
func ReuseHolder(ctx context.Context, s core.Storage) (*core.Thread, error) {
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
	if _, err := b.ws.RunStart(ctx, cb, p.Message); err != nil {
		return nil, err
	}
	a.clock.Advance(3 * ttl)
	if _, err := a.ws.Claim(ctx, id, "h", ttl); err != nil {
		return nil, err
	}
	if _, err := a.ws.RunStart(ctx, ca, p.Message); err != nil {
		return nil, fmt.Errorf("storetest: the stale start was refused after all: %w", err)
	}
	return a.ws.Thread(ctx, id)
}

// CheckReuseHolderMutant requires that s, a storage with holder freshness
// switched off, lets ReuseHolder consume a message twice with two runs
// active: the mutant the HolderReused case exists to catch.
func CheckReuseHolderMutant(t *testing.T, s core.Storage) {
	t.Helper()
	th, err := ReuseHolder(context.Background(), s)
	require.NoError(t, err, "without freshness the reused holder's claim must pass")
	require.Equal(t, 2, th.Consumed()[1], "message 1 consumed twice")
	require.Len(t, th.ActiveRuns(), 2, "two runs active")
}

func testReuseHolderRefused(t *testing.T, s core.Storage) {
	_, err := ReuseHolder(context.Background(), s)
	require.ErrorIs(t, err, core.ErrHolderReused)
}
