//go:build unix

package tlc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The workflow's TLC steps are scripts/tlc-jars: these tests run it with
// stand-ins for the network (curl), for ant and for java on PATH, so its
// logic is proved without GitHub.

// standIns are the fake curl, ant and java. Each logs its name to $CALLS.
// curl serves $SERVE as the download, or fails when it is unset; ant
// builds the jar its build file makes, or fails when $ANT_FAIL is set.
var standIns = map[string]string{
	"curl": `echo curl >> "$CALLS"
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out=$a; prev=$a; done
[ -n "$SERVE" ] || { echo "curl: (7) Failed to connect" >&2; exit 7; }
cp "$SERVE" "$out"
`,
	"ant": `echo "ant $*" >> "$CALLS"
[ -z "$ANT_FAIL" ] || { echo "BUILD FAILED" >&2; exit 1; }
mkdir -p dist
case "$*" in
*customBuild.xml*) echo "built tla2tools" > dist/tla2tools.jar ;;
*) [ -f tlc/tla2tools.jar ] || { echo "no tlc/tla2tools.jar" >&2; exit 1; }
   echo "built community modules" > dist/CommunityModules-deps.jar ;;
esac
`,
	"java": `echo java >> "$CALLS"
echo "TLC2 Version stand-in"
`,
}

type jarsWorld struct {
	bin, cache, calls string
	env               []string
}

func newJarsWorld(t *testing.T) *jarsWorld {
	t.Helper()
	w := &jarsWorld{bin: t.TempDir(), cache: t.TempDir()}
	w.calls = filepath.Join(t.TempDir(), "calls")
	for name, body := range standIns {
		if err := os.WriteFile(filepath.Join(w.bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.env = []string{
		"PATH=" + w.bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"TLC_CACHE_DIR=" + w.cache,
		"CALLS=" + w.calls,
	}
	return w
}

// run runs scripts/tlc-jars with args and extra environment.
func (w *jarsWorld) run(t *testing.T, extra []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../../scripts/tlc-jars", args...)
	cmd.Env = append(append([]string{}, w.env...), extra...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("scripts/tlc-jars %v did not finish in 2 minutes", args)
	}
	return o.String(), e.String(), err
}

// calls is what the stand-ins were asked to do, one line each.
func (w *jarsWorld) callLog(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(w.calls)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func count(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// envLines parses the KEY=VALUE lines the script prints for $GITHUB_ENV.
func envLines(s string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

func TestJarsRelease(t *testing.T) {
	payload := []byte("the v1.7.4 asset")
	served := filepath.Join(t.TempDir(), "asset.jar")
	if err := os.WriteFile(served, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	pin := []string{"TLA2TOOLS_RELEASE_URL=https://example.invalid/tla2tools.jar", "TLA2TOOLS_RELEASE_SHA256=" + digest(payload)}

	t.Run("right digest: the jar is used", func(t *testing.T) {
		w := newJarsWorld(t)
		out, errOut, err := w.run(t, append(pin, "SERVE="+served), "release")
		if err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		env := envLines(out)
		want := filepath.Join(w.cache, digest(payload), JarName)
		if env["TLA2TOOLS_JAR"] != want || env["TLA2TOOLS_SHA256"] != digest(payload) {
			t.Fatalf("printed %q, want TLA2TOOLS_JAR=%s and its digest", out, want)
		}
		// What the workflow puts in $GITHUB_ENV is what Find uses.
		got, err := Find(context.Background(), FindConfig{
			Getenv:   func(k string) string { return env[k] },
			LookPath: func(string) (string, error) { return "/bin/true", nil },
		})
		if err != nil || got.Jar != want {
			t.Fatalf("Find: %v, %v", got, err)
		}
		// Find, with no variable set, finds the cached release too.
		got, err = Find(context.Background(), FindConfig{
			Getenv:   func(k string) string { return map[string]string{EnvCacheDir: w.cache, EnvOffline: "1"}[k] },
			LookPath: func(string) (string, error) { return "/bin/true", nil },
			Release:  Release{URL: "https://example.invalid/tla2tools.jar", SHA256: digest(payload)},
		})
		if err != nil || got.Jar != want {
			t.Fatalf("Find from the cache: %v, %v", got, err)
		}
		// A second call downloads nothing.
		if _, errOut, err := w.run(t, append(pin, "SERVE="+served), "release"); err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		if n := count(w.callLog(t), "curl"); n != 1 {
			t.Errorf("%d downloads, want 1 (the second call uses the cache)", n)
		}
	})

	t.Run("wrong digest: stops before java", func(t *testing.T) {
		w := newJarsWorld(t)
		other := filepath.Join(t.TempDir(), "replaced.jar")
		if err := os.WriteFile(other, []byte("a replaced asset"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := w.run(t, append(pin, "SERVE="+other), "release")
		if err == nil || !strings.Contains(errOut, "not the pinned") {
			t.Fatalf("exit %v, stderr %q: want a failure naming the digest", err, errOut)
		}
		if strings.Contains(out, "TLA2TOOLS_JAR") {
			t.Errorf("printed %q: a jar for $GITHUB_ENV after a wrong digest", out)
		}
		if calls := w.callLog(t); count(calls, "java") != 0 {
			t.Errorf("java ran: %v", calls)
		}
		left, _ := filepath.Glob(filepath.Join(w.cache, "*", "*"))
		if len(left) != 0 {
			t.Errorf("left in the cache: %v", left)
		}
	})

	t.Run("failed download", func(t *testing.T) {
		w := newJarsWorld(t)
		out, errOut, err := w.run(t, pin, "release")
		if err == nil || !strings.Contains(errOut, "download of") || strings.Contains(out, "TLA2TOOLS_JAR") {
			t.Fatalf("exit %v, stdout %q, stderr %q: want a failed download", err, out, errOut)
		}
	})

	t.Run("fetch, as tracecheck tlc calls it", func(t *testing.T) {
		w := newJarsWorld(t)
		dest := filepath.Join(t.TempDir(), "sub", "t.jar")
		if _, errOut, err := w.run(t, []string{"SERVE=" + served}, "fetch", "https://example.invalid/x", digest(payload), dest); err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		if b, _ := os.ReadFile(dest); !bytes.Equal(b, payload) {
			t.Errorf("dest holds %q", b)
		}
		if _, _, err := w.run(t, []string{"SERVE=" + served}, "fetch", "https://example.invalid/x", digest([]byte("other")), dest+"2"); err == nil {
			t.Error("fetch with a wrong digest succeeded")
		}
		if _, err := os.Stat(dest + "2"); err == nil {
			t.Error("fetch with a wrong digest wrote its destination")
		}
	})
}

// gitRepo makes a git repository with one commit and returns its path and
// the commit.
func gitRepo(t *testing.T, msg string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", msg},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return dir, strings.TrimSpace(string(out))
}

func TestJarsBuild(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	tla, tlaCommit := gitRepo(t, "tlaplus")
	cm, cmCommit := gitRepo(t, "CommunityModules")
	pins := []string{
		"TLAPLUS_COMMIT=" + tlaCommit, "COMMUNITY_MODULES_COMMIT=" + cmCommit,
		"TLAPLUS_SRC=" + tla, "COMMUNITY_MODULES_SRC=" + cm,
	}

	t.Run("build, then a cache hit builds nothing", func(t *testing.T) {
		w := newJarsWorld(t)
		outDir := filepath.Join(t.TempDir(), "build")
		out, errOut, err := w.run(t, pins, "build", outDir)
		if err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		env := envLines(out)
		if env["TLA2TOOLS_JAR"] != filepath.Join(outDir, JarName) || env["COMMUNITY_MODULES_JAR"] != filepath.Join(outDir, CommunityName) {
			t.Fatalf("printed %q", out)
		}
		for _, j := range env {
			if !isFile(j) {
				t.Errorf("%s was not built", j)
			}
		}
		if !strings.Contains(errOut, "TLC: TLC2 Version stand-in") {
			t.Errorf("the version line is not in the log: %s", errOut)
		}
		calls := w.callLog(t)
		if count(calls, "ant") != 2 {
			t.Fatalf("ant calls %v, want two builds", calls)
		}
		out2, errOut, err := w.run(t, pins, "build", outDir)
		if err != nil || out2 != out {
			t.Fatalf("cache hit: %v, printed %q, want %q: %s", err, out2, out, errOut)
		}
		if n := count(w.callLog(t), "ant"); n != 2 || !strings.Contains(errOut, "cache hit") {
			t.Errorf("ant ran %d times in all, want 2: a cache hit rebuilds nothing (%s)", n, errOut)
		}
	})

	t.Run("the default output is keyed by both commits", func(t *testing.T) {
		w := newJarsWorld(t)
		out, errOut, err := w.run(t, pins, "build")
		if err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		want := filepath.Join(w.cache, "build", tlaCommit+"-"+cmCommit, JarName)
		if envLines(out)["TLA2TOOLS_JAR"] != want {
			t.Errorf("printed %q, want the jar in %s", out, want)
		}
	})

	t.Run("failed build", func(t *testing.T) {
		w := newJarsWorld(t)
		outDir := filepath.Join(t.TempDir(), "build")
		out, errOut, err := w.run(t, append(pins, "ANT_FAIL=1"), "build", outDir)
		if err == nil || !strings.Contains(errOut, "ant failed") || strings.Contains(out, "TLA2TOOLS_JAR") {
			t.Fatalf("exit %v, stdout %q, stderr %q: want a failed build", err, out, errOut)
		}
		if left, _ := filepath.Glob(filepath.Join(outDir, "*")); len(left) != 0 {
			t.Errorf("a failed build left %v: the next run would take it for a cache hit", left)
		}
		if count(w.callLog(t), "java") != 0 {
			t.Error("java ran after a failed build")
		}
	})

	t.Run("source not at the pinned commit", func(t *testing.T) {
		w := newJarsWorld(t)
		wrong := append(append([]string{}, pins...), "TLAPLUS_COMMIT="+strings.Repeat("a", 40))
		out, errOut, err := w.run(t, wrong, "build", filepath.Join(t.TempDir(), "b"))
		if err == nil || !strings.Contains(errOut, "not the pinned") || strings.Contains(out, "TLA2TOOLS_JAR") {
			t.Fatalf("exit %v, stderr %q: want a refusal", err, errOut)
		}
		if count(w.callLog(t), "ant") != 0 {
			t.Error("ant ran on sources at the wrong commit")
		}
	})
}

// TestJarsPins: the pins are immutable things: a release other than the
// rolling v1.8.0 with a full sha256, and full commit SHAs.
func TestJarsPins(t *testing.T) {
	b, err := os.ReadFile("../../scripts/tlc-pins")
	if err != nil {
		t.Fatal(err)
	}
	pins := envLines(string(b))
	if u := pins["TLA2TOOLS_RELEASE_URL"]; !strings.Contains(u, "/releases/download/v1.7.4/") {
		t.Errorf("release URL %q: want the stable v1.7.4 asset (never the rolling v1.8.0)", u)
	}
	for _, k := range []string{"TLA2TOOLS_RELEASE_SHA256"} {
		if len(pins[k]) != 64 {
			t.Errorf("%s = %q: want a full sha256", k, pins[k])
		}
	}
	for _, k := range []string{"TLAPLUS_COMMIT", "COMMUNITY_MODULES_COMMIT"} {
		if len(pins[k]) != 40 {
			t.Errorf("%s = %q: want a full commit SHA", k, pins[k])
		}
	}
}

// TestJarsAuto: scripts/test's decision (scripts/tlc-jars auto). With a
// jar given or in the local directory nothing is built; with none, the
// pinned jars are built when ant and the sources can be had; without ant
// or the network it exits 3 (scripts/test then reports TLC NOT RUN, or
// fails under REQUIRE_TLC=1) and prints the remedy. Nothing is
// downloaded: the sources are local repositories, or git's fetch is a
// stand-in that fails as it does offline.
func TestJarsAuto(t *testing.T) {
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	tla, tlaCommit := gitRepo(t, "tlaplus")
	cm, cmCommit := gitRepo(t, "CommunityModules")
	commits := []string{"TLAPLUS_COMMIT=" + tlaCommit, "COMMUNITY_MODULES_COMMIT=" + cmCommit, "TLA2TOOLS_JAR="}
	sources := append([]string{"TLAPLUS_SRC=" + tla, "COMMUNITY_MODULES_SRC=" + cm}, commits...)

	t.Run("a jar given: nothing built", func(t *testing.T) {
		w := newJarsWorld(t)
		out, errOut, err := w.run(t, append(sources, "TLA2TOOLS_JAR=/some/tla2tools.jar"), "auto")
		if err != nil || out != "" || count(w.callLog(t), "ant") != 0 {
			t.Fatalf("exit %v, stdout %q, ant calls %v: want nothing built (%s)", err, out, w.callLog(t), errOut)
		}
	})

	t.Run("a local jar: nothing built", func(t *testing.T) {
		w := newJarsWorld(t)
		if err := os.MkdirAll(filepath.Join(w.cache, "local"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.cache, "local", JarName), []byte("jar"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := w.run(t, sources, "auto")
		if err != nil || out != "" || count(w.callLog(t), "ant") != 0 {
			t.Fatalf("exit %v, stdout %q, ant calls %v: want nothing built (%s)", err, out, w.callLog(t), errOut)
		}
	})

	t.Run("no jar, ant and the sources: built", func(t *testing.T) {
		w := newJarsWorld(t)
		out, errOut, err := w.run(t, sources, "auto")
		if err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		env := envLines(out)
		want := filepath.Join(w.cache, "build", tlaCommit+"-"+cmCommit)
		if env["TLA2TOOLS_JAR"] != filepath.Join(want, JarName) || env["COMMUNITY_MODULES_JAR"] != filepath.Join(want, CommunityName) {
			t.Fatalf("printed %q, want both jars in %s (%s)", out, want, errOut)
		}
		if n := count(w.callLog(t), "ant"); n != 2 {
			t.Errorf("ant ran %d times, want 2", n)
		}
	})

	t.Run("no network: exit 3 with the remedy", func(t *testing.T) {
		w := newJarsWorld(t)
		offline := "#!/bin/sh\ncase \" $* \" in *\" fetch \"*) echo \"fatal: unable to access 'https://github.com/': Could not resolve host\" >&2; exit 128 ;; esac\nexec " + realGit + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(w.bin, "git"), []byte(offline), 0o755); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := w.run(t, commits, "auto")
		checkNotBuilt(t, w, out, errOut, err)
	})

	t.Run("no ant: exit 3 with the remedy", func(t *testing.T) {
		w := newJarsWorld(t)
		if err := os.Remove(filepath.Join(w.bin, "ant")); err != nil {
			t.Fatal(err)
		}
		if p, err := exec.LookPath("ant"); err == nil {
			t.Skipf("this machine has ant (%s): a PATH without it cannot be made here", p)
		}
		out, errOut, err := w.run(t, sources, "auto")
		checkNotBuilt(t, w, out, errOut, err)
	})
}

// checkNotBuilt: auto could not build, and said so: exit 3, no jar for
// scripts/test to export, and the remedy.
func checkNotBuilt(t *testing.T, w *jarsWorld, out, errOut string, err error) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want 3\nstderr: %s", err, errOut)
	}
	if strings.Contains(out, "TLA2TOOLS_JAR") {
		t.Errorf("printed %q: a jar it did not build", out)
	}
	if !strings.Contains(errOut, "Remedy: install java, ant") || !strings.Contains(errOut, "TLA2TOOLS_JAR") {
		t.Errorf("no remedy in %q", errOut)
	}
	if left, _ := filepath.Glob(filepath.Join(w.cache, "build", "*", "*.jar")); len(left) != 0 {
		t.Errorf("left %v in the cache", left)
	}
}

// TestScriptsTestBuildsJars: scripts/test's TLC section, run as it is
// written (from its tlc_args line to its end) with stand-ins for
// scripts/tlc-jars and scripts/tlc: the jars auto prints are exported to
// TLC; when auto cannot build them (3) TLC is NOT RUN with the remedy,
// a failure under REQUIRE_TLC=1; any other exit of auto fails the test
// command.
func TestScriptsTestBuildsJars(t *testing.T) {
	b, err := os.ReadFile("../../scripts/test")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	start := strings.Index(src, "\ntlc_args=(")
	if start < 0 || !strings.Contains(src[start:], "scripts/tlc-jars auto") {
		t.Fatal("scripts/test has no TLC section that calls scripts/tlc-jars auto")
	}
	section := "step() { echo \"== $*\"; }\nfinish() { echo \"finish $1\"; }\nreports() { report=(); }\n" + src[start:]
	for _, tc := range []struct {
		name     string
		autoExit int
		require  string
		exit     int
		want     []string
	}{
		{"built", 0, "", 0, []string{"tlc got TLA2TOOLS_JAR=/built/tla2tools.jar COMMUNITY_MODULES_JAR=/built/cm.jar", "TLC: passed"}},
		{"cannot build", 3, "", 0, []string{"finish NO JARS", "remedy from auto", "TLC: NOT RUN", "Remedy: install java and ant"}},
		{"cannot build, TLC required", 3, "1", 1, []string{"TLC: NOT RUN"}},
		{"auto broken", 2, "", 1, []string{"scripts/tlc-jars auto exited 2"}},
	} {
		dir := t.TempDir()
		stubs := map[string]string{
			"scripts/tlc-jars": `echo "tlc-jars $*" >>"$CALLS"
if [ "$AUTO_EXIT" = 0 ]; then echo TLA2TOOLS_JAR=/built/tla2tools.jar; echo COMMUNITY_MODULES_JAR=/built/cm.jar; echo OTHER=x; fi
[ "$AUTO_EXIT" = 3 ] && echo "tlc-jars: remedy from auto" >&2
exit "$AUTO_EXIT"
`,
			"scripts/tlc": `echo "tlc got TLA2TOOLS_JAR=${TLA2TOOLS_JAR:-} COMMUNITY_MODULES_JAR=${COMMUNITY_MODULES_JAR:-}"
[ -n "${TLA2TOOLS_JAR:-}" ] || exit 3
`,
		}
		for name, body := range stubs {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+section)
		cmd.Dir = dir
		calls := filepath.Join(dir, "calls")
		cmd.Env = append(os.Environ(), "CALLS="+calls, "AUTO_EXIT="+strconv.Itoa(tc.autoExit), "REQUIRE_TLC="+tc.require,
			"TLA2TOOLS_JAR=", "COMMUNITY_MODULES_JAR=", "TLC_FULL=", "REPORT_DIR=")
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("%s: scripts/test's TLC section did not finish within a minute:\n%s", tc.name, out)
		}
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.exit {
			t.Errorf("%s: exit %d, want %d:\n%s", tc.name, code, tc.exit, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: %q not in the output:\n%s", tc.name, w, out)
			}
		}
		if got, _ := os.ReadFile(calls); string(got) != "tlc-jars auto\n" {
			t.Errorf("%s: scripts/tlc-jars was called as %q, want once with auto", tc.name, got)
		}
	}
}
