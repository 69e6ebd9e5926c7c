// Package specmodel is a Go model of spec/ThreadClaimLapse.tla: its
// constants (read from a TLC cfg file), its state (every variable, with a
// canonical byte encoding that two states share exactly when TLC would
// call them equal), each action of Next as a method named as in the spec
// that says whether it is enabled in a state and gives the successor, or
// else names the first conjunct of its definition that is false there, in
// the spec's words ("Fenced => HasLease(p)"), and the invariants TypeOK,
// I1_ConsumedAtMostOnce, I3_OneActiveRun, NoLiveAbandon,
// SteeringException and GivenAtMostOnce (over the ghosts given and
// steered).
//
// Explore enumerates the reachable states breadth first, as TLC does,
// checking the cfg's invariants in every state found and stopping at the
// first violation with a shortest path to it. For every cfg in spec/ it
// finds the same number of distinct states as TLC (and the same number
// generated, and the same depth), and for the unfenced cfgs the same
// violated invariant at the same depth.
//
// The model is a second reading of the spec, kept as literal as the
// spec's text: each guard's conjuncts are tested in the order the spec
// writes them. It serves three checks: that its state graph is TLC's,
// every state and every transition (package tlc runs TLC and compares:
// Env.CompareGraph), that the Go trace checker accepts exactly the steps
// the spec enables (tracecheck's cross-check test), and that the real
// code can perform every edge of the state graph and no other (package
// conform).
//
// The model is pure: it reads cfg files and nothing else, and runs no
// process. ParseState reads a state as TLC prints it (and State.TLA
// writes it), so that package tlc can map TLC's dumps onto the model's
// states.
//
// Of the cfg's PROPERTIES it checks the action property NoLiveTakeover on
// every transition; it does not check liveness (EveryPostConsumed): the
// liveness cfg's reachable states are those of its safety part, which is
// what the model enumerates.
//
// TraceLine and TraceLines render a step, or a path, as the trace line the
// Go code writes (tracecheck/doc.go's format), so that a path of the graph
// can be fed to a trace checker.
//
// Its benchmarks and figures, beside TLC's: BENCH.md in this directory.
package specmodel
