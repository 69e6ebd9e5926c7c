// Package report turns a command's verdicts into what CI systems read:
// JUnit XML (GitHub's, GitLab's and Jenkins's test reports) and a short
// Markdown page (GitHub's $GITHUB_STEP_SUMMARY). The subcommands fill a
// Report with one Verdict per check; both files come from the same list.
package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Status is a check's outcome.
type Status string

const (
	Passed  Status = "passed"
	Failed  Status = "failed"  // the check ran and found a defect (JUnit failure)
	Errored Status = "error"   // the check could not run (JUnit error)
	Skipped Status = "skipped" // the check was not run, Message says why
)

// Verdict is one check: a test case in a suite.
type Verdict struct {
	Suite   string        `json:"suite"`             // the kind of check, e.g. "run: traces"
	Name    string        `json:"name"`              // what was checked, e.g. "seed-7"
	Status  Status        `json:"status"`            // passed, failed, error, skipped
	Message string        `json:"message,omitempty"` // one line: what failed, or why it was skipped
	Story   string        `json:"story,omitempty"`   // the failure's story: the shrunk timeline, the rejected line, guard and state
	Time    time.Duration `json:"time_ns,omitempty"`
}

// Report is a command's verdicts, in the order the checks ran.
type Report struct {
	Name     string // the command, e.g. "tracecheck run"
	Verdicts []Verdict
}

// Add appends a verdict.
func (r *Report) Add(v Verdict) { r.Verdicts = append(r.Verdicts, v) }

// Attach appends story to the verdict of suite and name, and reports
// whether there was one.
func (r *Report) Attach(suite, name, story string) bool {
	for i := range r.Verdicts {
		if v := &r.Verdicts[i]; v.Suite == suite && v.Name == name {
			if v.Story != "" && !strings.HasSuffix(v.Story, "\n") {
				v.Story += "\n"
			}
			v.Story += story
			return true
		}
	}
	return false
}

// counts are a list of verdicts' totals.
type counts struct{ tests, failures, errors, skipped int }

func count(vs []Verdict) counts {
	c := counts{tests: len(vs)}
	for _, v := range vs {
		switch v.Status {
		case Failed:
			c.failures++
		case Errored:
			c.errors++
		case Skipped:
			c.skipped++
		}
	}
	return c
}

// suites groups the verdicts by suite, in the order each suite first
// appears.
func (r *Report) suites() (names []string, by map[string][]Verdict) {
	by = map[string][]Verdict{}
	for _, v := range r.Verdicts {
		if _, ok := by[v.Suite]; !ok {
			names = append(names, v.Suite)
		}
		by[v.Suite] = append(by[v.Suite], v)
	}
	return names, by
}

// The JUnit elements, as GitHub's, GitLab's and Jenkins's reporters read
// them (the schema CheckJUnit checks).
type (
	xmlSuites struct {
		XMLName  xml.Name   `xml:"testsuites"`
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Errors   int        `xml:"errors,attr"`
		Skipped  int        `xml:"skipped,attr"`
		Time     string     `xml:"time,attr"`
		Suites   []xmlSuite `xml:"testsuite"`
	}
	xmlSuite struct {
		Name     string    `xml:"name,attr"`
		Tests    int       `xml:"tests,attr"`
		Failures int       `xml:"failures,attr"`
		Errors   int       `xml:"errors,attr"`
		Skipped  int       `xml:"skipped,attr"`
		Time     string    `xml:"time,attr"`
		Cases    []xmlCase `xml:"testcase"`
	}
	xmlCase struct {
		Name      string      `xml:"name,attr"`
		Classname string      `xml:"classname,attr"`
		Time      string      `xml:"time,attr"`
		Failure   *xmlProblem `xml:"failure,omitempty"`
		Error     *xmlProblem `xml:"error,omitempty"`
		Skipped   *xmlSkipped `xml:"skipped,omitempty"`
		SystemOut string      `xml:"system-out,omitempty"`
	}
	xmlProblem struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	xmlSkipped struct {
		Message string `xml:"message,attr"`
	}
)

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// WriteJUnit writes the verdicts as JUnit XML: one testsuite per suite,
// one testcase per verdict; a failing case's failure element holds its
// message and, as its text, its story.
func (r *Report) WriteJUnit(w io.Writer) error {
	names, by := r.suites()
	top := xmlSuites{Name: r.Name}
	var total time.Duration
	for _, name := range names {
		vs := by[name]
		c := count(vs)
		s := xmlSuite{Name: name, Tests: c.tests, Failures: c.failures, Errors: c.errors, Skipped: c.skipped}
		var t time.Duration
		for _, v := range vs {
			t += v.Time
			xc := xmlCase{Name: v.Name, Classname: r.Name + "." + name, Time: seconds(v.Time)}
			msg := oneLine(v.Message)
			switch v.Status {
			case Failed:
				xc.Failure = &xmlProblem{Message: msg, Type: "check failed", Text: story(v)}
			case Errored:
				xc.Error = &xmlProblem{Message: msg, Type: "could not run", Text: story(v)}
			case Skipped:
				xc.Skipped = &xmlSkipped{Message: msg}
			default:
				xc.SystemOut = v.Story
			}
			s.Cases = append(s.Cases, xc)
		}
		s.Time = seconds(t)
		total += t
		top.Suites = append(top.Suites, s)
		top.Tests, top.Failures, top.Errors, top.Skipped = top.Tests+c.tests, top.Failures+c.failures, top.Errors+c.errors, top.Skipped+c.skipped
	}
	top.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(top); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// story is a failing case's text: its message, then its story.
func story(v Verdict) string {
	if v.Story == "" {
		return v.Message
	}
	return v.Message + "\n\n" + v.Story
}

// oneLine is s's first line (an attribute's worth).
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// maxStories is how many failures the Markdown page tells in full.
const maxStories = 10

// WriteSummary writes the verdicts as a short Markdown page: the overall
// verdict, a table of the suites' counts, and the first failures' stories.
func (r *Report) WriteSummary(w io.Writer) error {
	names, by := r.suites()
	all := count(r.Verdicts)
	verdict := "PASS"
	switch {
	case all.failures > 0:
		verdict = "FAIL"
	case all.errors > 0:
		verdict = "ERROR"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s: %s\n\n", r.Name, verdict)
	fmt.Fprintf(&b, "%d checks: %d passed, %d failed, %d errors, %d skipped\n\n", all.tests, all.tests-all.failures-all.errors-all.skipped, all.failures, all.errors, all.skipped)
	b.WriteString("| check | passed | failed | errors | skipped |\n|---|---:|---:|---:|---:|\n")
	for _, name := range names {
		c := count(by[name])
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", mdCell(name), c.tests-c.failures-c.errors-c.skipped, c.failures, c.errors, c.skipped)
	}
	told := 0
	for _, v := range r.Verdicts {
		if v.Status != Failed && v.Status != Errored {
			continue
		}
		if told == maxStories {
			fmt.Fprintf(&b, "\n… and %d more (the JUnit report has them all)\n", all.failures+all.errors-told)
			break
		}
		told++
		fmt.Fprintf(&b, "\n<details><summary>%s: %s: %s</summary>\n\n```\n%s\n```\n</details>\n", mdCell(v.Suite), mdCell(v.Name), mdCell(oneLine(v.Message)), strings.ReplaceAll(story(v), "```", "'''"))
	}
	for _, v := range r.Verdicts {
		if v.Status == Skipped {
			fmt.Fprintf(&b, "\nskipped: %s: %s: %s\n", v.Suite, v.Name, oneLine(v.Message))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdCell escapes s for a Markdown table cell or an HTML summary.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "\n", " ").Replace(s)
}

// Files are where -junit and -summary write ("" for nowhere).
type Files struct{ JUnit, Summary string }

// Wanted reports whether any file is asked for.
func (f Files) Wanted() bool { return f.JUnit != "" || f.Summary != "" }

// Check refuses a path that cannot be written (a directory), before any
// check runs.
func (f Files) Check() error {
	for _, p := range []struct{ flag, path string }{{"-junit", f.JUnit}, {"-summary", f.Summary}} {
		if p.path == "" {
			continue
		}
		if fi, err := os.Stat(p.path); err == nil && fi.IsDir() {
			return fmt.Errorf("%s %s: is a directory", p.flag, p.path)
		}
	}
	return nil
}

// Write writes r to the files asked for. The summary is appended to, as
// $GITHUB_STEP_SUMMARY is by every step; the JUnit file is replaced.
func (f Files) Write(r *Report) error {
	if f.JUnit != "" {
		if err := writeFile(f.JUnit, os.O_TRUNC, r.WriteJUnit); err != nil {
			return fmt.Errorf("-junit: %w", err)
		}
	}
	if f.Summary != "" {
		if err := writeFile(f.Summary, os.O_APPEND, r.WriteSummary); err != nil {
			return fmt.Errorf("-summary: %w", err)
		}
	}
	return nil
}

func writeFile(path string, mode int, write func(io.Writer) error) error {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|mode, 0o644)
	if err != nil {
		return err
	}
	if err := write(out); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
