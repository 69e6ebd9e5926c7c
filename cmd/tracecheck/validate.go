package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/threadclaim/threadclaim/tracecheck"
)

const validateUsage = `usage: tracecheck validate [flags] FILE...

Checks each trace file (ndjson, one spec action per line) against
spec/ThreadClaimLapse.tla with the Go trace checker, reading it as a
stream. Each thread's lines are checked in file order (the order rule:
run 'tracecheck sort' first on a file written by concurrent processes in
the order they traced). For a rejected trace it names the first line no
spec action explains, the action, the guard conjunct, invariant or field
that failed, why, and the spec's state there.

Every file is checked; the exit code is the worst outcome:
  0  every file accepted
  1  a file rejected by the checker
  2  bad input: a file that is malformed (printed as file:line: reason),
     empty, unreadable, or a directory; or bad usage

Flags:
`

func cmdValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	unfencedSpec := fs.Bool("unfenced-spec", false, "check against the spec with Fenced = FenceAbandon = FALSE")
	jsonOut := jsonFlag(fs)
	if err := parse(fs, args, stdout, stderr, validateUsage); err != nil {
		return err
	}
	var figs []validateFigure
	if *jsonOut {
		err := validate(fs, *unfencedSpec, io.Discard, io.Discard, &figs)
		return writeJSON(stdout, "validate", err, figs)
	}
	return validate(fs, *unfencedSpec, stdout, stderr, &figs)
}

// validateFigure is one file's verdict, for -json.
type validateFigure struct {
	File     string `json:"file"`
	Accepted bool   `json:"accepted"`
	Lines    int    `json:"lines"`
	Threads  int    `json:"threads"`
	Lapses   int    `json:"lapses_inferred"`
	Rejected string `json:"rejected,omitempty"` // the violation, or why the input is bad
}

func validate(fs *flag.FlagSet, unfencedSpec bool, stdout, stderr io.Writer, figs *[]validateFigure) error {
	if fs.NArg() == 0 {
		return usageError{"no trace file given"}
	}
	spec := tracecheck.Spec{Fenced: !unfencedSpec, FenceAbandon: !unfencedSpec}
	rejected, bad := 0, 0
	for _, path := range fs.Args() {
		st, err := tracecheck.CheckFile(path, tracecheck.WithSpec(spec))
		var v *tracecheck.Violation
		var le *tracecheck.LineError
		fig := validateFigure{File: path, Accepted: err == nil, Lines: st.Lines, Threads: st.Threads, Lapses: st.LapsesInferred}
		if err != nil {
			fig.Rejected = err.Error()
		}
		*figs = append(*figs, fig)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "%s: accepted (%d lines, %d threads, %d lapses inferred, %d under live holders; %d timed lines, %d early claims)\n",
				path, st.Lines, st.Threads, st.LapsesInferred, st.LiveLapses, st.TimedLines, st.EarlyClaims)
		case errors.As(err, &v):
			rejected++
			fmt.Fprintf(stdout, "%s: REJECTED\n  %v\n", path, err)
		case errors.As(err, &le):
			bad++
			fmt.Fprintf(stderr, "%v\n", le)
		default:
			bad++
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
		}
	}
	switch {
	case bad > 0:
		return failure{exitUsage, fmt.Sprintf("%d of %d files are not valid trace input", bad, fs.NArg())}
	case rejected > 0:
		return failure{exitFailed, fmt.Sprintf("%d of %d traces rejected", rejected, fs.NArg())}
	}
	return nil
}
