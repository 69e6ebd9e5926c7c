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

	"github.com/threadclaim/threadclaim/tracecheck"
)

var updateExpected = flag.Bool("update-expected", false, "rewrite the expected-lines files from the Go checker's verdicts")

// rejectedAt returns the line at which the Go reader or checker rejects
// the trace file, 0 if it accepts it.
func rejectedAt(t *testing.T, path string) int {
	t.Helper()
	_, err := tracecheck.CheckFile(path)
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

// Every bad-* fixture, here and in tla/testdata, is rejected by the Go
// checker at the line its directory's expected-lines names; scripts/tlc
// requires TLC's trace spec to reject it at that same line. Every ok-*
// fixture is accepted.
func TestFixturesExpectedLines(t *testing.T) {
	for _, dir := range []string{"testdata", "../tla/testdata"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.ndjson"))
		require.NoError(t, err)
		require.NotEmpty(t, files, dir)
		want := map[string]int{}
		var names []string
		for _, f := range files {
			base := filepath.Base(f)
			at := rejectedAt(t, f)
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
			var b strings.Builder
			b.WriteString("# The line at which the Go trace checker rejects each bad-* trace; scripts/tlc\n# requires TLC to reject it at the same line. Regenerate: go test ./tracecheck -run ExpectedLines -update-expected\n")
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
