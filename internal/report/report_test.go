package report

import (
	"bytes"
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
	var b bytes.Buffer
	if err := sample().WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
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
	var b bytes.Buffer
	if err := sample().WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
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
	var b bytes.Buffer
	if err := sample().WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
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
