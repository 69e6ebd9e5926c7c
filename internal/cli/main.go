// Package cli is the tracecheck command: its subcommands, their flags,
// usage and exit codes. cmd/tracecheck is a few lines around Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Exit codes.
const (
	exitOK           = 0
	exitFailed       = 1
	exitUsage        = 2
	exitInconclusive = 3
	exitCouldNotRun  = 4
	exitSurvived     = 5
)

// usageError is bad usage: exit 2 with the subcommand's usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// failure is a check that failed: exit 1 (or code) with its message.
type failure struct {
	code int
	msg  string
}

func (e failure) Error() string { return e.msg }

const mainUsage = `tracecheck checks the thread claim's real code against its TLA+ specification.

Usage:
  tracecheck run [flags]          run seeded and concurrent executions and check them
  tracecheck validate FILE...     check trace files (ndjson) against the specification
  tracecheck replay FILE          replay a seeded execution from its operation log (run -ops-out)
  tracecheck export -itf OUT FILE a trace or TLC counterexample as the spec's states in ITF (Apalache/Quint)
  tracecheck show [flags] FILE    print one trace as a timeline, lanes per process (-html: the explorer)
  tracecheck sort [flags] FILE    put a trace's lines in trace order (the order rule)
  tracecheck mutate [flags] FILE... write well-formed mutants of traces, with the Go checker's verdicts
  tracecheck fleet [flags]        a soak on PostgreSQL: runner processes under a nemesis, checked
  tracecheck worker [flags]       one runner process of a fleet
  tracecheck model [flags] [CFG]  enumerate a cfg's reachable states with the Go model of the spec
  tracecheck conform [flags]      drive the real code along every edge of a cfg's state graph
  tracecheck tlc [flags] [MODE]   run TLC on the models, the trace fixtures and generated traces
  tracecheck version [flags]      the module's version, TLC's version line and jar digest, the spec's digest (also -version)

Run 'tracecheck COMMAND -h' for a command's flags.

Every command prints its verdict (PASS or FAIL, what failed and its story)
on stdout; stderr carries usage errors and what is not a verdict (bad
input, could not run), and progress.

Exit codes: 0 every check passed; 1 a check failed (with -unfenced: the
mutant was caught, as it must be); 2 bad usage or bad input (malformed,
unreadable, empty); 3 inconclusive (porcupine timed out); 4 could not run
(storage unreachable, a deadline passed, stdout not writable); 5 with -unfenced: the mutant
survived, no check caught it.
`

// Main runs the tracecheck command with args (without the program's
// name) and returns its exit code. A command whose checks passed but
// whose standard output could not be written (a full disk, a closed
// device) did not deliver its verdict: that is could not run (exit 4),
// said on stderr, where it exited 0.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	out := &checkedWriter{w: stdout}
	code := command(ctx, args, out, stderr)
	if out.err != nil && code == exitOK {
		fmt.Fprintf(stderr, "tracecheck: writing standard output: %v\n", out.err)
		return exitCouldNotRun
	}
	return code
}

// checkedWriter keeps the first error a write to w returned.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// command runs the command args name and returns its exit code.
func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, mainUsage)
		return exitOK
	case "run":
		err = cmdRun(ctx, args[1:], stdout, stderr)
	case "validate":
		err = cmdValidate(ctx, args[1:], stdout, stderr)
	case "replay":
		err = cmdReplay(ctx, args[1:], stdout, stderr)
	case "export":
		err = cmdExport(args[1:], stdout, stderr)
	case "show":
		err = cmdShow(args[1:], stdout, stderr)
	case "sort":
		err = cmdSort(args[1:], stdout, stderr)
	case "mutate":
		err = cmdMutate(args[1:], stdout, stderr)
	case "fleet":
		err = cmdFleet(ctx, args[1:], stdout, stderr)
	case "worker":
		err = cmdWorker(ctx, args[1:], stdout, stderr)
	case "model":
		err = cmdModel(ctx, args[1:], stdout, stderr)
	case "conform":
		err = cmdConform(ctx, args[1:], stdout, stderr)
	case "tlc":
		err = cmdTLC(ctx, args[1:], stdout, stderr)
	case "version", "-version", "--version":
		err = cmdVersion(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "tracecheck: unknown command %q\n\n%s", args[0], mainUsage)
		return exitUsage
	}
	var ue usageError
	var f failure
	var js jsonTaken
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "tracecheck %s: %s\n", args[0], ue.msg)
		return exitUsage
	case errors.As(err, &f):
		// stdout carries the verdict, PASS or FAIL, and the story; stderr
		// what is not one: bad input (2), could not run (4), and a
		// verdict already in the JSON object stdout carries.
		w := stdout
		if f.code == exitUsage || f.code == exitCouldNotRun || errors.As(err, &js) {
			w = stderr
		}
		fmt.Fprintln(w, f.msg)
		return f.code
	default:
		// Not a check's verdict nor bad usage: the command could not run.
		fmt.Fprintf(stderr, "tracecheck %s: %v\n", args[0], err)
		return exitCouldNotRun
	}
}
