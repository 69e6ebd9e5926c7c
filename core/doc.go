// Package core is the domain of the thread claim: threads of messages, the
// taken cursor, runs and their requests, the events that record them, the
// refusals, and the Workspace that writes them through a Storage port. It
// imports only the standard library.
//
// A runner process holds a thread with a claim: a lease in storage whose
// holder is a value made fresh for that one claim. The claim alone is not
// enough to keep a message from being consumed twice, because a claim can
// lapse while its holder is alive (a write still in flight past the lease's
// time-to-live, or another process whose clock runs ahead). So every write
// that consumes a message (a run's start and a reply's answer) and the
// abandonment of an earlier holder's run check, inside their own
// transaction, that their claim's holder still has the lease. The fence is
// the holder, not the time: a lease that expired and that nobody took
// still fences its holder's writes, and no clock is read to decide it.
//
// The Workspace's methods carry the names of the specification's actions
// (spec/ThreadClaimLapse.tla): Claim, Renew, Release, Abandon, Plan,
// RunStart, Reply, Ask, RunEnd, Steer, SteerRecord, Crash, Post. A fenced
// write that is refused returns an error for which errors.Is(err,
// ErrThreadBusy) holds, writes nothing, and is traced as StartFenced,
// ReplyFenced or AbandonFenced; a refused start's transaction appends only
// a notice to the thread's log, which changes none of its state (a
// RunRefused event).
// ClaimThenPlan and RunEndThenStart are Claim or RunEnd and the Plan after
// it made in one transaction, traced as the two actions with nothing
// between them (one round trip to storage fewer); RunEndThenStart can add
// the planned run's RunStart to the transaction, one write for the two, or,
// when nothing is left to plan, the Release. ClaimThenStart is
// ClaimThenPlan with the planned run's RunStart in the claim's own
// statements, when storage can write it there (the PostgreSQL Store does,
// from its cache of the thread or from the log it reads with the claim).
// ActionTable lists every
// action with what it reads, writes and refuses: the trace checkers, the
// trace viewer, the runner's steps and the simulations read it from there.
//
// RunEnd records a run's output (its answer to the person) with its end,
// as a RunOutput event: no message, so never a prompt. Follow delivers a
// thread's events from a Position, on the storage's EventWatcher when it
// is one; a follower that resumes from the last position it handled
// misses nothing and sees nothing twice.
//
// A claim knows its round: the Workspace that made it follows the round as
// the specification follows pc[p] (claimed, planned, running) and refuses,
// with ErrOutOfOrder or ErrRoundOver and nothing written or traced, every
// call the specification does not allow next: a RunStart or Reply other
// than the current plan, a Release during a run, any call after a refusal,
// Release or Crash ended the round, a claim from another Workspace or
// built by hand, a second Claim on a thread whose round is open, a holder
// it claimed with before, a call made while another call of the round is
// in flight (a claim's calls go one at a time; only Renew runs beside
// another, and Crash waits for them), a call begun while Crash goes on.
// So any sequence of calls, from one
// goroutine or several, is either refused or traced as a behaviour of the
// specification. Crash traces without needing storage to answer.
//
// Storage is the port: a transaction reads and appends a thread's events,
// saves its cursor, and answers HoldsLease, which stays true until the
// transaction ends, so that another holder's acquire waits for a fenced
// write. store/memory and store/postgres implement it, and
// store/storetest holds every implementation to it. Time comes from an
// injected Clock: SystemClock in a deployment, core/coretest's manual
// clock in tests.
//
// When a Tracer is set, every action is written as one TraceEvent whose
// field names are the specification's (package tracecheck reads and
// checks them); with no Tracer the cost is one nil check per write.
package core
