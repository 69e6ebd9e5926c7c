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
	if err := parse(fs, args, stdout, stderr, validateUsage); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{"no trace file given"}
	}
	spec := tracecheck.Spec{Fenced: !*unfencedSpec, FenceAbandon: !*unfencedSpec}
	rejected := 0
	for _, path := range fs.Args() {
		if _, err := os.Stat(path); err != nil {
			return usageError{err.Error()}
		}
		st, err := tracecheck.CheckFile(path, tracecheck.WithSpec(spec))
		var v *tracecheck.Violation
		var le *tracecheck.LineError
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
