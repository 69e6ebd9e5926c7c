//go:build unix

package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTLCJUnit: tlc -junit writes valid JUnit XML, a case per trace; the
// case of a trace TLC rejects where it was expected to accept fails with
// the rejected line; the models' skipped cfg is a skipped case.
func TestTLCJUnit(t *testing.T) {
	root, _ := tlcRepo(t, map[string]string{"M.cfg": "\\* expect: ok\n\\* fake: ok\n", "MLong.cfg": "\\* expect: ok\n\\* fake: ok\n"})
	dir := filepath.Join(root, "fx")
	writeTraces(t, dir, map[string]string{"ok-a.ndjson": line(1, "t1", "a") + "\n", "ok-b.ndjson": line(1, "t1", "px") + "\n"})
	junit := filepath.Join(t.TempDir(), "tlc.xml")
	code, out := runTLCCmd(t, root, "-junit", junit, "trace", dir)
	if code != exitFailed {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	x := readJUnit(t, junit)
	for _, want := range []string{
		`<testsuite name="tlc: trace fixtures" tests="2" failures="1"`,
		`<failure message="expected accepted, got rejected at line 1`,
		`<testcase name="tlc trace"`,
	} {
		if !strings.Contains(x, want) {
			t.Errorf("JUnit lacks %q:\n%s", want, x)
		}
	}

	junit = filepath.Join(t.TempDir(), "spec.xml")
	code, out = runTLCCmd(t, root, "-junit", junit, "-skip", "MLong.cfg", "spec")
	if code != exitOK {
		t.Fatalf("spec: exit %d, want 0:\n%s", code, out)
	}
	x = readJUnit(t, junit)
	if !strings.Contains(x, `<skipped message="-skip">`) || !strings.Contains(x, `<testcase name="spec/M.cfg"`) {
		t.Errorf("spec: want M.cfg passed and MLong.cfg skipped:\n%s", x)
	}
}
