package conform

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/memory"
)

// The refusals conform asks: tests from the eleventh mutation pass (7 Dec
// 2026), each of which fails with the mutant its comment names, where no
// test failed before.

// With the abandon fence off, Go abandons for a claim that lost its lease:
// conform must ask that Abandon as a refusal (FenceAbandon => HasLease(p))
// and report it, besides the AbandonFenced edges it takes as Abandon.
// (The mutant: that refusal left out of the askable ones failed no test.)
func TestConformAsksFencedAbandon(t *testing.T) {
	g := small(t)
	rep, err := Run(runCtx(t, 5*time.Minute), g, Options{Unfenced: core.Fences{Abandon: true}, Keep: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.First {
		if strings.HasPrefix(d.Step, "Abandon(") && strings.Contains(d.Detail, "does not enable") {
			return
		}
	}
	t.Fatalf("no unfenced Abandon asked as a refusal (%d divergences)", rep.Divergences)
}

// fenceStolenUnknown is memory storage whose transactions report that
// every holder holds the lease, so a write fenced by the lease (an Abandon
// for a claim that lost it) is made; Update then answers such a write with
// ErrCommitUnknown, so the Go call returns an error though it wrote.
type fenceStolenUnknown struct{ core.Storage }

func (s fenceStolenUnknown) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	stole := false
	err := s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, stealTx{tx, &stole})
	})
	if stole && (err == nil || errors.Is(err, errRollback)) {
		return fmt.Errorf("%w: the write may have been made", core.ErrCommitUnknown)
	}
	return err
}

type stealTx struct {
	core.Transaction
	stole *bool
}

func (tx stealTx) HoldsLease(ctx context.Context, id core.ThreadID, h core.Holder) (bool, core.Lease, error) {
	held, l, err := tx.Transaction.HoldsLease(ctx, id, h)
	if err == nil && !held {
		*tx.stole = true
		return true, l, nil
	}
	return held, l, err
}

// A write the spec does not enable is a divergence when Go made it, even
// when the call returned an error: an Abandon for a claim that lost the
// lease, written and answered with ErrCommitUnknown, must be reported as
// made (the probe saw its transaction run), not taken for a refusal.
// (The mutant: a refusal judged by the call's error alone, the probe's
// seen flag dropped, failed no test.)
func TestConformRefusalThatWroteButErred(t *testing.T) {
	g := small(t)
	rep, err := Run(runCtx(t, 5*time.Minute), g, Options{
		NewStorage: func(context.Context) (core.Storage, error) { return fenceStolenUnknown{memory.New()}, nil },
		Keep:       1 << 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.First {
		if strings.HasPrefix(d.Step, "Abandon(") && strings.Contains(d.Detail, "does not enable") {
			return
		}
	}
	t.Fatalf("no fenced Abandon that wrote and erred reported as made (%d divergences): a refused call's write is not checked", rep.Divergences)
}
