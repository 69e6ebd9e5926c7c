// Package tlc runs the TLA+ model checker TLC as a child process and reads
// what it reports.
//
// TLC is run with -tool, which frames each of its messages between
// "@!@!@STARTMSG code:severity @!@!@" and "@!@!@ENDMSG code @!@!@". The
// parser goes by those codes (tlc2.output.EC), not by TLC's prose, which
// changes between releases: a Result says whether the check passed, which
// invariant or property was violated, or that TLC found a deadlock, a false
// assumption, a parse or semantic error, or another error; it carries the
// state counts, the search depth, the counterexample's states and TLC's
// version line. Prose is read only inside a message whose code says what it
// holds (the violated property's name, the counts).
//
// Find locates java and the jars (see Find for the order, and
// spec/README.md, "Pinned tools", for the local directory); Env.Run runs
// one Job with its own deadline and kills the JVM's process group when the
// context ends. Neither keeps any state between calls.
//
// Env.ValidateBatch runs the trace spec (tla/ThreadClaimLapseTrace.tla) on
// many traces in one JVM and returns a Verdict per trace; CheckThreads
// does it for the threads of trace files (SplitThreads) and maps each
// rejection to its line in the file. A batch runs with ShortJavaOpts
// unless told otherwise: it is seconds long, and the JVM's start and JIT
// are most of its cost. CheckFixtures, the spec mutants (MutantRun) and
// the differential (Differential) are built on it.
//
// Env.CompareGraph holds TLC's state graph of the spec to the Go model's
// (package specmodel): it runs TLC with -dump on a cfg and compares, state
// for state and edge for edge, TLC's dot graph (CompareDot) or, for a cfg
// with a violation, its state dump (CompareDump) and its outcome
// (CompareOutcome). This package is the only one that runs java; the
// model stays pure.
package tlc
