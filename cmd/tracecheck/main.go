// Command tracecheck runs the thread claim's real code under randomised
// schedules and checks every execution against the specification: the
// invariants in storage, every trace line against spec/ThreadClaimLapse.tla
// (the Go trace checker), and the concurrent executions' histories for
// linearizability (porcupine).
//
// Usage:
//
//	tracecheck run [flags]          run seeded and concurrent executions and check them
//	tracecheck validate FILE...     check trace files against the specification
//	tracecheck replay FILE          replay a seeded execution from its operation log
//	tracecheck export -itf OUT FILE write a trace's states in the Informal Trace Format
//	tracecheck show [flags] FILE    print one trace as a timeline, lanes per process
//	tracecheck sort [flags] FILE    put a trace's lines in trace order (the order rule)
//	tracecheck mutate [flags] FILE... write well-formed mutants of traces, with the Go checker's verdicts
//	tracecheck fleet [flags]        a soak on PostgreSQL: runner processes under a nemesis
//	tracecheck worker [flags]       one runner process of a fleet
//	tracecheck model [flags] [CFG]  enumerate a cfg's reachable states with the Go model of the spec
//	tracecheck conform [flags]      drive the real code along every edge of a cfg's state graph
//	tracecheck tlc [flags] [MODE]   run TLC on the models, the trace fixtures and generated traces
//
// Exit codes: 0 every check passed; 1 a check failed (a broken invariant,
// a trace no spec action explains, a history that is not linearizable;
// with -unfenced, the mutant was caught, as it must be); 2 bad usage or
// bad input (malformed, unreadable or empty); 3 inconclusive (porcupine
// timed out); 4 could not run (storage unreachable, a deadline passed); 5
// with -unfenced, the mutant survived: no check caught it.
package main

import (
	"context"
	"os"

	"github.com/threadclaim/threadclaim/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
