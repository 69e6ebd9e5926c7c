//go:build unix

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/threadclaim/threadclaim/internal/report"
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

// TestTLCJSON: tlc -json prints the one object every command prints on
// stdout (the progress goes to stderr), its figures every check's verdict.
func TestTLCJSON(t *testing.T) {
	root, _ := tlcRepo(t, map[string]string{"M.cfg": "\\* expect: ok\n\\* fake: ok\n"})
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"tlc", "-root", root, "spec", "-json"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s\n%s", code, out.String(), errb.String())
	}
	var obj struct {
		Command, Verdict string
		Figures          struct {
			Mode   string
			Checks []report.Verdict
		}
	}
	if err := json.Unmarshal(out.Bytes(), &obj); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	if obj.Command != "tlc" || obj.Verdict != "pass" || obj.Figures.Mode != "spec" || len(obj.Figures.Checks) != 2 || obj.Figures.Checks[0].Name != "spec/M.cfg" {
		t.Errorf("got %+v", obj)
	}
	if !strings.Contains(errb.String(), "PASS  spec/M.cfg") {
		t.Errorf("the progress is not on stderr:\n%s", errb.String())
	}
}
