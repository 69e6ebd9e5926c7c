package explore

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/internal/itf"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// The tests of the review pass (pass 15): what a spec reviewer reads on
// the page or the timeline, pinned where no other test held it.

// viewOf draws a fixture's first thread.
func viewOf(t *testing.T, path string) View {
	lines, err := tracecheck.ReadFile(path)
	require.NoError(t, err)
	return BuildView(tracecheck.Order(lines)[0], nil)
}

// The fifteenth mutation pass's mutants 10-13, 15, 16, 22: a timeline cell's run, refusing lease, "←",
// consume class, holder numbering, lapse mark, and the lanes' order.
func TestReviewTimelineCells(t *testing.T) {
	v := viewOf(t, "../../tracecheck/testdata/ok-fenced-refusals.ndjson")
	require.Equal(t, []string{"poster", "p1", "p2"}, v.Lanes, "lanes in the order the processes first appear")
	want := []struct {
		lane        int
		text, class string
	}{
		{0, "Post m1", "plain"}, {1, "Claim h1", "plain"}, {1, "Plan run m1", "plain"},
		{2, "Claim h2 ⚡ h1 lapsed", "lapse"}, {2, "Plan run m1", "plain"}, {2, "RunStart r1 ← m1", "consume"},
		{1, "StartFenced m1 ✗ lease h2", "refuse"}, {2, "Ask r1 q1", "plain"}, {2, "RunEnd r1", "plain"},
		{0, "Post m2", "plain"}, {2, "Plan reply q1 ← m2", "plain"}, {1, "Claim h3 ⚡ h2 lapsed", "lapse"},
		{1, "Plan reply q1 ← m2", "plain"}, {1, "Reply q1 ← m2", "consume"}, {2, "ReplyFenced q1 m2 ✗ lease h3", "refuse"},
		{0, "Post m3", "plain"}, {1, "Plan run m3", "plain"}, {1, "RunStart r2 ← m3", "consume"},
		{2, "Claim h4 ⚡ h3 lapsed", "lapse"}, {2, "Abandon r2", "plain"}, {1, "EndRefused r2 ✗ abandoned", "refuse"},
		{1, "Claim h5 ⚡ h4 lapsed", "lapse"}, {2, "Release h4 (lease is h5's)", "plain"}, {1, "Release h5", "plain"},
	}
	require.Len(t, v.Cells, len(want))
	for i, w := range want {
		c := v.Cells[i]
		require.Equal(t, i+1, c.N)
		require.Equal(t, w.text, c.Text, "line %d", c.N)
		require.Equal(t, w.class, c.Class, "line %d", c.N)
		require.Equal(t, w.lane, c.Lane, "line %d", c.N)
	}
	v = viewOf(t, "../../tracecheck/testdata/ok-run-output.ndjson")
	require.Equal(t, "Claim h1", v.Cells[1].Text, "the first holder is h1")
	require.Equal(t, "RunEnd r1", v.Cells[4].Text)
}

// The fifteenth mutation pass's mutants 17, 18, 19, 20: a Go trace's steps: Post taken by no process,
// each line's tick, and the inferred Lapse in a lane of its own, the
// last, named LapseLane.
func TestReviewGoSteps(t *testing.T) {
	th := readGo(t, "testdata/go-shrunk-I1.ndjson").Threads[0]
	require.Equal(t, []string{"p1", "poster", "p2", LapseLane}, th.Lanes)
	var labels []string
	var ticks []uint64
	for _, s := range th.Steps {
		labels = append(labels, s.Label())
		ticks = append(ticks, s.Tick)
		if s.Inferred {
			require.Equal(t, 3, s.Lane, "the inferred Lapse is drawn in LapseLane")
		}
	}
	require.Equal(t, []string{"Init", "Claim(p1)", "Post", "Lapse", "Claim(p2)", "Plan(p1)", "Plan(p2)", "RunStart(p2)", "RunStart(p1)"}, labels)
	require.Equal(t, []uint64{0, 1, 2, 0, 3, 3, 3, 4, 5}, ticks)
}

// The fifteenth mutation pass's mutant 21: past a line after which an invariant fails, the spec has no
// state: the line itself keeps the state it reached, the lines after it
// are shown without one.
func TestReviewNoStatePastAnInvariant(t *testing.T) {
	lines, err := tracecheck.ReadFile("../../tracecheck/testdata/ok-run-output.ndjson")
	require.NoError(t, err)
	th := tracecheck.Order(lines)[0]
	l := th.Lines[3] // RunStart
	v := &tracecheck.Violation{Line: l.N, Event: *l.Ev, Action: l.Ev.Action, Kind: tracecheck.ErrInvariant,
		Rule: "I1_ConsumedAtMostOnce", Failed: []string{"I1_ConsumedAtMostOnce"}}
	steps := FromGo("f", lines, v).Threads[0].Steps
	seen := false
	for _, s := range steps {
		switch {
		case s.Line == l.N:
			seen = true
			require.NotNil(t, s.Rejected)
			require.NotNil(t, s.State, "the state the invariant fails in")
		case seen:
			require.Nil(t, s.State, "line %d after the invariant's failure has a state", s.Line)
		default:
			require.NotNil(t, s.State, "line %d", s.Line)
		}
	}
	require.True(t, seen)
}

// The fifteenth mutation pass's mutants 25, 26, 27, 31: a TLC step's cell names the message RunStart
// consumed, the request and message Reply answered, the holder Claim
// took, and a refusal is drawn as one.
func TestReviewTLCCells(t *testing.T) {
	tr := readTLCFile(t, "testdata/tlc-unfenced-I1.json")
	var texts []string
	for _, s := range tr.Threads[0].Steps {
		texts = append(texts, s.Text)
	}
	require.Equal(t, []string{"Init", "Post m1", "Claim h1", "Lapse h1", "Plan run m1", "Claim h2", "Plan run m1", "RunStart r1 ← m1", "RunStart r2 ← m1"}, texts)

	plan := func(kind string, msg, req int64) itf.Value {
		return itf.Map([]itf.Value{itf.Str("p1")}, []itf.Value{itf.Rec([]string{"kind", "msg", "req"}, []itf.Value{itf.Str(kind), itf.Int(msg), itf.Int(req)})})
	}
	before := map[string]itf.Value{"plan": plan("reply", 2, 1)}
	after := map[string]itf.Value{"plan": plan("none", 0, 0)}
	text, class := tlcCell(Step{Proc: "p1"}, tlcAction{Name: "Reply"}, before, after)
	require.Equal(t, "Reply q1 ← m2", text)
	require.Equal(t, "consume", class)
	_, class = tlcCell(Step{Proc: "p1"}, tlcAction{Name: "StartFenced"}, before, after)
	require.Equal(t, "refuse", class)
}

// The fifteenth mutation pass's mutant 28: every invariant the last state breaks is listed, I3 among
// them.
func TestReviewTLCInvariantsListed(t *testing.T) {
	steps := readTLCFile(t, "testdata/tlc-steerstart-SteeringException.json").Threads[0].Steps
	require.Equal(t, []string{"I1_ConsumedAtMostOnce", "I3_OneActiveRun", "SteeringException", "GivenAtMostOnce"}, steps[len(steps)-1].Rejected.Failed)
}

// The fifteenth mutation pass's mutants 32, 33: the ITF check of a Go trace finds a lease's expiry or
// liveAbandoned written wrong.
func TestReviewITFCheckFindsExpiryAndLiveAbandoned(t *testing.T) {
	tr := readGo(t, "../../tracecheck/testdata/ok-abandon-fenced.ndjson")
	for _, c := range []struct {
		name string
		set  func(map[string]itf.Value)
	}{
		{"lease.expired", func(v map[string]itf.Value) {
			h, _ := v["lease"].Field("holder")
			e, _ := v["lease"].Field("expired")
			v["lease"] = itf.Rec([]string{"holder", "expired"}, []itf.Value{h, itf.Bool(!e.Bool)})
		}},
		{"liveAbandoned", func(v map[string]itf.Value) { v["liveAbandoned"] = itf.Bool(!v["liveAbandoned"].Bool) }},
	} {
		wrong := tr.ITF(0)
		last := len(wrong.States) - 1
		vals := map[string]itf.Value{}
		for k, v := range wrong.States[last].Values {
			vals[k] = v
		}
		c.set(vals)
		wrong.States[last].Values = vals
		doc, err := wrong.MarshalJSON()
		require.NoError(t, err)
		require.ErrorContains(t, tr.CheckITF(0, doc), c.name+" is", c.name)
	}
}

// The fifteenth mutation pass's mutant 34: an action's text starts with the comment above its
// definition.
func TestReviewActionTextKeepsItsComment(t *testing.T) {
	text, _, err := LoadSpec("", ".")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(ActionTexts(text)["RunStart"], `\* p records the start of the planned run`), ActionTexts(text)["RunStart"])
}

// The fifteenth mutation pass's mutant 1: the page's <title> escapes the trace's name.
func TestReviewTitleEscaped(t *testing.T) {
	tr := readGo(t, "testdata/go-shrunk-I1.ndjson")
	tr.Title = `</title><script>alert(1)</script>`
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, tr, nil))
	require.NotContains(t, b.String(), "<script>alert(1)")
	require.Contains(t, b.String(), "<title>trace explorer: &lt;/title&gt;&lt;script&gt;")
}

// twoThreads is a Go-like trace of two threads, each with its Init
// (line 0) and three lines.
func twoThreads() Trace {
	tr := Trace{Title: "two", Source: SourceGo, File: "two.ndjson", Verdict: "accepted"}
	for ti, name := range []string{"a", "b"} {
		th := Thread{Name: name, Lanes: []string{"poster"}}
		st := map[string]itf.Value{}
		for _, v := range Vars {
			st[v] = itf.Int(0)
		}
		th.Steps = append(th.Steps, Step{Action: "Init", Lane: -1, Text: "Init", Class: "plain", State: st})
		for i := 1; i <= 3; i++ {
			n := ti*3 + i
			th.Steps = append(th.Steps, Step{Line: n, Tick: uint64(n), Action: "Post", Lane: 0, Text: "Post", Class: "plain", State: st})
		}
		tr.Threads = append(tr.Threads, th)
	}
	return tr
}

var selectedRow = regexp.MustCompile(`<tr class="[^"]*\bsel\b[^"]*" id="(s-\d+-\d+)"`)

func selected(t *testing.T, dom string) string {
	m := selectedRow.FindStringSubmatch(dom)
	require.NotNil(t, m, "no row selected")
	return m[1]
}

// What a reviewer reads of a rejection and of a page in a real browser:
// mutants 35 (the rejected row outlined), 36 (the rows after it greyed),
// 37 (its note), 41 (guard or invariant), 6 (the detail), 7 (the
// checker's state), 8 and 42 (the other failing invariants), 5 (the tick
// column), 4 (a TLC verdict in red), 9 (the porcupine link), 38 (the
// title as text, not markup), 39 (k moves up), 40 (#thread= picks the
// thread), 43 (j past a thread's end goes to the next).
func TestReviewPageInChromium(t *testing.T) {
	browser := chromium(t)
	tr := readGo(t, "testdata/go-shrunk-I1.ndjson")
	// a line after the rejected one, as a trace has when it goes on
	tr.Threads[0].Steps = append(tr.Threads[0].Steps, Step{Line: 8, Tick: 6, Action: "Release", Proc: "p2", Lane: 2, Text: "Release h2", Class: "plain"})
	tr.Title = `<img id="injected">`
	tr.Porcupine = "porcupine-history.html"
	page := writePage(t, tr)

	dom := dumpDOM(t, browser, "file://"+page)
	require.Equal(t, "s-0-8", selected(t, dom), "opens on the rejected line")
	require.Contains(t, dom, `✗ rejected: guard <code>Fenced =&gt; HasLease(p)</code> fails`)
	require.Contains(t, dom, `<div>lease.holder is h2, hold[p1] is h1, pc[p1] is planned</div>`, "the rejection's detail")
	require.Contains(t, dom, `<div class="help">the checker's state: thread "t1"`, "the checker's state")

	dom = dumpDOM(t, browser, "file://"+page+"#line=6")
	require.Contains(t, dom, `<tr class="step bad" id="s-0-8">`, "the rejected row is outlined")
	require.Contains(t, dom, `<tr class="step dead" id="s-0-9">`, "the row after the rejected one is greyed")
	require.Contains(t, dom, `✗ Fenced =&gt; HasLease(p)</td>`, "the rejected row's note")
	require.Contains(t, dom, `id="s-0-7"><td class="num">6</td><td class="num">4</td>`, "line 6's tick")
	require.Regexp(t, `<a href="porcupine-history.html" id="porcupine-link">`, dom)
	require.Regexp(t, `<h1 id="title">[^<]*&lt;img id="injected"&gt;</h1>`, dom, "the title is text")
	require.NotContains(t, dom, `<img id="injected"`)

	dom = dumpDOM(t, browser, "file://"+page+"#line=6&keys=k")
	require.Contains(t, dom, `State after line 5: Plan(p2)`, "k moves up a line")

	tlc := writePage(t, readTLCFile(t, "testdata/tlc-unfenced-I1.json"))
	dom = dumpDOM(t, browser, "file://"+tlc+"#line=9")
	require.Regexp(t, `class="verdict bad"[^>]*>invariant I1_ConsumedAtMostOnce violated`, dom, "a TLC counterexample's violation is in red")
	require.Contains(t, dom, `✗ rejected: invariant <code>I1_ConsumedAtMostOnce</code> fails`)
	require.Contains(t, dom, `<div>also: I3_OneActiveRun, GivenAtMostOnce</div>`)

	two := writePage(t, twoThreads())
	require.Equal(t, "s-1-0", selected(t, dumpDOM(t, browser, "file://"+two+"#thread=b&line=0")), "#thread=b selects b's Init")
	require.Equal(t, "s-0-0", selected(t, dumpDOM(t, browser, "file://"+two+"#thread=a&line=0")))
	require.Equal(t, "s-1-0", selected(t, dumpDOM(t, browser, "file://"+two+"#thread=a&line=3&keys=j")), "j at a thread's end goes to the next thread")
}

// A TLC counterexample's Steer cell says the message was given, as a Go
// trace's does (CellText): "←" marks a message consumed, and steering is
// consumed only by its record (SteerRecord).
func TestTLCSteerGivenNotConsumed(t *testing.T) {
	var steer, record []string
	for _, f := range []string{"testdata/tlc-giventwice-GivenAtMostOnce.json", "testdata/tlc-steerstart-SteeringException.json"} {
		for _, s := range readTLCFile(t, f).Threads[0].Steps {
			switch {
			case strings.HasPrefix(s.Text, "SteerRecord "):
				record = append(record, s.Text)
			case strings.HasPrefix(s.Text, "Steer "):
				steer = append(steer, s.Text)
			}
		}
	}
	require.NotEmpty(t, steer, "no Steer step in the fixtures")
	for _, s := range steer {
		require.Regexp(t, `^Steer r\d+ given m\d+$`, s)
	}
	for _, s := range record {
		require.Regexp(t, `^SteerRecord r\d+ ← m\d+$`, s)
	}
}
