package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// bigTrace writes a Go trace of at least size bytes: the accepted
// fixtures' lines again and again, each copy's threads renamed, so that
// it has many threads and is accepted.
func bigTrace(t *testing.T, size int) string {
	t.Helper()
	files, err := filepath.Glob("../../tracecheck/testdata/ok-*.ndjson")
	require.NoError(t, err)
	var b bytes.Buffer
	for k := 0; b.Len() < size; k++ {
		for i, f := range files {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			b.Write(threadName.ReplaceAll(data, []byte(fmt.Sprintf(`"thread":"c%d-%d-$1"`, k, i))))
		}
	}
	p := filepath.Join(t.TempDir(), "big.ndjson")
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	return p
}

var threadName = regexp.MustCompile(`"thread":"([^"]*)"`)

// allocated is how many bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// show streams a Go trace: it holds what validate holds (the checker's
// state of each thread) and the page, not the trace. Shown a page of a
// 16 MB trace (-lines 1:10, or the first -rows lines, as text or as the
// explorer page) it allocates at most twice what validate does plus twice
// the file's size in all, where reading the whole trace (as show did)
// allocates the file, its lines, and a view and a state for every line.
func TestShowStreamsABigTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 16 MB trace (skipped with -short)")
	}
	path := bigTrace(t, 16<<20)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	size := uint64(fi.Size())
	validate := allocated(func() {
		_, err := tracecheck.CheckFile(path)
		require.NoError(t, err)
	})
	t.Logf("validate: %.1f MB allocated for a %d MB trace", float64(validate)/(1<<20), size>>20)
	for _, o := range []showOptions{
		{lines: lineRange{1, 10}, width: 28},
		{width: 28, rows: 500},
		{width: 28, rows: 500, htmlOut: filepath.Join(t.TempDir(), "page.html")},
	} {
		var fig showFigures
		var err error
		n := allocated(func() { fig, err = show(path, o, io.Discard) })
		require.NoError(t, err)
		require.Equal(t, "accepted by the Go trace checker", fig.Verdict, "the verdict is the whole trace's")
		t.Logf("show %+v: %.1f MB allocated for a %d MB trace", o, float64(n)/(1<<20), size>>20)
		require.LessOrEqual(t, n, 2*validate+2*size, "show %+v allocated %d MB for a %d MB trace, validate %d MB: it holds the trace", o, n>>20, size>>20, validate>>20)
	}
}

// A page of a trace is the same rows as the whole trace shows for those
// lines: each thread is followed from its first line, whatever the page.
func TestShowPageIsTheWholeTracesRows(t *testing.T) {
	files, err := filepath.Glob("../../tracecheck/testdata/*-*.ndjson")
	require.NoError(t, err)
	row := regexp.MustCompile(`(?m)^\s+(\d+)\s+\d+ │.*$`)
	compared := 0
	for _, f := range files {
		if strings.Contains(f, "malformed") {
			continue
		}
		_, whole, _ := runCLI("show", "-rows", "0", f)
		rows := row.FindAllString(whole, -1)
		if len(rows) < 6 {
			continue
		}
		code, page, errs := runCLI("show", "-lines", "3:6", f)
		require.Contains(t, []int{exitOK, exitFailed}, code, "%s: %s", f, errs)
		got := row.FindAllString(page, -1)
		require.Len(t, got, 4, "%s: the page has lines 3 to 6:\n%s", f, page)
		for _, r := range got {
			require.Contains(t, whole, r, "%s: a row of the page is not the whole trace's", f)
		}
		compared++
	}
	require.Greater(t, compared, 10, "fixtures compared")
}

// A selection longer than -rows is paged: the text and the page say so
// and give the command for the next page, which shows the next lines.
func TestShowPagesWithRows(t *testing.T) {
	fixture := "../../tracecheck/testdata/ok-run-ask-reply.ndjson"
	page := filepath.Join(t.TempDir(), "page.html")
	code, out, errs := runCLI("show", "-rows", "3", "-html", page, fixture)
	require.Equal(t, exitOK, code, "%s%s", out, errs)
	require.Contains(t, out, "showing 3 of the ")
	require.Contains(t, out, "the next page: tracecheck show -lines 4:6 "+fixture)
	require.NotRegexp(t, `(?m)^\s+4\s+\d+ │`, out)
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	require.Contains(t, string(b), `"paged":"showing 3 of the `, "the page says it holds a part")

	code, out, errs = runCLI("show", "-lines", "4:6", fixture)
	require.Equal(t, exitOK, code, "%s%s", out, errs)
	require.Regexp(t, `(?m)^\s+4\s+\d+ │`, out)
	require.NotRegexp(t, `(?m)^\s+3\s+\d+ │`, out)

	code, _, errs = runCLI("show", "-rows", "-1", fixture)
	require.Equal(t, exitUsage, code, errs)
	code, out, _ = runCLI("show", "-thread", "nope", fixture)
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
}
