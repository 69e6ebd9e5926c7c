package tracecheck

import (
	"strings"
	"testing"

	"github.com/threadclaim/threadclaim/core"
)

// No trace found breaks SteeringException alone while the checker's
// guards hold: with RunStart unfenced, a stale start breaks I3 (or I1)
// first, and the cfg ThreadClaimLapseSteerStartUnfenced, which checks
// SteeringException alone, reaches it only after that; with the other
// fences off nothing moves the cursor under a run waiting for its
// record. So its evaluation is tested here, on the checker's state after
// the fixtures' lines, each conjunct broken by hand.
func TestSteeringExceptionEvaluated(t *testing.T) {
	follow := func(t *testing.T, file string, upTo int) *threadState {
		t.Helper()
		lines, err := ReadFile("testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		c := NewChecker()
		for i := range lines[:upTo] {
			if err := c.Step(i+1, &lines[i]); err != nil {
				t.Fatal(err)
			}
		}
		return c.list[0]
	}
	// ok-steer-exception after line 9 (SteerRefused): m2 given once, not
	// consumed, its pair <<1, 2>> kept with run 1 abandoned.
	th := follow(t, "ok-steer-exception.ndjson", 9)
	if !th.steeringException() || th.given[2] != 1 || th.consumed[2] != 0 || th.steeredOf[2] != 1 || len(th.steered) != 0 {
		t.Fatalf("after the refused record: exception %v, given %v, consumed %v, steeredOf %v, live pairs %v",
			th.steeringException(), th.given, th.consumed, th.steeredOf, th.steered)
	}
	// All of it: given twice, consumed once.
	th = follow(t, "ok-steer-exception.ndjson", 13)
	if !th.steeringException() || th.given[2] != 2 || th.consumed[2] != 1 || th.misgiven != 0 {
		t.Fatalf("at the end: exception %v, given %v, consumed %v", th.steeringException(), th.given, th.consumed)
	}
	// A give no consumption and no pair explains (the first conjunct).
	th.give(2)
	if th.steeringException() || th.misgiven != 1 {
		t.Errorf("a give of m2 too many: exception %v, misgiven %d", th.steeringException(), th.misgiven)
	}
	if d := th.invariantDetail(); !strings.Contains(d, "m2 given 3 times, consumed 1") {
		t.Errorf("detail %q", d)
	}
	// ok-steer-record after line 6 (Steer): run 1 waits to record m2.
	th = follow(t, "ok-steer-record.ndjson", 6)
	if !th.steeringException() || len(th.steered) != 1 || th.steered[0] != (steerPair{1, 2}) {
		t.Fatalf("after Steer: exception %v, pairs %v", th.steeringException(), th.steered)
	}
	// The cursor moves past the steering while the run waits (the second
	// conjunct: an active run's pair is for taken + 1).
	th.taken = 2
	if th.steeringException() {
		t.Error("an active run's steering m2 with taken 2: the exception holds")
	}
	th.taken = 1
	// The run ends with its steering unrecorded (never: RunEnd needs pc
	// "running").
	th.runs[0].state = runEnded
	if th.steeringException() {
		t.Error("an ended run's unrecorded steering: the exception holds")
	}
	th.runs[0].state = runActive
	// The checker reports it with the others, by the spec's name.
	th.taken = 2
	v := (&Checker{}).invariants(th, false)
	if v == nil || v.Rule != core.InvSteeringException {
		t.Errorf("invariants: %v", v)
	}
}
