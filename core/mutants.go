package core

import "context"

// Mutants are deliberate defects a test can switch on, to show that the
// checks catch them. Every field is false in a Workspace unless a test sets
// it with WithMutantsForTesting; no deployment setting reaches it.
type Mutants struct {
	// FenceInOwnTransaction checks a fenced write's claim in a transaction
	// of its own, committed before the write's: between the two, another
	// holder can take the lease, so the fence no longer excludes it.
	FenceInOwnTransaction bool

	// RoundOverAccepted lets a claim whose round has ended go on as if
	// it were claimed: a deferred Release after a refused start, say,
	// reaches storage and is traced.
	RoundOverAccepted bool

	// PlanNotChecked lets RunStart and Reply write a message or request
	// other than the round's current plan.
	PlanNotChecked bool
}

// WithMutantsForTesting switches mutants on. It exists for mutation tests;
// no deployment setting reaches it.
func WithMutantsForTesting(m Mutants) Option { return func(w *Workspace) { w.mutants = m } }

// fenceFirst is the FenceInOwnTransaction mutant: when it is on and the
// fence is, it checks the claim in a transaction of its own (tracing and
// returning the refusal as the fence does) and returns false, so that the
// write that follows does not check again. Otherwise it returns on.
// It also returns the refusal's line, and whether it was traced, for the
// claim's round.
func (w *Workspace) fenceFirst(ctx context.Context, on bool, c Claim, refusal TraceEvent) (bool, *TraceEvent, bool, error) {
	if !on || !w.mutants.FenceInOwnTransaction {
		return on, nil, false, nil
	}
	line, traced, err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		_, err = w.fence(ctx, tx, true, c, t, refusal, line)
		return err
	})
	return false, line, traced, err
}
