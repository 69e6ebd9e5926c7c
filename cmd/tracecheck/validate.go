package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/threadclaim/threadclaim/tracecheck"
)

const validateUsage = `usage: tracecheck validate [flags] FILE...

Checks each trace file (ndjson, one spec action per line, as the Go code
writes it) against spec/ThreadClaimLapse.tla with the Go trace checker. For
a rejected trace it names the first line no spec action explains, the
action tried, the guard or invariant that failed, and the state there.
Exits 0 when every file is accepted, 1 when one is rejected or malformed,
2 when a file cannot be read.

Flags:
`

func cmdValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	unfencedSpec := fs.Bool("unfenced-spec", false, "check against the spec with Fenced = FenceAbandon = FALSE")
	jsonOut := jsonFlag(fs)
	if err := parse(fs, args, stdout, stderr, validateUsage); err != nil {
		return err
	}
	if *jsonOut {
		var figs []validateFigure
		err := validate(fs, *unfencedSpec, io.Discard, &figs)
		return writeJSON(stdout, "validate", err, figs)
	}
	return validate(fs, *unfencedSpec, stdout, nil)
}

// validateFigure is one file's verdict, for -json.
type validateFigure struct {
	File     string `json:"file"`
	Accepted bool   `json:"accepted"`
	Lines    int    `json:"lines"`
	Threads  int    `json:"threads"`
	Lapses   int    `json:"lapses_inferred"`
	Rejected string `json:"rejected,omitempty"`
}

func validate(fs *flag.FlagSet, unfencedSpec bool, stdout io.Writer, figs *[]validateFigure) error {
	if fs.NArg() == 0 {
		return usageError{"no trace file given"}
	}
	spec := tracecheck.Spec{Fenced: !unfencedSpec, FenceAbandon: !unfencedSpec}
	rejected := 0
	for _, path := range fs.Args() {
		if _, err := os.Stat(path); err != nil {
			return usageError{err.Error()}
		}
		st, err := tracecheck.CheckFile(path, tracecheck.WithSpec(spec))
		var v *tracecheck.Violation
		var le *tracecheck.LineError
		if figs != nil && (err == nil || errors.As(err, &v) || errors.As(err, &le)) {
			fig := validateFigure{File: path, Accepted: err == nil, Lines: st.Lines, Threads: st.Threads, Lapses: st.LapsesInferred}
			if err != nil {
				fig.Rejected = err.Error()
			}
			*figs = append(*figs, fig)
		}
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "%s: accepted (%d lines, %d threads, %d lapses inferred)\n", path, st.Lines, st.Threads, st.LapsesInferred)
		case errors.As(err, &v), errors.As(err, &le):
			rejected++
			fmt.Fprintf(stdout, "%s: REJECTED\n  %v\n", path, err)
		default:
			return usageError{fmt.Sprintf("%s: %v", path, err)}
		}
	}
	if rejected > 0 {
		return failure{exitFailed, fmt.Sprintf("%d of %d traces rejected", rejected, fs.NArg())}
	}
	return nil
}
