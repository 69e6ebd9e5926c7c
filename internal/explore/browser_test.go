package explore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/internal/itf"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// chromium returns the headless browser's path. Without one the test is
// skipped with a reason — unless CI=true or REQUIRE_CHROMIUM=1, where a
// missing browser fails it: the page must have been seen in a browser.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" || os.Getenv("REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no chromium on PATH (install Debian's chromium package); CI=true or REQUIRE_CHROMIUM=1 requires the browser test")
	}
	t.Skip("no chromium on PATH: the explorer's browser test is skipped (set REQUIRE_CHROMIUM=1 to make this a failure)")
	return ""
}

// dumpDOM loads the page at url in headless Chromium, in a 1400x1000
// window, and returns the DOM after its script ran. It waits at most a minute, and fails naming what
// it waited for.
func dumpDOM(t *testing.T, browser, url string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,1000", "--virtual-time-budget=5000", "--dump-dom", url)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("chromium did not dump %s within a minute", url)
	}
	require.NoError(t, err, "chromium --dump-dom %s: %s", url, errb.String())
	dom := out.String()
	require.Contains(t, dom, `data-ready="1"`, "the page's script did not finish: %s", url)
	return dom
}

func writePage(t *testing.T, tr Trace) string {
	spec, err := os.ReadFile("../../" + SpecPath)
	require.NoError(t, err)
	return writePageWith(t, tr, ActionTexts(string(spec)))
}

func writePageWith(t *testing.T, tr Trace, actions map[string]string) string {
	path := filepath.Join(t.TempDir(), "page.html")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, WriteHTML(f, tr, actions))
	require.NoError(t, f.Close())
	return path
}

// The explorer in a real browser: a Go trace's page selects the line its
// URL names and shows the spec's state after it, the variables it changed
// highlighted; the keyboard moves between lines; a rejected line shows the
// failing guard marked in the action's TLA+ text; a TLC counterexample is
// read in the same view.
func TestExplorerInChromium(t *testing.T) {
	browser := chromium(t)
	goPage := writePage(t, readGo(t, "testdata/go-shrunk-I1.ndjson"))

	dom := dumpDOM(t, browser, "file://"+goPage+"#line=6")
	require.Contains(t, dom, `State after line 6: RunStart(p2)`)
	require.Contains(t, dom, `<td id="v-taken" class="changed">1</td>`)
	require.Contains(t, dom, `<td id="v-consumed" class="changed">&lt;&lt;1&gt;&gt;</td>`)
	require.Contains(t, dom, `<td id="v-pc-p2" class="changed">"running"</td>`)
	require.Contains(t, dom, `<td id="v-pc-p1" class="">"planned"</td>`, "a variable the line did not change is not highlighted")
	require.Contains(t, dom, `<td id="v-lease" class="">[holder |-&gt; 2, expired |-&gt; FALSE]</td>`)

	// Two presses of j from line 4 land on line 6.
	dom = dumpDOM(t, browser, "file://"+goPage+"#line=4&keys=jj")
	require.Contains(t, dom, `State after line 6: RunStart(p2)`)

	// The inferred lapse is a row of its own, with its state.
	dom = dumpDOM(t, browser, "file://"+goPage+"#line=0&lapse")
	require.Contains(t, dom, `State after the inferred Lapse: Lapse`)
	require.Contains(t, dom, `<td id="v-lease" class="changed">[holder |-&gt; 1, expired |-&gt; TRUE]</td>`)

	// Opened without a fragment, the page selects the rejected line.
	dom = dumpDOM(t, browser, "file://"+goPage)
	require.Contains(t, dom, `No spec state after line 7: RunStart(p1)`)
	require.Contains(t, dom, `<code>Fenced =&gt; HasLease(p)</code>`)
	// The checker names the conjunct Fenced => HasLease(p); the spec may
	// call the constant FenceStart: the line is marked either way.
	require.Regexp(t, `<mark>    /\\ \w+ =&gt; HasLease\(p\)</mark>`, dom, "the failing conjunct is not marked in the action's text")
	require.Equal(t, 1, strings.Count(dom, "<mark>"), "one line marked")

	tlc, err := os.Open("testdata/tlc-unfenced-I1.json")
	require.NoError(t, err)
	defer tlc.Close()
	tr, err := ReadTLC(tlc, "tlc-unfenced-I1.json")
	require.NoError(t, err)
	dom = dumpDOM(t, browser, "file://"+writePage(t, tr)+"#line=9")
	require.Contains(t, dom, `State 9, after RunStart(p2)`)
	require.Contains(t, dom, `<td id="v-consumed" class="changed">&lt;&lt;2, 0, 0&gt;&gt;</td>`)
	require.Contains(t, dom, `<code>I1_ConsumedAtMostOnce</code>`)
	require.True(t, strings.Contains(dom, `id="v-run-p2" class="changed">2</td>`), "run[p2] after the second RunStart")
}

// layout is what the page's #layout hook measured.
type layout struct {
	TimelineFits, PanelFits, Scrolled, TheadAtTop bool
	SelectedOffCenter, RowHeight, HeaderTop       int
	Clipped                                       int
}

var layoutAttr = regexp.MustCompile(`data-layout="([^"]*)"`)

func measureLayout(t *testing.T, browser, url string) layout {
	dom := dumpDOM(t, browser, url)
	m := layoutAttr.FindStringSubmatch(dom)
	require.NotNil(t, m, "the page wrote no data-layout: %s", url)
	var l layout
	require.NoError(t, json.Unmarshal([]byte(html.UnescapeString(m[1])), &l), m[1])
	return l
}

// longTrace is a thread of n steps over three processes, the poster and
// the lapse lane, one step's cell and one state's value far longer than
// a lane or the panel is wide.
func longTrace(n int) Trace {
	th := Thread{Name: "t1", Lanes: []string{"p1", "p2", "p3", "poster", LapseLane}}
	long := strings.Repeat("m1234567890", 30)
	for i := 0; i < n; i++ {
		st := map[string]itf.Value{}
		for _, v := range Vars {
			st[v] = itf.Int(int64(i))
		}
		for _, v := range ProcVars {
			st[v] = itf.Map([]itf.Value{itf.Str("p1"), itf.Str("p2"), itf.Str("p3")}, []itf.Value{itf.Int(0), itf.Int(1), itf.Str(long)})
		}
		s := Step{Line: i + 1, Tick: uint64(i + 1), Action: "Post", Lane: i % len(th.Lanes), Text: fmt.Sprintf("Post m%d", i+1), Class: "plain", State: st}
		if i == n/2 {
			s.Text = "Post " + long
			st["reqs"] = itf.Str(long)
		}
		th.Steps = append(th.Steps, s)
	}
	return Trace{Title: "long", Source: SourceGo, File: "long.ndjson", Verdict: "accepted", Threads: []Thread{th}}
}

// At 1400x1000 the page fits: every lane of the fixtures' timelines (the
// lapse lane last) is in view without scrolling sideways; a long value
// wraps in the panel and is cut with an ellipsis in its lane, the whole
// value in its title; #line=N brings line N to the timeline's middle;
// and with the timeline scrolled to its end, the page header and the
// table header have not moved.
func TestExplorerLayoutInChromium(t *testing.T) {
	browser := chromium(t)
	goPage := writePage(t, readGo(t, "testdata/go-shrunk-I1.ndjson"))
	l := measureLayout(t, browser, "file://"+goPage+"#line=6&layout")
	require.True(t, l.TimelineFits, "the Go fixture's lanes (the lapse lane last) do not fit the timeline: %+v", l)
	require.True(t, l.PanelFits, "%+v", l)
	for _, f := range []string{"testdata/tlc-unfenced-I1.json", "testdata/tlc-abandon-NoLiveAbandon.json"} {
		l := measureLayout(t, browser, "file://"+writePage(t, readTLCFile(t, f))+"#layout")
		require.True(t, l.TimelineFits, "%s: %+v", f, l)
		require.True(t, l.PanelFits, "%s: %+v", f, l)
	}

	page := writePage(t, longTrace(300))
	l = measureLayout(t, browser, "file://"+page+"#line=150&layout")
	require.True(t, l.TimelineFits, "a long value widens the timeline: %+v", l)
	require.True(t, l.PanelFits, "a long value widens the panel: %+v", l)
	require.Zero(t, l.Clipped, "a cell cut short without its whole value in its title")
	require.LessOrEqual(t, l.SelectedOffCenter, l.RowHeight, "#line=150 is not brought to the timeline's middle: %+v", l)
	require.True(t, l.Scrolled, "the timeline does not scroll on its own: %+v", l)
	require.Zero(t, l.HeaderTop, "the page header scrolled away with the timeline")
	require.True(t, l.TheadAtTop, "the table header did not stick to the timeline's top")

	dom := dumpDOM(t, browser, "file://"+page+"#line=151")
	require.Contains(t, dom, `title="Post m1234567890m1234567890`, "the long cell's title holds the whole value")
}

func readTLCFile(t *testing.T, path string) Trace {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	tr, err := ReadTLC(f, path)
	require.NoError(t, err)
	return tr
}

// A page says where its TLA+ text came from: the repository's spec, or
// outside the repository the copy built into the binary; a page written
// without any says so in red. A TLC counterexample's page shows the
// constants its states reveal: the fence a step proves off.
func TestExplorerSpecAndConstantsInChromium(t *testing.T) {
	browser := chromium(t)
	tr := readTLCFile(t, "testdata/tlc-abandon-NoLiveAbandon.json")

	text, from, err := LoadSpec("", t.TempDir())
	require.NoError(t, err)
	tr.SpecFrom = from
	dom := dumpDOM(t, browser, "file://"+writePageWith(t, tr, ActionTexts(text))+"#line=8")
	require.Contains(t, dom, `TLA+ text: the copy of spec/ThreadClaimLapse.tla built into this binary`)
	require.Contains(t, dom, `FenceAbandon =&gt; HasLease(p)`, "the action's text from the embedded copy")
	require.Regexp(t, `id="c-FenceAbandon"[^>]*>[^<]*FenceAbandon = FALSE \(state 8: Abandon by p1 without the lease\)`, dom)
	require.Regexp(t, `id="c-FenceStart"[^>]*>[^<]*FenceStart = unknown`, dom)
	require.Contains(t, dom, `Procs = {"p1", "p2"}`)

	tr.SpecFrom = ""
	dom = dumpDOM(t, browser, "file://"+writePageWith(t, tr, nil)+"#line=8")
	require.Contains(t, dom, `<span class="missing">no TLA+ text: the page was written without the spec</span>`)
}

// A page of a long trace (as show writes it past -rows, or for -lines):
// the lines kept, followed from the thread's first line by a Follower that
// kept no other, show the same state as the whole trace's page; the page
// says it holds a part and how to get the rest; and its verdict is the
// whole trace's, marked as a rejection though the rejected line is on
// another page.
func TestExplorerPagedInChromium(t *testing.T) {
	browser := chromium(t)
	const path = "testdata/go-shrunk-I1.ndjson"
	lines, err := tracecheck.ReadFile(path)
	require.NoError(t, err)
	_, err = tracecheck.Check(lines, tracecheck.WithFile(path))
	var v *tracecheck.Violation
	require.ErrorAs(t, err, &v)
	th := tracecheck.Order(lines)[0]
	info := &ThreadInfo{}
	for _, l := range th.Lines {
		info.Add(l.N, l.Ev)
	}
	fl := NewFollower(info, v)
	var steps []Step
	for _, l := range th.Lines {
		_, st := fl.Line(l.N, l.Ev, l.N >= 4 && l.N <= 6)
		steps = append(steps, st...)
	}
	const note = "showing 3 of the 8 lines selected, up to line 6; the next page: tracecheck show -lines 7:9 go-shrunk-I1.ndjson"
	tr := Trace{Title: path, Source: SourceGo, File: path, Verdict: GoVerdict(v), Paged: note,
		Threads: []Thread{{Name: info.Name, Lanes: fl.Lanes(), Holders: fl.Holders, Steps: steps}}}
	page := writePage(t, tr)

	dom := dumpDOM(t, browser, "file://"+page+"#line=6")
	require.Contains(t, dom, `<div class="paged" id="paged">`+html.EscapeString(note)+`</div>`, "the page says it is a part")
	require.Regexp(t, `class="verdict bad"[^>]*>rejected at line 7`, dom, "the verdict is the whole trace's, marked")
	require.Contains(t, dom, `State after line 6: RunStart(p2)`)
	require.Contains(t, dom, `<td id="v-taken" class="changed">1</td>`)
	require.Contains(t, dom, `<td id="v-pc-p2" class="changed">"running"</td>`)
	require.Contains(t, dom, `<td id="v-lease" class="">[holder |-&gt; 2, expired |-&gt; FALSE]</td>`)
	require.Equal(t, len(steps), strings.Count(dom, `<tr class="step`), "the page's rows are its steps, no line before it")
	require.Less(t, len(steps), 6, "lines 1 to 3 and Init are not on the page")

	// The whole trace's page says nothing of paging.
	dom = dumpDOM(t, browser, "file://"+writePage(t, readGo(t, path))+"#line=6")
	require.Contains(t, dom, `<div class="paged" id="paged"></div>`)
}
