package tracecheck_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/tlc"
	"github.com/threadclaim/threadclaim/tracecheck"
)

var updateExpected = flag.Bool("update-expected", false, "rewrite the expected-lines files from the Go checker's verdicts")

// rejectedAt returns the line at which the Go reader or checker rejects
// the trace file, 0 if it accepts it.
func rejectedAt(t *testing.T, path string, opts ...tracecheck.Option) int {
	t.Helper()
	_, err := tracecheck.CheckFile(path, opts...)
	var v *tracecheck.Violation
	var le *tracecheck.LineError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &v):
		return v.Line
	case errors.As(err, &le):
		return le.Line
	}
	require.NoError(t, err)
	return 0
}

// fixtureDirs are the directories of trace fixtures: this package's,
// and tla/testdata with each of its subdirectories that holds traces
// (tlc.FixtureDirs, as scripts/tlc has them), whose "fences" file names
// the fences its traces are held to (every fence when there is none).
func fixtureDirs(t *testing.T) []string {
	t.Helper()
	tla := tlc.FixtureDirs("..")
	require.Greater(t, len(tla), 1, "no tla/testdata subdirectory of traces")
	return append([]string{"testdata"}, tla...)
}

// dirFences are the fences a fixture directory's traces are held to.
func dirFences(t *testing.T, dir string) core.Fences {
	t.Helper()
	f, err := tlc.ReadFences(filepath.Join(dir, "fences"))
	require.NoError(t, err)
	return f
}

// Every bad-* fixture, here and in tla/testdata and its subdirectories
// (each held to its directory's fences), is rejected by the Go checker at
// the line its directory's expected-lines names; scripts/tlc requires
// TLC's trace spec to reject it at that same line. Every ok-* fixture is
// accepted.
func TestFixturesExpectedLines(t *testing.T) {
	for _, dir := range fixtureDirs(t) {
		fences := dirFences(t, dir)
		files, err := filepath.Glob(filepath.Join(dir, "*.ndjson"))
		require.NoError(t, err)
		require.NotEmpty(t, files, dir)
		want := map[string]int{}
		var names []string
		for _, f := range files {
			base := filepath.Base(f)
			at := rejectedAt(t, f, tracecheck.WithFences(fences))
			switch {
			case strings.HasPrefix(base, "ok-"):
				require.Zero(t, at, "%s is rejected", f)
			case strings.HasPrefix(base, "bad-"):
				require.NotZero(t, at, "%s is accepted", f)
				want[base] = at
				names = append(names, base)
			default:
				t.Fatalf("%s: name a fixture ok-* or bad-*", f)
			}
		}
		sort.Strings(names)
		path := filepath.Join(dir, "expected-lines")
		if *updateExpected {
			// The file's own leading comments stay (a subdirectory's say
			// which fences its traces get past); a new file gets these.
			header := "# The line at which the Go trace checker rejects each bad-* trace; scripts/tlc\n# requires TLC to reject it at the same line. Regenerate: go test ./tracecheck -run ExpectedLines -update-expected\n"
			if old, err := os.ReadFile(path); err == nil {
				var kept strings.Builder
				for _, l := range strings.SplitAfter(string(old), "\n") {
					if !strings.HasPrefix(l, "#") {
						break
					}
					kept.WriteString(l)
				}
				if kept.Len() > 0 {
					header = kept.String()
				}
			}
			var b strings.Builder
			b.WriteString(header)
			for _, n := range names {
				fmt.Fprintf(&b, "%s %d\n", n, want[n])
			}
			require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err, "run: go test ./tracecheck -run ExpectedLines -update-expected")
		got := map[string]int{}
		for _, l := range strings.Split(string(data), "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || strings.HasPrefix(f[0], "#") {
				continue
			}
			require.Len(t, f, 2, "%s: %q", path, l)
			n, err := strconv.Atoi(f[1])
			require.NoError(t, err)
			got[f[0]] = n
		}
		require.Equal(t, want, got, "%s disagrees with the Go checker", path)
	}
}
