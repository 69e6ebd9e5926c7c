package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A file that turns malformed after its first violation is bad input
// (exit 2), with -shrink as without, and no story is written: the
// checker stops at the violation, and validate exited 1 (4 with -shrink,
// the shrinker failing on the line) where the README says 2.
func TestValidateMalformedAfterViolation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.ndjson")
	lines := []string{
		`{"tick":1,"read":false,"action":"Post","thread":"t1","proc":"poster","holder":"","msg":1,"req":0,"run":0,"taken":0,"lease":""}`,
		`{"tick":2,"read":false,"action":"RunStart","thread":"t1","proc":"p1","holder":"h1","msg":1,"req":0,"run":1,"taken":1,"lease":"h1"}`,
		`this is not json`,
	}
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	for _, args := range [][]string{{"validate", path}, {"validate", "-shrink", path}} {
		code, out, errs := runCLI(args...)
		require.Equal(t, exitUsage, code, "%v: %s%s", args, out, errs)
		require.Contains(t, errs, path+":3", "%v names the malformed line", args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no story written beside the file")

	// The same violation in a well-formed file is a rejection (exit 1).
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines[:2], "\n")+"\n"), 0o644))
	code, out, errs := runCLI("validate", path)
	require.Equal(t, exitFailed, code, "%s%s", out, errs)
}
