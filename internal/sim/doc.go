// Package sim runs the real code — runner.Turn and runner.Runner over
// core.Workspace over a real core.Storage — under schedules meant to break
// the claim's fences, and checks the invariants in storage as it goes. The
// traces and histories its executions leave are what package tracecheck
// checks against the specification.
//
// Seeded is a deterministic execution: a seeded scheduler (Config.Seed)
// interleaves the steps of several runner processes, each with its own
// manual clock (core/coretest), with posts, renewals, time passing on
// every clock, one clock jumping ahead (skew), and crashes. A process the scheduler leaves alone
// is stalled between its read and its write while leases lapse. The same
// seed replays the same execution. After every operation Check reads
// storage and checks I1_ConsumedAtMostOnce, I3_OneActiveRun and
// NoLiveAbandon; Quiesce then stops the faults, lets every clock pass the
// TTL and runs the processes fairly until every message is consumed
// (liveness). The rapid state-machine test drives the same execution with
// operations rapid draws and shrinks.
//
// A directed Seeded execution (Config.Walks) replaces the seeded draw with
// walks of a cfg's state graph that a Planner plans to visit what earlier
// walks left unvisited, each the path from Init that visits the most of
// it (model-checking-guided testing). For each spec step the scheduler picks the operation that
// makes the real runner take it, and follows the thread's trace; a walk
// whose trace leaves its plan counts as diverged (Stats.Diverged).
// Coverage follows traces through the graph and counts the states and
// edges they visit, with the lapses an execution saw (CoverageLines).
//
// A Tree drives the runner along every edge of a cfg's graph it can take
// without walking to each from Init: a depth-first pass over a spanning
// tree, in which each state's execution is forked (storage, clocks,
// workspaces, runners and turns copied: memory.Store.Clone,
// core.Workspace.ForkForTesting, runner.Turn.ForkForTesting) and each fork
// takes one of the state's edges, its trace checked as it grows by a clone
// of the checker of the trace before (tracecheck.Checker.Clone). A fork
// that fails is kept as its operation log, which replays it from Init.
//
// RunConcurrent is a concurrent execution: runner.Runner goroutines in real
// time with short TTLs, skewed clocks (SkewedClock), agents that stall past
// the TTL (StallingAgent), writes held in flight before they reach
// storage, and a poster. Its lines carry call and return times for
// porcupine. The fleet's worker processes (tracecheck worker) use the same
// clock and agent.
package sim
