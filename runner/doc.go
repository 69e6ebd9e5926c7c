// Package runner claims threads and turns their messages into runs of an
// agent, one claim ("a turn") at a time: claim the thread with a fresh
// holder, abandon the runs earlier claims left active, plan, start a run or
// answer a request (both fenced by the claim), run the agent, record the
// run's end (not fenced), go on while messages remain, release.
//
// A timer renews the claim every RenewEvery; a renewal that finds the claim
// gone cancels the running agent's context. Renewal is about liveness only:
// a claim can lapse under a live holder (a write in flight past ClaimTTL, a
// clock running ahead elsewhere), and what keeps a message from being
// consumed twice is the fence in core, checked inside each consuming
// write's transaction. A start the fence refuses consumed nothing; the
// run's handle returns core.ErrThreadBusy from Wait, the turn ends as a
// failed turn (OutcomeFenced), and the thread is the new holder's.
//
// Stopping is graceful: when Run's context ends, the running agent's
// context is cancelled, its run's end is recorded and the claim released
// (OutcomeStopped). Storage calls are not cut off by that context, since a
// write cut off in flight may or may not have committed; only a turn still
// going ShutdownGrace later is.
//
// A turn is a span ("threadclaim.turn"); the runner counts turns by
// outcome, fenced refusals by write, runs started, ended and abandoned, and
// records how long messages waited to be consumed.
package runner
