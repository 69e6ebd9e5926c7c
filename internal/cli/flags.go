package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/report"
)

var errHelp = errors.New("help shown")

// parse parses args with fs, printing the usage to stdout for -h and
// turning a parse error into a usageError.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, usage string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return errHelp
		}
		fmt.Fprint(stderr, usage)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		return usageError{err.Error()}
	}
	return nil
}

// everyFenceOff is a boolean flag, -unfenced or -unfenced-spec: true
// switches every fence off, false none. It takes the values flag.Bool
// takes; the fences it sets are the ones switched off.
type everyFenceOff struct{ off *core.Fences }

// IsBoolFlag lets the flag stand alone.
func (f everyFenceOff) IsBoolFlag() bool { return true }

// Set parses a boolean, as flag.Bool does.
func (f everyFenceOff) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("parse error")
	}
	*f.off = core.Fences{}
	if on {
		*f.off = core.AllFences()
	}
	return nil
}

// String returns "true" when every fence is off, and "false" otherwise.
func (f everyFenceOff) String() string {
	return strconv.FormatBool(f.off != nil && *f.off == core.AllFences())
}

// reportFlags registers -junit and -summary, which run, tlc, validate,
// conform and fleet share.
func reportFlags(fs *flag.FlagSet) *report.Files {
	var f report.Files
	fs.StringVar(&f.JUnit, "junit", "", "write the verdicts as JUnit XML to this file, one test case per check, a failing case's story in its failure (for CI test reports)")
	fs.StringVar(&f.Summary, "summary", "", "append the verdicts as a short Markdown page to this file (e.g. $GITHUB_STEP_SUMMARY)")
	return &f
}

// writeReports writes rep to files after the command's checks, and
// returns the command's err unchanged (or, if that is nil, the error
// writing them).
func writeReports(files *report.Files, rep *report.Report, err error) error {
	if files == nil || !files.Wanted() || rep == nil {
		return err
	}
	if werr := files.Write(rep); werr != nil {
		if err == nil {
			return werr
		}
		return fmt.Errorf("%w (and %v)", err, werr)
	}
	return err
}

// verdictOf is the report's status for a command's err (its exit code).
func verdictOf(err error) (report.Status, string) {
	switch exitCode(err) {
	case exitOK:
		return report.Passed, ""
	case exitFailed, exitSurvived:
		return report.Failed, err.Error()
	case exitInconclusive:
		return report.Skipped, err.Error()
	}
	return report.Errored, err.Error()
}

// checkStorageURL refuses a -storage URL that does not parse as a
// PostgreSQL connection string: bad input (exit 2), before anything runs
// or is written, where connecting would fail as "could not run". The
// parser's error shows no password.
func checkStorageURL(url string) error {
	if url == "" {
		return nil
	}
	if _, err := pgconn.ParseConfig(url); err != nil {
		return usageError{fmt.Sprintf("-storage: %v", err)}
	}
	return nil
}

// checkNotInput refuses an output flag's path that is one of the
// command's inputs (the same file, by whatever path): writing it would
// destroy what the command reads. Bad usage (exit 2), found before
// anything runs or is written.
func checkNotInput(flagName, out string, inputs ...string) error {
	if out == "" {
		return nil
	}
	ofi, err := os.Stat(out)
	if err != nil {
		return nil // not there yet: no input
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		if ifi, err := os.Stat(in); err == nil && os.SameFile(ofi, ifi) {
			return usageError{fmt.Sprintf("%s %s: is the input %s, which writing it would destroy", flagName, out, in)}
		}
	}
	return nil
}

// checkReportFiles refuses -junit and -summary paths that cannot be
// written (a directory) or that name one of the inputs.
func checkReportFiles(files *report.Files, inputs ...string) error {
	if err := files.Check(); err != nil {
		return usageError{err.Error()}
	}
	if err := checkNotInput("-junit", files.JUnit, inputs...); err != nil {
		return err
	}
	return checkNotInput("-summary", files.Summary, inputs...)
}

// checkOutFile refuses an output file flag's path that cannot be a file:
// a directory, or one in a directory that is not there. Bad usage (exit
// 2), found before anything runs, where writing it after the work would
// fail as "could not run".
func checkOutFile(flagName, out string) error {
	if out == "" {
		return nil
	}
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		return usageError{fmt.Sprintf("%s %s: is a directory", flagName, out)}
	}
	if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
		return usageError{fmt.Sprintf("%s %s: no directory %s to write it in", flagName, out, filepath.Dir(out))}
	}
	return nil
}

// checkDirFlag refuses a directory flag's path that is there and is not
// a directory: bad usage before anything runs, where creating it failed
// after the work, as could not run.
func checkDirFlag(flagName, dir string) error {
	if fi, err := os.Stat(dir); dir != "" && err == nil && !fi.IsDir() {
		return usageError{fmt.Sprintf("%s %s: not a directory", flagName, dir)}
	}
	return nil
}
