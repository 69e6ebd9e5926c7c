package core

// Mutants are deliberate defects a test can switch on, to show that the
// checks catch them. Every field is false in a Workspace unless a test sets
// it with WithMutantsForTesting; no deployment setting reaches it.
type Mutants struct {
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
