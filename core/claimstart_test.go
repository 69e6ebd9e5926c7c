package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// startingStore is the memory Store with transactions that write a run's
// start with the claim (core's leaseStartClaimer), as the PostgreSQL
// Store does: whenever the claim's plan is a run. lie, when set, changes
// the start it writes first, as a broken storage would.
type startingStore struct {
	core.Storage
	lie func(*core.Event)
}

func (s startingStore) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, startingTx{tx, s.lie})
	})
}

type startingTx struct {
	core.Transaction
	lie func(*core.Event)
}

func (tx startingTx) ClaimLeaseThenStart(ctx context.Context, id core.ThreadID, holder core.Holder, now, expires, at time.Time, plan func(*core.Thread) (core.Event, bool)) (*core.Thread, core.Lease, uint64, core.Event, error) {
	t, err := tx.Thread(ctx, id)
	if err != nil {
		return nil, core.Lease{}, 0, core.Event{}, err
	}
	l, err := tx.Lease(ctx, id)
	if err != nil || l.Holder == holder || l.Holder != "" && !l.Expired(now) {
		return t, l, 0, core.Event{}, err
	}
	v, err := tx.Bump(ctx, id)
	if err != nil {
		return nil, core.Lease{}, 0, core.Event{}, err
	}
	if err := tx.PutLease(ctx, core.Lease{Thread: id, Holder: holder, ExpiresAt: expires}); err != nil {
		return nil, core.Lease{}, 0, core.Event{}, err
	}
	if t, err = tx.Thread(ctx, id); err != nil {
		return nil, core.Lease{}, 0, core.Event{}, err
	}
	ev, ok := plan(t)
	if !ok {
		return t, l, v, core.Event{}, nil
	}
	if tx.lie != nil {
		tx.lie(&ev)
	}
	if ev.Version, err = tx.Bump(ctx, id); err != nil {
		return nil, core.Lease{}, 0, core.Event{}, err
	}
	if err := tx.Append(ctx, id, ev); err != nil {
		return nil, core.Lease{}, 0, core.Event{}, err
	}
	if err := tx.SaveTaken(ctx, id, ev.Message); err != nil {
		return nil, core.Lease{}, 0, core.Event{}, err
	}
	t, err = tx.Thread(ctx, id)
	return t, l, v, ev, err
}

// ClaimThenStart on a storage that writes the start with the claim: the
// run is started, its round is running (RunEnd follows), and the lines,
// Claim, Plan and RunStart, pass the trace checker. A start the plan did
// not make (a storage that lies about the run's holder, or about its
// prompt) is refused with ErrInconsistentLog, and nothing of the claim
// is kept. With the start fence off, nothing starts with the claim: the
// plan comes alone, and RunStart follows.
func TestClaimThenStartWithStorage(t *testing.T) {
	ctx := context.Background()
	clock := coretest.NewClock(epoch)
	rec := &tracecheck.Recorder{}
	mem := memory.New()
	s := startingStore{Storage: mem}
	w := core.NewWorkspace(s, clock, core.WithProcess("a"), core.WithTracer(rec))
	poster := core.NewWorkspace(mem, clock, core.WithProcess("poster"), core.WithTracer(rec))
	require.NoError(t, poster.CreateThread(ctx, "t"))
	for range 4 {
		_, err := poster.Post(ctx, "t", "m")
		require.NoError(t, err)
	}

	c, p, run, err := w.ClaimThenStart(ctx, "t", "h1", ttl)
	require.NoError(t, err)
	require.Equal(t, [3]any{core.PlanRun, core.Seq(1), core.RunID(1)}, [3]any{p.Kind, p.Message, run})
	got := rec.Lines()[len(rec.Lines())-3:]
	require.Equal(t, []core.Action{core.ActionClaim, core.ActionPlan, core.ActionRunStart}, []core.Action{got[0].Action, got[1].Action, got[2].Action})
	require.Equal(t, got[0].Tick+1, got[2].Tick, "the start one version past the claim")
	require.NoError(t, w.RunEnd(ctx, c, run, ""), "the round runs the started run")
	require.NoError(t, w.Release(ctx, c))

	for name, lie := range map[string]func(*core.Event){
		"holder": func(ev *core.Event) { ev.Holder = "someone-else" },
		"prompt": func(ev *core.Event) { ev.Message++ },
	} {
		liar := core.NewWorkspace(startingStore{Storage: mem, lie: lie}, clock, core.WithProcess("liar-"+name))
		before, err := poster.Thread(ctx, "t")
		require.NoError(t, err)
		_, _, _, err = liar.ClaimThenStart(ctx, "t", core.Holder("liar-"+name), ttl)
		require.ErrorIs(t, err, core.ErrInconsistentLog, "a start that lies about the %s", name)
		after, err := poster.Thread(ctx, "t")
		require.NoError(t, err)
		require.Equal(t, before.Version, after.Version, "%s: nothing of the claim kept", name)
	}

	off := core.NewWorkspace(s, clock, core.WithProcess("off"), core.WithTracer(rec), core.WithFencesForTesting(core.Fences{Reply: true, Abandon: true}))
	c, p, run, err = off.ClaimThenStart(ctx, "t", "h2", ttl)
	require.NoError(t, err)
	require.Zero(t, run, "a start with the claim, the start fence off")
	run, err = off.RunStart(ctx, c, p.Message)
	require.NoError(t, err)
	require.NoError(t, off.RunEnd(ctx, c, run, ""))
	require.NoError(t, off.Release(ctx, c))
	_, err = tracecheck.Check(rec.Lines())
	require.NoError(t, err)
}
