package tracecheck

import (
	"errors"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/threadclaim/threadclaim/core"
)

// TestLinearizableUnknownIsNotPass guards that a timeout is its own
// outcome, never a pass: against a model whose every step outlasts the
// timeout, the check cannot finish, and its result is Unknown with
// ErrLinearizabilityUnknown (deterministically: the search needs several
// steps, each 50 times the timeout).
func TestLinearizableUnknownIsNotPass(t *testing.T) {
	slow := LeaseModel()
	step := slow.Step
	slow.Step = func(state, input, output any) (bool, any) {
		time.Sleep(50 * time.Millisecond)
		return step(state, input, output)
	}
	in := func(k LinKind, h string) LinInput {
		return LinInput{Kind: k, Thread: "t1", Holder: core.Holder(h), TTL: time.Second}
	}
	ops := []porcupine.Operation{
		{ClientId: 0, Input: in(LinClaim, "a"), Call: 0, Output: LinOutput{Status: LinOK}, Return: 10},
		{ClientId: 1, Input: in(LinClaim, "b"), Call: 1, Output: LinOutput{Status: LinBusy}, Return: 11},
		{ClientId: 2, Input: in(LinRenew, "a"), Call: 2, Output: LinOutput{Status: LinOK}, Return: 12},
	}
	res, err := checkLinearizable(slow, ops, time.Millisecond, "")
	if res != porcupine.Unknown || !errors.Is(err, ErrLinearizabilityUnknown) {
		t.Fatalf("a check that cannot finish in time: got %v, %v; want Unknown and ErrLinearizabilityUnknown", res, err)
	}
	// The same history with time enough is linearizable: the Unknown above
	// is the timeout's, not the history's.
	if res, err := checkLinearizable(LeaseModel(), ops, 0, ""); res != porcupine.Ok {
		t.Fatalf("with no timeout: %v, %v", res, err)
	}
}
