package explore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

// dumpDOM loads the page at url in headless Chromium and returns the DOM
// after its script ran. It waits at most a minute, and fails naming what
// it waited for.
func dumpDOM(t *testing.T, browser, url string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", url)
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
	path := filepath.Join(t.TempDir(), "page.html")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, WriteHTML(f, tr, ActionTexts(string(spec))))
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
