// Package coretest is what tests of code built on core need: Clock, a
// core.Clock that moves only when told to (Advance), with timers (After)
// that fire when it passes their time.
//
// Give each simulated process a clock of its own, and processes can
// disagree about the time (clock skew), and a lease can lapse under a
// holder whose renewal timer has not fired: the cases the fence exists
// for, played without sleeping. Waiters tells a test how many timers are
// pending, so it can advance the clock once a runner is waiting on it.
package coretest
