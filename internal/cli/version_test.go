//go:build unix

package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestVersion: version (and -version) prints the module, TLC's version
// line, the jar's path and sha256, and the spec's digest, which changes
// with the spec; tlc prints the jar's sha256 too (a local jar is used
// without a digest to check).
func TestVersion(t *testing.T) {
	root, _ := tlcRepo(t, map[string]string{"M.cfg": "\\* expect: ok\n\\* fake: ok\n"})
	sum := sha256.Sum256([]byte("jar"))
	jarDigest := hex.EncodeToString(sum[:])
	var first string
	for _, cmd := range []string{"version", "-version"} {
		code, out, errs := runCLI(cmd, "-root", root)
		if code != exitOK {
			t.Fatalf("%s: exit %d:\n%s%s", cmd, code, out, errs)
		}
		for _, want := range []string{"tracecheck github.com/threadclaim/threadclaim", "tlc        TLC2 Version fake", "jar sha256 " + jarDigest, "spec       sha256 "} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %q in:\n%s", cmd, want, out)
			}
		}
		first = out
	}
	writeTraces(t, root+"/spec", map[string]string{"M.tla": "---- MODULE M ----\nx == 1\n====\n"})
	_, out, _ := runCLI("version", "-root", root)
	if out == first {
		t.Errorf("the spec changed but its digest did not:\n%s", out)
	}
	if code, out := runTLCCmd(t, root, "spec"); code != exitOK || !strings.Contains(out, "sha256 "+jarDigest) {
		t.Errorf("tlc spec: exit %d, want 0 and the jar's sha256:\n%s", code, out)
	}

	t.Setenv("TLA2TOOLS_JAR", "")
	code, out, errs := runCLI("version", "-root", root)
	if code != exitOK || !strings.Contains(out, "tlc        not found") || !strings.Contains(out, "scripts/tlc-jars release") {
		t.Errorf("no jar: exit %d, want 0, saying not found and how to get one:\n%s%s", code, out, errs)
	}
}
