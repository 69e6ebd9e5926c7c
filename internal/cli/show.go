package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/explore"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/tracecheck"
)

const showUsage = `usage: tracecheck show [flags] FILE

Prints a trace as a timeline for spec reviewers: one row per line in trace
order, one lane per process; holders are numbered h1, h2, ... in the order
they claim; a Claim that takes a lease another holder had is marked as an
inferred lapse; refusals are marked ✗. The first line the Go trace checker
rejects, if any, is marked with the guard or invariant that failed.

FILE is a Go trace (ndjson, as run -trace-dir, replay -trace-out or the
runner write it) or a TLC counterexample (TLC's -dumpTrace json FILE of
spec/ThreadClaimLapse.tla): both are read in the same view.

A Go trace is read as a stream, never held whole: once to check it (the
verdict is the whole trace's, as validate gives it) and once for the
lines shown, each thread followed from its first line. -thread and -lines
select while reading, and at most -rows lines are shown, in the text and
on the page: a longer selection ends with the command for its next page.
Within a thread the rows are in the file's order (the order rule).

With -html OUT it writes the trace explorer: a self-contained page (no
network) with the lanes, and for the line selected (a click, the arrow
keys or j/k, or the URL's #line=N) the spec's state after it — lease,
taken, runs, requests, each process's pc, hold, plan and run — with the
variables that line changed highlighted, and the action's TLA+ text, read
from spec/ThreadClaimLapse.tla when the page is written (-spec; outside
the repository, the copy built into tracecheck: the page says which), with
the failing guard of a rejected line marked. A TLC counterexample's page and
timeline show its constants: those of its cfg (-cfg, or X.cfg beside
X.json), else those its states reveal (Procs, and each fence a step
proves off). Inferred lapses are rows of their
own. A concurrent execution's page links its porcupine visualisation
(run -trace-dir writes one beside its traces; or give -porcupine). Open
the page in any browser: xdg-open OUT.

Exit codes: 0 a Go trace accepted, or a TLC counterexample whose states
violate no invariant; 1 a Go trace rejected, or a TLC counterexample that
violates an invariant; 2 bad input, or an -html file that cannot be
written (found before anything is printed).

Flags:
`

// showFigures is show's summary for -json.
type showFigures struct {
	File     string `json:"file"`
	Source   string `json:"source"`
	Threads  int    `json:"threads"`
	Steps    int    `json:"steps"`
	Verdict  string `json:"verdict"`
	Rejected string `json:"rejected,omitempty"`
	HTML     string `json:"html,omitempty"`
}

func cmdShow(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	htmlOut := fs.String("html", "", "also write the trace explorer, a self-contained HTML page, to this file")
	only := fs.String("thread", "", "show only this thread")
	width := fs.Int("width", 28, "characters per lane")
	cfgPath := fs.String("cfg", "", "a TLC counterexample's cfg, whose constants the page and the timeline show (default X.cfg beside X.json, else the constants the states reveal)")
	specPath := fs.String("spec", "", "the spec whose actions' TLA+ text the page shows (default spec/ThreadClaimLapse.tla in the working directory or a parent, else the copy built into tracecheck)")
	porcupineHTML := fs.String("porcupine", "", "link this porcupine visualisation from the page (default the one run -trace-dir wrote beside a concurrent execution's trace)")
	var lines lineRange
	fs.Var(&lines, "lines", "show only the trace's lines A to B (A:B, A: or :B; file line numbers, a TLC counterexample's state numbers): a page of a long trace")
	rows := fs.Int("rows", defaultShowRows, "show at most this many lines (the text and the page), then the command for the next page; 0: every line selected, however many")
	jsonOut := jsonFlag(fs)
	if err := parse(fs, args, stdout, stderr, showUsage); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"want exactly one trace file"}
	}
	if *width < 4 {
		return usageError{"-width must be at least 4"}
	}
	if *rows < 0 {
		return usageError{"-rows must not be negative"}
	}
	out := stdout
	if *jsonOut {
		out = io.Discard
	}
	if err := checkNotInput("-html", *htmlOut, fs.Arg(0), *specPath, *cfgPath, *porcupineHTML); err != nil {
		return err
	}
	fig, err := show(fs.Arg(0), showOptions{only: *only, lines: lines, width: *width, rows: *rows, htmlOut: *htmlOut, specPath: *specPath, cfgPath: *cfgPath, porcupineHTML: *porcupineHTML}, out)
	if *jsonOut {
		return writeJSON(stdout, "show", err, fig)
	}
	return err
}

// readExplorerTrace reads FILE as a Go trace or a TLC counterexample into the
// explorer's trace; v is the Go trace checker's verdict on a Go trace.
func readExplorerTrace(path string) (explore.Trace, []core.TraceEvent, *tracecheck.Violation, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return explore.Trace{}, nil, nil, usageError{err.Error()}
	}
	if fi.IsDir() {
		return explore.Trace{}, nil, nil, usageError{fmt.Sprintf("%s: a directory, not a trace", path)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return explore.Trace{}, nil, nil, usageError{err.Error()}
	}
	if explore.IsTLC(data) {
		t, err := explore.ReadTLC(bytes.NewReader(data), path)
		if err != nil {
			return t, nil, nil, usageError{err.Error()}
		}
		return t, nil, nil, nil
	}
	lines, err := tracecheck.Read(bytes.NewReader(data), path)
	if err != nil {
		return explore.Trace{}, nil, nil, usageError{err.Error()}
	}
	_, checkErr := tracecheck.Check(lines, tracecheck.WithFile(path))
	var v *tracecheck.Violation
	if checkErr != nil && !errors.As(checkErr, &v) {
		return explore.Trace{}, nil, nil, checkErr
	}
	return explore.FromGo(path, lines, v), lines, v, nil
}

// showOptions are show's flags.
type showOptions struct {
	only                             string    // -thread
	lines                            lineRange // -lines
	width, rows                      int
	htmlOut, specPath, porcupineHTML string
	cfgPath                          string // -cfg
}

// lineRange is -lines A:B, inclusive; 0 is open.
type lineRange struct{ lo, hi int }

func (r *lineRange) String() string {
	if r == nil || *r == (lineRange{}) {
		return ""
	}
	return fmt.Sprintf("%d:%d", r.lo, r.hi)
}

func (r *lineRange) Set(v string) error {
	a, b, ok := strings.Cut(v, ":")
	if !ok {
		return errors.New("want A:B, A: or :B")
	}
	var err error
	for _, p := range []struct {
		s  string
		to *int
	}{{a, &r.lo}, {b, &r.hi}} {
		if p.s == "" {
			continue
		}
		if *p.to, err = strconv.Atoi(p.s); err != nil || *p.to < 1 {
			return fmt.Errorf("%q is not a line number", p.s)
		}
	}
	if r.hi != 0 && r.lo > r.hi {
		return fmt.Errorf("%d:%d is an empty range", r.lo, r.hi)
	}
	return nil
}

func (r lineRange) has(n int) bool { return n >= r.lo && (r.hi == 0 || n <= r.hi) }

// keepLines keeps the steps of t's threads in r (a step of no line, Init
// or an inferred Lapse, is kept when the next step with a line is), and
// reports how many are left.
func keepLines(t *explore.Trace, r lineRange) int {
	n := 0
	for i := range t.Threads {
		var kept, pending []explore.Step
		for _, st := range t.Threads[i].Steps {
			switch {
			case st.Line == 0:
				pending = append(pending, st)
				continue
			case r.has(st.Line):
				kept = append(kept, pending...)
				kept = append(kept, st)
				n++
			}
			pending = nil
		}
		t.Threads[i].Steps = kept
	}
	return n
}

func show(path string, o showOptions, stdout io.Writer) (showFigures, error) {
	fig := showFigures{File: path}
	fi, err := os.Stat(path)
	if err != nil {
		return fig, usageError{err.Error()}
	}
	if fi.IsDir() {
		return fig, usageError{fmt.Sprintf("%s: a directory, not a trace", path)}
	}
	data, tlc, err := sniffTLC(path)
	if err != nil {
		return fig, err
	}
	if !tlc {
		if o.cfgPath != "" {
			return fig, usageError{fmt.Sprintf("-cfg %s: %s is not a TLC counterexample", o.cfgPath, path)}
		}
		return fig, showGo(path, o, stdout, &fig)
	}
	t, err := explore.ReadTLC(bytes.NewReader(data), path)
	if err != nil {
		return fig, usageError{err.Error()}
	}
	return fig, showTLC(path, t, o, stdout, &fig)
}

// showTLC shows a TLC counterexample (short: TLC writes one state a
// step of a shortest counterexample), read whole.
func showTLC(path string, t explore.Trace, o showOptions, stdout io.Writer, fig *showFigures) error {
	fig.Source, fig.Verdict = t.Source, t.Verdict
	if err := useCfg(&t, path, o.cfgPath); err != nil {
		return err
	}
	if o.only != "" {
		var keep []explore.Thread
		for _, th := range t.Threads {
			if th.Name == o.only {
				keep = append(keep, th)
			}
		}
		if len(keep) == 0 {
			return usageError{fmt.Sprintf("no thread %q in %s", o.only, path)}
		}
		t.Threads = keep
	}
	if o.lines != (lineRange{}) && keepLines(&t, o.lines) == 0 {
		return usageError{fmt.Sprintf("-lines %s: no line of %s in that range", o.lines.String(), path)}
	}
	if err := checkHTMLOut(o.htmlOut); err != nil {
		return err
	}
	fig.Threads = len(t.Threads)
	for _, th := range t.Threads {
		fig.Steps += len(th.Steps)
	}
	printTLC(stdout, t)
	if err := writeShowPage(path, o, t, stdout, fig); err != nil {
		return err
	}
	if r, line := brokenInvariant(t); r != nil {
		// A TLC counterexample that violates an invariant fails as a
		// rejected Go trace does.
		fig.Rejected = fmt.Sprintf("%s: state %d: invariant %s", path, line, r.Rule)
		return failure{exitFailed, fmt.Sprintf("%s: TLC counterexample: invariant %s violated in state %d", path, r.Rule, line)}
	}
	return nil
}

// checkHTMLOut finds an -html output that cannot be written before the
// timeline is printed.
func checkHTMLOut(out string) error {
	if out == "" {
		return nil
	}
	if err := checkWritable(out); err != nil {
		return usageError{fmt.Sprintf("-html %s: %v", out, err)}
	}
	return nil
}

// writeShowPage writes show's explorer page, when -html asks for one.
func writeShowPage(path string, o showOptions, t explore.Trace, stdout io.Writer, fig *showFigures) error {
	if o.htmlOut == "" {
		return nil
	}
	t.Porcupine = relativeTo(o.htmlOut, porcupineLink(path, o.porcupineHTML))
	if err := writeExplorer(o.htmlOut, t, o.specPath); err != nil {
		return err
	}
	fig.HTML = o.htmlOut
	fmt.Fprintf(stdout, "wrote %s\n", o.htmlOut)
	return nil
}

// brokenInvariant is the invariant a TLC counterexample's state violates,
// and that state's line; nil when none is.
func brokenInvariant(t explore.Trace) (*explore.Rejection, int) {
	if t.Source != explore.SourceTLC {
		return nil, 0
	}
	for _, th := range t.Threads {
		for _, st := range th.Steps {
			if st.Rejected != nil && st.Rejected.Kind == "invariant" {
				return st.Rejected, st.Line
			}
		}
	}
	return nil, 0
}

// useCfg gives a TLC counterexample the constants of its cfg: -cfg, or
// else X.cfg beside X.json when there is one (TLC's counterexample does
// not name its cfg). Without either, the page shows the constants the
// states reveal.
func useCfg(t *explore.Trace, tracePath, cfgPath string) error {
	if t.Source != explore.SourceTLC {
		if cfgPath != "" {
			return usageError{fmt.Sprintf("-cfg %s: %s is not a TLC counterexample", cfgPath, tracePath)}
		}
		return nil
	}
	if cfgPath == "" {
		beside := strings.TrimSuffix(tracePath, filepath.Ext(tracePath)) + ".cfg"
		if fi, err := os.Stat(beside); err != nil || fi.IsDir() {
			return nil
		}
		cfgPath = beside
	}
	c, err := specmodel.ReadConfig(cfgPath)
	if err != nil {
		return usageError{fmt.Sprintf("-cfg %s: %v", cfgPath, err)}
	}
	explore.UseCfg(t, cfgPath, explore.CfgConstants(c))
	return nil
}

// checkWritable reports whether path can be written (a file there is
// left as it was; one that was not there is not left behind).
func checkWritable(path string) error {
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return errors.New("is a directory")
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		return f.Close()
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(path)
}

// porcupineLink returns the porcupine visualisation to link: the one
// given, or the one run -trace-dir wrote beside a concurrent execution's
// trace (ok-concurrent-3-t1.ndjson: concurrent-3.porcupine.html).
func porcupineLink(tracePath, given string) string {
	if given != "" {
		return given
	}
	m := concurrentTrace.FindStringSubmatch(filepath.Base(tracePath))
	if m == nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(tracePath), porcupineFile(m[1]))
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// relativeTo returns target as a link from a page written at page.
func relativeTo(page, target string) string {
	if target == "" || filepath.IsAbs(target) {
		return target
	}
	pageDir, err1 := filepath.Abs(filepath.Dir(page))
	abs, err2 := filepath.Abs(target)
	if err1 != nil || err2 != nil {
		return target
	}
	if rel, err := filepath.Rel(pageDir, abs); err == nil {
		return filepath.ToSlash(rel)
	}
	return target
}

var concurrentTrace = regexp.MustCompile(`^(?:ok|bad)-concurrent-(\d+)-`)

// porcupineFile names a concurrent execution's porcupine visualisation.
func porcupineFile(seed string) string { return "concurrent-" + seed + ".porcupine.html" }

// writeExplorer writes the explorer page, with the spec's actions' text.
func writeExplorer(out string, t explore.Trace, specPath string) error {
	wd, _ := os.Getwd()
	text, from, err := explore.LoadSpec(specPath, wd)
	if err != nil {
		return usageError{err.Error()}
	}
	t.SpecFrom = from
	actions := explore.ActionTexts(text)
	f, err := os.Create(out)
	if err != nil {
		return usageError{err.Error()}
	}
	if err := explore.WriteHTML(f, t, actions); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// printTLC prints a TLC counterexample: each state's action and what it
// changed.
func printTLC(w io.Writer, t explore.Trace) {
	th := t.Threads[0]
	fmt.Fprintf(w, "%s: %s, %d states, processes %s\n", t.File, t.Source, len(th.Steps), strings.Join(th.Lanes[:len(th.Lanes)-1], " "))
	if len(t.Constants) > 0 {
		cs := make([]string, len(t.Constants))
		for i, c := range t.Constants {
			cs[i] = c.Name + " = " + c.Value
			if c.Why != "" && c.Value != "unknown" {
				cs[i] += " (" + c.Why + ")"
			}
		}
		fmt.Fprintf(w, "constants (%s): %s\n", t.ConstantsFrom, strings.Join(cs, ", "))
	}
	for _, s := range th.Steps {
		fmt.Fprintf(w, "%6d  %-22s %-26s %s\n", s.Line, s.Label(), s.Text, strings.Join(s.Changed, " "))
		if s.Rejected != nil {
			fmt.Fprintf(w, "        ✗ %s %s violated\n", s.Rejected.Kind, s.Rejected.Rule)
		}
	}
	fmt.Fprintf(w, "%s\n", t.Verdict)
}

// textView prints one thread's timeline as text.
func textView(w io.Writer, tv explore.View, width int) {
	fmt.Fprintf(w, "thread %s: %d lines, processes %s\n", tv.Thread, len(tv.Cells), strings.Join(tv.Lanes, " "))
	for _, h := range tv.Holders {
		fmt.Fprintf(w, "  %s\n", h)
	}
	pad := func(s string) string {
		r := []rune(s)
		if len(r) > width {
			return string(r[:width-1]) + "…"
		}
		return s + strings.Repeat(" ", width-len(r))
	}
	fmt.Fprintf(w, "%6s %5s", "line", "tick")
	for _, l := range tv.Lanes {
		fmt.Fprintf(w, " │ %s", pad(l))
	}
	fmt.Fprintln(w)
	for _, c := range tv.Cells {
		fmt.Fprintf(w, "%6d %5d", c.N, c.Tick)
		for i := range tv.Lanes {
			s := ""
			if i == c.Lane {
				s = c.Text
			}
			fmt.Fprintf(w, " │ %s", pad(s))
		}
		if c.Bad != "" {
			fmt.Fprintf(w, "  ✗ REJECTED: %s", c.Bad)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}
