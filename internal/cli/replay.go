package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/internal/sim/shrink"
)

const replayUsage = `usage: tracecheck replay [flags] FILE

Replays a seeded execution from its operation log (written by
'tracecheck run -seed N -ops-out FILE', or the *.ops.ndjson files run
writes beside a failure and its shrunk story) on the in-memory storage:
the same operations give the same trace and the same verdict. It checks
the invariants in storage after every operation and the trace with the Go
trace checker, prints the verdict and, for a failure, its story (the
failing thread's lines up to the failure). Exits 0 when every check
passes, 1 when one fails, 2 for a malformed log or bad usage (-trace-out
a directory, or in a directory that is not there), 4 when -trace-out
could not be written.

Flags:
`

// replayFigures is replay's summary for -json.
type replayFigures struct {
	Log       string   `json:"log"`
	Ops       int      `json:"ops"`
	Lines     int      `json:"lines"`
	Failures  []string `json:"failures"`
	Invariant string   `json:"invariant,omitempty"`
	Rejected  string   `json:"rejected,omitempty"`
	TraceOut  string   `json:"trace_out,omitempty"`
}

func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	traceOut := fs.String("trace-out", "", "write the replayed trace (ndjson) to this file")
	quiet := fs.Bool("q", false, "print the verdict only, not the failure's story")
	jsonOut := jsonFlag(fs)
	if err := parse(fs, args, stdout, stderr, replayUsage); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"want exactly one operation log"}
	}
	path := fs.Arg(0)
	if err := checkNotInput("-trace-out", *traceOut, path); err != nil {
		return err
	}
	if err := checkOutFile("-trace-out", *traceOut); err != nil {
		return err
	}
	if *jsonOut {
		// stdout carries the JSON object alone.
		fig, err := replay(ctx, path, *traceOut, true, io.Discard)
		return writeJSON(stdout, "replay", err, fig)
	}
	_, err := replay(ctx, path, *traceOut, *quiet, stdout)
	return err
}

func replay(ctx context.Context, path, traceOut string, quiet bool, out io.Writer) (replayFigures, error) {
	fig := replayFigures{Log: path}
	l, err := readLogFile(path)
	if err != nil {
		return fig, err
	}
	e, err := shrink.Execute(ctx, l.Config())
	if errors.Is(err, sim.ErrBadOp) {
		return fig, usageError{fmt.Sprintf("%s: %v", path, err)}
	}
	if err != nil {
		return fig, err
	}
	fig.Ops, fig.Lines = len(l.Ops), len(e.Lines)
	fails := e.Failures()
	for _, f := range fails {
		fig.Failures = append(fig.Failures, f.String())
	}
	if e.Invariant != nil {
		fig.Invariant = e.Invariant.Error()
	}
	if e.Violation != nil {
		fig.Rejected = fmt.Sprintf("%s:%d: %s %s", e.Violation.File, e.Violation.Line, e.Violation.Action, e.Violation.Rule)
	}
	if traceOut != "" {
		if err := writeTraceFile(traceOut, e.Lines); err != nil {
			return fig, err
		}
		fig.TraceOut = traceOut
	}
	fmt.Fprintf(out, "%s: seed %d, %d operations, %d processes, %d threads, %d trace lines\n",
		path, l.Seed, len(l.Ops), l.Procs, l.Threads, len(e.Lines))
	if len(fails) == 0 {
		fmt.Fprintln(out, "every invariant held; the Go trace checker accepted the trace\nPASS")
		return fig, nil
	}
	if e.Invariant != nil {
		fmt.Fprintf(out, "invariant: %v\n", e.Invariant)
	}
	if e.Violation != nil {
		fmt.Fprintf(out, "trace: REJECTED at %s\n", fig.Rejected)
	}
	if !quiet {
		fmt.Fprintln(out)
		printStory(out, e.Story(fails[0]), path)
	}
	return fig, failure{exitFailed, fmt.Sprintf("FAIL: %s", fig.Failures)}
}

// readLogFile reads an operation log; a missing or malformed one is bad
// input (exit 2).
func readLogFile(path string) (sim.Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return sim.Log{}, usageError{err.Error()}
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return sim.Log{}, usageError{fmt.Sprintf("%s: a directory, not an operation log", path)}
	}
	l, err := sim.ReadLog(f, path)
	if err != nil {
		return sim.Log{}, usageError{err.Error()}
	}
	return l, nil
}
