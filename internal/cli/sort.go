package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

const sortUsage = `usage: tracecheck sort [flags] FILE

Puts each thread's lines of a trace in trace order (by tick, a write before
the reads at its tick, otherwise as written), each thread keeping the
positions its lines held, and writes the result to stdout (or -o). This is
the normalising step for a file written in the order concurrent processes
traced their lines; 'tracecheck validate' and TLC check file order as it
stands. The input is read strictly: bad input exits 2 with file:line:
reason, and nothing is written. -o through a symbolic link replaces the
file the link names; -o naming a named pipe or a device writes into it.

Exit codes: 0 sorted; 2 bad input or bad usage (-o a directory, or in a
directory that is not there); 4 the output could not be written.

Flags:
`

func cmdSort(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sort", flag.ContinueOnError)
	out := fs.String("o", "", "write to this file (replaced whole, only once the input read well) instead of stdout (- is stdout)")
	jsonOut := jsonFlag(fs)
	if err := parse(fs, args, stdout, stderr, sortUsage); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"want exactly one trace file"}
	}
	if *out == "-" {
		*out = "" // stdout, as without -o
	}
	if *jsonOut && *out == "" {
		return usageError{"-json needs -o: stdout carries the JSON summary, not the trace"}
	}
	if err := checkOutFile("-o", *out); err != nil {
		return err
	}
	fig := sortFigures{File: fs.Arg(0), Out: *out}
	err := sortFile(fs.Arg(0), *out, stdout, &fig)
	if *jsonOut {
		return writeJSON(stdout, "sort", err, fig)
	}
	return err
}

// sortFigures is sort's -json summary.
type sortFigures struct {
	File    string `json:"file"`
	Out     string `json:"out"`
	Lines   int    `json:"lines"`
	Threads int    `json:"threads"`
	Moved   int    `json:"moved"` // lines not where they were
}

func sortFile(path, out string, stdout io.Writer, fig *sortFigures) error {
	lines, err := tracecheck.ReadFile(path)
	if err != nil {
		return failure{exitUsage, err.Error()}
	}
	before := slices.Clone(lines)
	tracecheck.Sort(lines)
	threads := map[core.ThreadID]bool{}
	for i := range lines {
		threads[lines[i].Thread] = true
		if lines[i] != before[i] {
			fig.Moved++
		}
	}
	fig.Lines, fig.Threads = len(lines), len(threads)
	if out == "" {
		return tracecheck.WriteLines(stdout, lines)
	}
	return writeTraceFile(out, lines)
}

// writeTraceFile writes lines to path through a temporary file beside it,
// so that path is replaced whole or not at all. The file is readable by
// all (0644), as the command's other outputs are: a temporary file is
// created readable by its owner only. A symbolic link is written
// through (the file it names is replaced, the link kept), and a path
// that is not a regular file (a named pipe, /dev/stdout) is written in
// place, as a shell's > would: a rename would put a regular file where
// the link or the device was.
func writeTraceFile(path string, lines []core.TraceEvent) error {
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return writeTraceInPlace(path, fi, lines)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".trace-*")
	if err != nil {
		return failure{4, // could not run
			fmt.Sprintf("write %s: %v", path, err)}
	}
	err = f.Chmod(0o644)
	if err == nil {
		err = tracecheck.WriteLines(f, lines)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return failure{4, // could not run
			fmt.Sprintf("write %s: %v", path, err)}
	}
	return nil
}

// writeTraceInPlace writes lines into path, which is not a regular file.
func writeTraceInPlace(path string, fi os.FileInfo, lines []core.TraceEvent) error {
	if fi.IsDir() {
		return failure{exitCouldNotRun, fmt.Sprintf("write %s: is a directory", path)}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		err = tracecheck.WriteLines(f, lines)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return failure{exitCouldNotRun, fmt.Sprintf("write %s: %v", path, err)}
	}
	return nil
}
