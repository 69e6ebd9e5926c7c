package tlc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseRecorded reads every recorded TLC -tool output in testdata and
// checks what the parser makes of it: the outcome and its name or text,
// the counts, the counterexample. The recordings come from a real TLC
// (TestRecord -record).
func TestParseRecorded(t *testing.T) {
	for _, r := range recordings {
		t.Run(r.name, func(t *testing.T) {
			res := parseFile(t, filepath.Join("testdata", r.name+".out"))
			checkResult(t, res, r.want)
		})
	}
}

func parseFile(t *testing.T, path string) *Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := Parse(f)
	if err != nil {
		t.Fatalf("Parse(%s): %v", path, err)
	}
	return res
}

func checkResult(t *testing.T, res *Result, w want) {
	t.Helper()
	if res.Outcome != w.outcome || res.Name != w.name {
		t.Errorf("outcome %v %q, want %v %q (text %q)", res.Outcome, res.Name, w.outcome, w.name, res.Text)
	}
	if w.text != "" && !strings.Contains(res.Text, w.text) {
		t.Errorf("text %q does not contain %q", res.Text, w.text)
	}
	if w.text == "" && res.Text != "" {
		t.Errorf("text %q, want none", res.Text)
	}
	if res.Distinct != w.distinct || res.Depth != w.depth {
		t.Errorf("distinct %d depth %d, want %d and %d", res.Distinct, res.Depth, w.distinct, w.depth)
	}
	if w.distinct >= 0 && res.Generated < res.Distinct {
		t.Errorf("generated %d < distinct %d", res.Generated, res.Distinct)
	}
	if !strings.HasPrefix(res.Version, "TLC2 Version ") {
		t.Errorf("version line %q", res.Version)
	}
	if !res.Finished {
		t.Error("Finished is false; every recording ends with TLC's Finished message")
	}
	if len(res.Trace) != w.traceLen {
		t.Fatalf("trace of %d states, want %d: %+v", len(res.Trace), w.traceLen, res.Trace)
	}
	for i, st := range res.Trace {
		if st.N != i+1 {
			t.Errorf("state %d numbered %d", i+1, st.N)
		}
	}
	if w.traceLen == 0 {
		return
	}
	first, last := res.Trace[0], res.Trace[len(res.Trace)-1]
	if first.Action != "Initial predicate" || len(first.Vars) == 0 {
		t.Errorf("first state %+v, want the initial predicate with its variables", first)
	}
	if last.Stuttering != w.stutters {
		t.Errorf("last state stuttering %v, want %v", last.Stuttering, w.stutters)
	}
	if last.BackTo != w.backTo {
		t.Errorf("last state back to %d, want %d", last.BackTo, w.backTo)
	}
	if w.lastVar != "" {
		if v, ok := last.Var(w.lastVar); !ok || v != w.lastValue {
			t.Errorf("last state's %s = %q (%v), want %q; state %+v", w.lastVar, v, ok, w.lastValue, last)
		}
	}
}

// TestParseStates checks a counterexample's states in detail: the action
// names, a value that spans several lines, a one-variable spec's states.
func TestParseStates(t *testing.T) {
	res := parseFile(t, "testdata/invariant.out")
	var actions []string
	for _, st := range res.Trace {
		actions = append(actions, st.ActionName())
	}
	want := `Initial predicate,Post,Claim("p1"),Lapse,Plan("p1"),Claim("p2"),Plan("p2"),RunStart("p1"),RunStart("p2")`
	if got := strings.Join(actions, ","); got != want {
		t.Errorf("actions %s\nwant    %s", got, want)
	}
	runs, _ := res.Trace[8].Var("runs")
	if !strings.Contains(runs, "\n") || !strings.Contains(runs, `[holder |-> 2, state |-> "active", prompt |-> 1]`) {
		t.Errorf("runs = %q, want both runs, over two lines", runs)
	}
	if n := len(res.Trace[8].Vars); n != 12 {
		t.Errorf("%d variables in the last state, want the spec's 12", n)
	}
	dl := parseFile(t, "testdata/deadlock.out")
	if v, _ := dl.Trace[0].Var("x"); v != "0" || len(dl.Trace[0].Vars) != 1 {
		t.Errorf("one-variable state %+v, want x = 0", dl.Trace[0])
	}
}

// TestParseBroken feeds the parser output that is not what TLC -tool
// writes, or that stops early.
func TestParseBroken(t *testing.T) {
	ok, err := os.ReadFile("testdata/invariant.out")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		in      string
		wantErr error // nil: parses, to an unfinished OutcomeUnknown result
		errText string
	}{
		{"empty", "", ErrNotToolOutput, ""},
		{"prose only", "Model checking completed. No error has been found.\n", ErrNotToolOutput, ""},
		{"end without start", "@!@!@ENDMSG 2193 @!@!@\n", nil, "ENDMSG without STARTMSG"},
		{"end of another message", "@!@!@STARTMSG 2193:0 @!@!@\nx\n@!@!@ENDMSG 2194 @!@!@\n", nil, "ENDMSG 2194 closes STARTMSG 2193"},
		{"nested start", "@!@!@STARTMSG 2193:0 @!@!@\n@!@!@STARTMSG 2194:0 @!@!@\n", nil, "STARTMSG inside message 2193"},
		{"bad state", "@!@!@STARTMSG 2217:4 @!@!@\nnot a state\n@!@!@ENDMSG 2217 @!@!@\n", nil, "unrecognised state header"},
		{"cut off", string(ok[:len(ok)/2]), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Parse(strings.NewReader(c.in))
			switch {
			case c.wantErr != nil:
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
			case c.errText != "":
				if err == nil || !strings.Contains(err.Error(), c.errText) {
					t.Fatalf("err %v, want one saying %q", err, c.errText)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if res.Finished {
					t.Error("a cut-off run parsed as finished")
				}
			}
		})
	}
}

// TestParseFirstOutcomeWins: an error TLC reports while it prints a
// violation's trace does not hide the violation.
func TestParseFirstOutcomeWins(t *testing.T) {
	in := "@!@!@STARTMSG 2110:1 @!@!@\nInvariant Inv is violated.\n@!@!@ENDMSG 2110 @!@!@\n" +
		"@!@!@STARTMSG 1000:1 @!@!@\nboom\n@!@!@ENDMSG 1000 @!@!@\n" +
		"@!@!@STARTMSG 2186:0 @!@!@\nFinished in 1ms\n@!@!@ENDMSG 2186 @!@!@\n"
	res, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != InvariantViolated || res.Name != "Inv" || !res.Finished {
		t.Errorf("%+v, want Inv violated, finished", res)
	}
}
