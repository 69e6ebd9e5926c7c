package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

const mutateUsage = `usage: tracecheck mutate [flags] -dir DIR FILE...

Writes -n mutants of the given traces into DIR (mut-NNNN.ndjson), each one
change of one trace drawn from -seed: a field's value, the action, the
holder, a tick; a line dropped, duplicated or swapped with another of its
thread. Every mutant is well-formed (it reads back), so it exercises a
checker, not the reader. DIR/expected-lines lists each mutant with the
line at which the Go checker rejects it (0: accepted), in the format of
tracecheck/testdata/expected-lines, so another checker (TLC's trace spec)
can be required to agree; DIR/mutations says what each mutant changed.
The same seed and inputs make the same files.

Flags:
`

func cmdMutate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	dir := fs.String("dir", "", "write the mutants here (created if missing; must hold no mut-*.ndjson)")
	n := fs.Int("n", 500, "how many mutants")
	seed := fs.Uint64("seed", 1, "the random seed")
	oneThread := fs.Bool("one-thread", true, "never make a mutant with more threads than its trace (TLC's trace spec takes one thread a file)")
	var unfencedSpec core.Fences
	fs.Var(everyFenceOff{&unfencedSpec}, "unfenced-spec", "give the Go checker's verdict under the spec with Fenced = FenceAbandon = FALSE")
	jsonOut := jsonFlag(fs)
	if err := parse(fs, args, stdout, stderr, mutateUsage); err != nil {
		return err
	}
	switch {
	case fs.NArg() == 0:
		return usageError{"no trace file given"}
	case *dir == "":
		return usageError{"-dir is required"}
	case *n <= 0:
		return usageError{fmt.Sprintf("-n %d: want at least 1", *n)}
	}
	var bases [][]core.TraceEvent
	for _, path := range fs.Args() {
		lines, err := tracecheck.ReadFile(path)
		if err != nil {
			return failure{exitUsage, err.Error()}
		}
		bases = append(bases, lines)
	}
	if old, _ := filepath.Glob(filepath.Join(*dir, "mut-*.ndjson")); len(old) > 0 {
		return usageError{fmt.Sprintf("-dir %s already holds mutants (%s)", *dir, filepath.Base(old[0]))}
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return failure{4, err.Error()} // could not run
	}
	spec := tracecheck.WithFences(core.AllFences().Without(unfencedSpec))
	rng := rand.New(rand.NewPCG(*seed, 0x6d75))
	var expected, described strings.Builder
	expected.WriteString("# The line at which the Go trace checker rejects each mutant (0: accepted).\n")
	rejected := 0
	for i := range *n {
		b := rng.IntN(len(bases))
		var mut []core.TraceEvent
		var m tracecheck.Mutation
		for {
			mut, m = tracecheck.Mutate(rng, bases[b])
			if !*oneThread || threadCount(mut) <= threadCount(bases[b]) {
				break
			}
		}
		name := fmt.Sprintf("mut-%04d.ndjson", i+1)
		if err := writeTraceFile(filepath.Join(*dir, name), mut); err != nil {
			return err
		}
		at := 0
		_, err := tracecheck.Check(mut, tracecheck.WithFile(name), spec)
		var v *tracecheck.Violation
		switch {
		case errors.As(err, &v):
			at = v.Line
			rejected++
		case err != nil:
			return err
		}
		fmt.Fprintf(&expected, "%s %d\n", name, at)
		fmt.Fprintf(&described, "%s %s: %s\n", name, fs.Arg(b), m)
	}
	for file, text := range map[string]string{"expected-lines": expected.String(), "mutations": described.String()} {
		if err := os.WriteFile(filepath.Join(*dir, file), []byte(text), 0o644); err != nil {
			return failure{4, err.Error()} // could not run
		}
	}
	if *jsonOut {
		return writeJSON(stdout, "mutate", nil, mutateFigures{Dir: *dir, Mutants: *n, Rejected: rejected, Accepted: *n - rejected})
	}
	fmt.Fprintf(stdout, "%d mutants in %s: %d rejected by the Go checker, %d accepted\n", *n, *dir, rejected, *n-rejected)
	return nil
}

// mutateFigures is mutate's -json summary.
type mutateFigures struct {
	Dir      string `json:"dir"`
	Mutants  int    `json:"mutants"`
	Rejected int    `json:"rejected"` // by the Go checker
	Accepted int    `json:"accepted"`
}

func threadCount(lines []core.TraceEvent) int {
	seen := map[core.ThreadID]bool{}
	for _, ev := range lines {
		seen[ev.Thread] = true
	}
	return len(seen)
}
