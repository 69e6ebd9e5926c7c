package runner

// mutant is a deliberate defect of a turn, switched on by a test to show
// that the checks catch it.
type mutant struct {
	// retryCommitUnknown retries a consuming write whose commit outcome is
	// unknown, under the same holder: if the first attempt committed, the
	// retry consumes another message or the same one twice.
	retryCommitUnknown bool
}

// RetryCommitUnknownForTesting makes the turn retry a RunStart or Reply
// that returned core.ErrCommitUnknown, once, under the same claim: the
// defect the runner must not have (it gives such a round up). It exists for
// mutation tests of the simulations; no deployment setting reaches it.
func (t *Turn) RetryCommitUnknownForTesting() { t.mutant.retryCommitUnknown = true }
