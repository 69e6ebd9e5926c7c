package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/report"
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

With -shrink, a rejected trace is also shrunk to its shortest story: the
rejected thread's lines, dropped while the checker still rejects the same
action at the same rule (lines kept keep their order; ticks, messages,
runs and requests renumbered over them). The story is printed and written
to -shrink-dir (never beside the input) as FILE.shrunk-ACTION-RULE.ndjson.

Every file is checked; the exit code is the worst outcome:
  0  every file accepted
  1  a file rejected by the checker
  2  bad input: a file that is malformed (printed as file:line: reason),
     empty, unreadable, or a directory; or bad usage (-junit, -summary or
     -shrink-dir a path that cannot be one, or one of the FILEs)
  4  a -junit, -summary or -shrink story file that could not be written

Flags:
`

func cmdValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	var v validation
	fs.Var(everyFenceOff{&v.unfencedSpec}, "unfenced-spec", "check against the spec with Fenced = FenceAbandon = FALSE")
	shrinkOut := fs.Bool("shrink", false, "shrink each rejected trace to its shortest story, printed and written to -shrink-dir")
	fs.StringVar(&v.shrinkDir, "shrink-dir", "tracecheck-out", "where -shrink writes the stories (FILE.shrunk-ACTION-RULE.ndjson)")
	jsonOut := jsonFlag(fs)
	files := reportFlags(fs)
	if err := parse(fs, args, stdout, stderr, validateUsage); err != nil {
		return err
	}
	if err := checkReportFiles(files, fs.Args()...); err != nil {
		return err
	}
	if err := checkDirFlag("-shrink-dir", v.shrinkDir); *shrinkOut && err != nil {
		return err
	}
	v.shrink = *shrinkOut
	var figs []validateFigure
	if *jsonOut {
		err := v.run(ctx, fs, io.Discard, io.Discard, &figs)
		return writeJSON(stdout, "validate", writeReports(files, validateReport(figs), err), figs)
	}
	err := v.run(ctx, fs, stdout, stderr, &figs)
	if exitCode(err) == exitUsage && len(figs) == 0 {
		return err // no file to report on
	}
	return writeReports(files, validateReport(figs), err)
}

// validateReport is validate's verdicts for -junit and -summary: one per
// file (a rejected file's story is the checker's: the rejected line, the
// guard, the state).
func validateReport(figs []validateFigure) *report.Report {
	r := &report.Report{Name: "tracecheck validate"}
	for _, f := range figs {
		v := report.Verdict{Suite: "validate: files", Name: f.File, Status: report.Passed,
			Story: fmt.Sprintf("%d lines, %d threads, %d lapses inferred", f.Lines, f.Threads, f.Lapses)}
		switch {
		case f.bad:
			v.Status, v.Message, v.Story = report.Errored, "not valid trace input: "+f.Rejected, ""
		case !f.Accepted:
			v.Status, v.Message, v.Story = report.Failed, f.Rejected, ""
			if f.Story != nil {
				v.Story = "shrunk to " + strings.Join(f.Story.Files[1:], ", ")
			}
		}
		r.Add(v)
	}
	return r
}

// validation is what validate was asked to do.
type validation struct {
	unfencedSpec core.Fences // the fences the spec has off
	shrink       bool
	shrinkDir    string // where the stories go
}

// validateFigure is one file's verdict, for -json.
type validateFigure struct {
	File     string `json:"file"`
	Accepted bool   `json:"accepted"`
	Lines    int    `json:"lines"`
	Threads  int    `json:"threads"`
	Lapses   int    `json:"lapses_inferred"`
	Rejected string `json:"rejected,omitempty"` // the violation, or why the input is bad
	Story    *story `json:"story,omitempty"`    // with -shrink: the rejection's shortest story
	bad      bool   // not valid trace input
}

func (val validation) run(ctx context.Context, fs *flag.FlagSet, stdout, stderr io.Writer, figs *[]validateFigure) error {
	if fs.NArg() == 0 {
		return usageError{"no trace file given"}
	}
	spec := tracecheck.WithFences(core.AllFences().Without(val.unfencedSpec))
	rejected, bad := 0, 0
	for _, path := range fs.Args() {
		st, err := tracecheck.CheckFile(path, spec)
		var v *tracecheck.Violation
		var le *tracecheck.LineError
		if errors.As(err, &v) {
			// The checker stops at the first violation: a line after it
			// that is not trace input still makes the file bad input.
			if _, rerr := tracecheck.ReadFile(path); rerr != nil {
				err = rerr
			}
		}
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
			if val.shrink {
				st, err := shrinkFile(ctx, stdout, path, val.shrinkDir, spec)
				switch {
				case notShrunk(stdout, path, err):
				case err != nil:
					return err
				default:
					(*figs)[len(*figs)-1].Story = &st
				}
			}
		case errors.As(err, &le):
			(*figs)[len(*figs)-1].bad = true
			bad++
			fmt.Fprintf(stderr, "%v\n", le)
		default:
			(*figs)[len(*figs)-1].bad = true
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

// shrinkFile shrinks a rejected trace file to its story, written to dir
// (not beside the input: a story there would be read as a fixture).
func shrinkFile(ctx context.Context, out io.Writer, path, dir string, opts ...tracecheck.Option) (story, error) {
	lines, err := tracecheck.ReadFile(path)
	if err != nil {
		return story{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return story{}, err
	}
	return shrinkTraceStory(ctx, out, path, lines, path, true, dir, append([]tracecheck.Option{tracecheck.WithFile(path)}, opts...)...)
}
