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

	// DoubtIgnored lets a round go on after a write whose commit outcome
	// is unknown (ErrCommitUnknown) as if the write had not been made:
	// a retry of it reaches storage, where the round would take only
	// Crash. A caller that retries such a write (the runner's
	// RetryCommitUnknownForTesting) is the defect this protection
	// hides: the simulations switch both on to show that they catch it.
	DoubtIgnored bool

	// OutputOfAbandonedRun records a run's output even when its end is
	// refused because a later claim abandoned the run: the output is
	// written (and traced as the RunEnd that wrote it) as if the end had
	// been recorded. The person would see an abandoned run's answer.
	OutputOfAbandonedRun bool

	// SteerRecordAfterAbandon records steering whose run a later claim
	// abandoned: instead of SteerRefused, the taken cursor moves to the
	// message (no event: storage refuses one for an abandoned run), traced
	// as the SteerRecord that wrote it. The message the next holder
	// consumes is consumed again.
	SteerRecordAfterAbandon bool

	// SteerRecordKeepsCursor records steering without moving the taken
	// cursor: the message stays the oldest unconsumed one and is given
	// and consumed again.
	SteerRecordKeepsCursor bool

	// SteerConsumed gives as steering the last consumed message (the
	// cursor's), not the next unconsumed one, once a message is consumed.
	SteerConsumed bool

	// SteerInactiveRun gives steering to a run that is no longer active
	// (abandoned by a later claim, or ended).
	SteerInactiveRun bool
}

// WithMutantsForTesting switches mutants on. It exists for mutation tests;
// no deployment setting reaches it.
func WithMutantsForTesting(m Mutants) Option { return func(w *Workspace) { w.mutants = m } }
