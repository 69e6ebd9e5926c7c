package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

func sample() *Report {
	r := &Report{Name: "tracecheck run"}
	r.Add(Verdict{Suite: "run: traces", Name: "seed-0", Status: Passed, Time: 3 * time.Millisecond})
	r.Add(Verdict{Suite: "run: traces", Name: "seed-1", Status: Failed, Message: "seed-1:7: Consume: guard lease[t].holder = p <fails>"})
	r.Add(Verdict{Suite: "run: histories", Name: "concurrent-0", Status: Skipped, Message: "porcupine timed out"})
	r.Add(Verdict{Suite: "run: histories", Name: "concurrent-1", Status: Errored, Message: "storage unreachable"})
	r.Attach("run: traces", "seed-1", "  p1 Claim t1\n  p2 Consume t1   <- rejected")
	return r
}

// TestJUnitValid: the XML WriteJUnit writes passes the schema check, and
// the failing case carries its message and story.
func TestJUnitValid(t *testing.T) {
	b := writeJUnit(t, sample())
	if err := CheckJUnit(b.Bytes()); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	for _, want := range []string{
		`<testsuites name="tracecheck run" tests="4" failures="1" errors="1" skipped="1"`,
		`<failure message="seed-1:7: Consume: guard lease[t].holder = p &lt;fails&gt;" type="check failed">`,
		"p2 Consume t1   &lt;- rejected",
		`<skipped message="porcupine timed out">`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JUnit lacks %q:\n%s", want, b.String())
		}
	}
}

// TestCheckJUnitCatches: each rule of the schema check catches a document
// that breaks it (the check's mutants).
func TestCheckJUnitCatches(t *testing.T) {
	b := writeJUnit(t, sample())
	good := b.String()
	for _, m := range []struct{ name, from, to, want string }{
		{"root", "testsuites", "testsuite-list", "root is"},
		{"suite count", `name="run: traces" tests="2"`, `name="run: traces" tests="3"`, "tests=3, but it holds 2"},
		{"total count", `<testsuites name="tracecheck run" tests="4" failures="1"`, `<testsuites name="tracecheck run" tests="4" failures="2"`, "failures=2"},
		{"suite name", `<testsuite name="run: traces"`, `<testsuite`, "no name"},
		{"suite tests", `name="run: traces" tests="2"`, `name="run: traces"`, "no tests attribute"},
		{"classname", `classname="tracecheck run.run: traces"`, ``, "no classname"},
		{"case name", `<testcase name="seed-0"`, `<testcase`, "no name"},
		{"two outcomes", `<skipped message="porcupine timed out"></skipped>`, `<skipped message="porcupine timed out"></skipped><failure message="x"></failure>`, "more than one"},
		{"unknown element", `<skipped message="porcupine timed out"></skipped>`, `<skipped message="porcupine timed out"></skipped><note/>`, "holds <note>"},
		{"time", `time="0.003"`, `time="-1"`, "not a non-negative decimal"},
		{"empty error", `<error message="storage unreachable" type="could not run">storage unreachable</error>`, `<error type="could not run"></error>`, "says nothing"},
		{"not xml", `</testsuites>`, ``, "not XML"},
		// pass 13's mutants 11 ("eE" allowed in times) and 14 (an
		// unknown element counted as a testcase):
		{"exponent time", `time="0.003"`, `time="3e-3"`, "not a non-negative decimal"},
		{"unknown suite child", `<testcase name="seed-0"`, `<bogus name="x" classname="y"></bogus><testcase name="seed-0"`, "holds <bogus>"},
	} {
		n := 1
		if m.name == "root" {
			n = -1 // its start and end tags
		}
		bad := strings.Replace(good, m.from, m.to, n)
		if bad == good {
			t.Fatalf("%s: the mutant changes nothing (%q not found)", m.name, m.from)
		}
		err := CheckJUnit([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), m.want) {
			t.Errorf("%s: CheckJUnit = %v, want an error with %q", m.name, err, m.want)
		}
	}
}

// TestSummary: the Markdown page gives the verdict, the counts per suite,
// and the failure's story.
func TestSummary(t *testing.T) {
	b := writeSummary(t, sample())
	for _, want := range []string{
		"## tracecheck run: FAIL",
		"4 checks: 1 passed, 1 failed, 1 errors, 1 skipped",
		"| run: traces | 1 | 1 | 0 | 0 |",
		"p2 Consume t1   <- rejected",
		"skipped: run: histories: concurrent-0: porcupine timed out",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

// TestCheckJUnitSkippedNeedsNoMessage: a skipped case without a message is
// valid JUnit, and WriteJUnit's output for one passes the check (catches
// pass 13's mutant 12: the check asks a <skipped> for a message too).
func TestCheckJUnitSkippedNeedsNoMessage(t *testing.T) {
	r := &Report{Name: "tracecheck run"}
	r.Add(Verdict{Suite: "run: histories", Name: "concurrent-0", Status: Skipped})
	b := writeJUnit(t, r)
	if err := CheckJUnit(b.Bytes()); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
}

// TestAttachSeparatesStories: a story attached after one that does not end
// in a newline starts on a line of its own (catches pass 13's mutant 03:
// Attach concatenates them).
func TestAttachSeparatesStories(t *testing.T) {
	r := &Report{}
	r.Add(Verdict{Suite: "s", Name: "n", Status: Failed, Message: "m"})
	if !r.Attach("s", "n", "first") || !r.Attach("s", "n", "second") {
		t.Fatal("Attach found no verdict")
	}
	if got := r.Verdicts[0].Story; got != "first\nsecond" {
		t.Errorf("story = %q, want %q", got, "first\nsecond")
	}
}

// TestJUnitPassedStoryInSystemOut: a passing case keeps its story, as its
// system-out (catches pass 13's mutant 06: the story dropped).
func TestJUnitPassedStoryInSystemOut(t *testing.T) {
	r := &Report{Name: "tracecheck run"}
	r.Add(Verdict{Suite: "run: traces", Name: "seed-0", Status: Passed, Story: "412 lines checked"})
	b := writeJUnit(t, r)
	if want := "<system-out>412 lines checked</system-out>"; !strings.Contains(b.String(), want) {
		t.Errorf("JUnit lacks %q:\n%s", want, b.String())
	}
}

// TestJUnitMessageIsTheFirstLineTrimmed: a failure's message attribute is
// its message's first line once leading blanks are trimmed (catches pass 13's mutant 08:
// oneLine does not trim, and a message that begins with a newline gives an
// empty attribute).
func TestJUnitMessageIsTheFirstLineTrimmed(t *testing.T) {
	r := &Report{Name: "tracecheck run"}
	r.Add(Verdict{Suite: "run: traces", Name: "seed-1", Status: Failed, Message: "\n  I1 broken\nmore"})
	b := writeJUnit(t, r)
	if want := `<failure message="I1 broken" type="check failed">`; !strings.Contains(b.String(), want) {
		t.Errorf("JUnit lacks %q:\n%s", want, b.String())
	}
}

// TestSummaryTellsTenStoriesThenCounts: past maxStories failures the page
// stops telling stories and says how many more there are (catches pass 13's
// mutant 01: told > maxStories, which tells an eleventh).
func TestSummaryTellsTenStoriesThenCounts(t *testing.T) {
	r := &Report{Name: "tracecheck run"}
	for i := range maxStories + 2 {
		r.Add(Verdict{Suite: "run: traces", Name: fmt.Sprintf("seed-%d", i), Status: Failed, Message: fmt.Sprintf("failure %d", i)})
	}
	b := writeSummary(t, r)
	if n := strings.Count(b.String(), "<details>"); n != maxStories {
		t.Errorf("the summary tells %d stories, want %d:\n%s", n, maxStories, b.String())
	}
	if want := "… and 2 more (the JUnit report has them all)"; !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
}

// TestSummaryErrorVerdict: a report with errors and no failures is ERROR,
// not PASS (catches pass 13's mutant 02: the ERROR case dropped).
func TestSummaryErrorVerdict(t *testing.T) {
	r := &Report{Name: "tracecheck validate"}
	r.Add(Verdict{Suite: "validate", Name: "a.ndjson", Status: Passed})
	r.Add(Verdict{Suite: "validate", Name: "b.ndjson", Status: Errored, Message: "unreadable"})
	b := writeSummary(t, r)
	if want := "## tracecheck validate: ERROR\n"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("summary does not begin %q:\n%s", want, b.String())
	}
}

// TestSummaryEscapesTableCells: a suite name with a pipe stays one cell of
// the counts table (catches pass 13's mutant 09: mdCell leaves | alone).
func TestSummaryEscapesTableCells(t *testing.T) {
	r := &Report{Name: "tracecheck run"}
	r.Add(Verdict{Suite: "run: a|b", Name: "seed-0", Status: Passed})
	b := writeSummary(t, r)
	if want := `| run: a\|b | 1 | 0 | 0 | 0 |`; !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
}

// writeJUnit is r's JUnit XML.
func writeJUnit(t *testing.T, r *Report) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	return &b
}

// writeSummary is r's Markdown summary.
func writeSummary(t *testing.T, r *Report) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	return &b
}
