// Package storetest is the conformance suite every core.Storage passes:
// the same tests run against the in-memory storage and PostgreSQL, and a
// storage written outside this module runs them from one test with Run
// and a Factory that makes a fresh, empty storage for each test. The
// tests run in parallel, each on its own storage.
//
// The cases cover what core.Storage promises: claims, renewals and
// releases, with expiry read by the claimant's clock and clocks skewed;
// the fence (HoldsLease true until the transaction ends, so that another
// holder's acquire waits for a fenced write); refused and rolled-back
// writes leaving storage unchanged, each kind of write undone alone, and
// so those of a function that panics; a transaction kept past its Update
// refused;
// Update's context given to its function, and an ended one writing
// nothing; results handed out as copies; fresh holders; concurrent claims
// with one winner; runs, replies, abandons and the threads a poll lists
// as pending, through a real core.Workspace. A storage that offers more
// than core.Storage is checked for it: read-only transactions
// (core.Viewer), the trace lines its transactions keep (core.TraceLog,
// read back through traceReader), and a watch of events
// (core.EventWatcher) that ends with its context.
//
// Its pieces serve a storage's own tests too: Hooked pauses a real
// transaction at a point (after HoldsLease, after Append) for a test to
// act while it is there; CheckAcquireWaits is the fence's central
// property as a check that returns what it found, so that a mutation
// test can require it to fail; CheckReuseHolderMutant plays a holder
// reused across claims; BenchmarkConsumingWrite is the benchmark of the
// consuming write every storage runs, beside its own baselines; Follow
// follows a thread's events for a test to read. Every wait is bounded (30
// seconds; Follow's, 10) and fails naming what it waited for.
package storetest
