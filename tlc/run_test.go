//go:build unix

package tlc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeJava writes a shell script that stands in for java and returns an
// Env that runs it.
func fakeJava(t *testing.T, script string) Env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "java")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return Env{Java: path, Jar: "/no/tla2tools.jar"}
}

// alive reports whether a process with pid exists.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// waitGone waits up to d for pid to exit, and fails naming it otherwise.
func waitGone(t *testing.T, pid int, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still alive %v after the run was cancelled", what, pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunCancelKillsGroup: a run whose deadline passes returns
// context.DeadlineExceeded, and neither the JVM nor anything it started
// survives it.
func TestRunCancelKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	env := fakeJava(t, `sleep 300 &
echo $! > "$PIDFILE"
echo "@!@!@STARTMSG 2262:0 @!@!@"
echo "TLC2 Version fake"
echo "@!@!@ENDMSG 2262 @!@!@"
wait
`)
	start := time.Now()
	res, err := env.Run(context.Background(), Job{Spec: "M.tla", Timeout: 300 * time.Millisecond, Env: []string{"PIDFILE=" + pidFile}})
	if !errors.Is(err, context.DeadlineExceeded) || res != nil {
		t.Fatalf("Run = %v, %v; want context.DeadlineExceeded", res, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run returned %v after its 300ms deadline", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the stand-in never started its child: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitGone(t, pid, 5*time.Second, "the JVM's child process")
}

// TestRunArgs: the command line Run builds, and the job's environment and
// working directory reach the child.
func TestRunArgs(t *testing.T) {
	dir := t.TempDir()
	env := fakeJava(t, `echo "@!@!@STARTMSG 2262:0 @!@!@"
echo "args: $*"
echo "dir: $(pwd) json: $JSON"
echo "@!@!@ENDMSG 2262 @!@!@"
echo "@!@!@STARTMSG 2193:0 @!@!@"
echo "Model checking completed. No error has been found."
echo "@!@!@ENDMSG 2193 @!@!@"
echo "@!@!@STARTMSG 2186:0 @!@!@"
echo "Finished in 1ms"
echo "@!@!@ENDMSG 2186 @!@!@"
`)
	env.CommunityJar = "/no/cm.jar"
	env.Workers = 2
	var out bytes.Buffer
	res, err := env.Run(context.Background(), Job{
		Spec: "T.tla", Config: "T.cfg", Dir: dir, Library: []string{"/lib"},
		Env: []string{"JSON=/t.ndjson"}, Args: []string{"-dump", "states"}, MetaDir: "/meta", Output: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != NoError {
		t.Errorf("outcome %v", res.Outcome)
	}
	body := res.Messages[0].Body
	wantArgs := "args: -XX:+UseParallelGC -Xss16m -DTLA-Library=/lib -cp /no/tla2tools.jar:/no/cm.jar tlc2.TLC -tool -workers 2 -metadir /meta -config T.cfg -dump states T.tla"
	if !strings.Contains(body, wantArgs) {
		t.Errorf("got %q\nwant %q", body, wantArgs)
	}
	realDir, _ := filepath.EvalSymlinks(dir)
	if !strings.Contains(body, "json: /t.ndjson") || (!strings.Contains(body, "dir: "+dir) && !strings.Contains(body, "dir: "+realDir)) {
		t.Errorf("environment or directory not passed: %q", body)
	}
	if !strings.Contains(out.String(), "Finished in 1ms") {
		t.Errorf("Output did not get TLC's output: %q", out.String())
	}
}

// TestRunIncomplete: a TLC that exits without reporting an outcome (a
// crash, say) is ErrIncomplete, with what it said on stderr.
func TestRunIncomplete(t *testing.T) {
	env := fakeJava(t, `echo "@!@!@STARTMSG 2262:0 @!@!@"
echo "TLC2 Version fake"
echo "@!@!@ENDMSG 2262 @!@!@"
echo "java.lang.OutOfMemoryError: Java heap space" >&2
exit 1
`)
	res, err := env.Run(context.Background(), Job{Spec: "M.tla"})
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "OutOfMemoryError") {
		t.Fatalf("err %v, want ErrIncomplete with the stderr", err)
	}
	if res == nil || res.Version != "TLC2 Version fake" || res.Finished {
		t.Errorf("partial result %+v", res)
	}
	env = fakeJava(t, "echo 'Error: Could not find or load main class tlc2.TLC' >&2; exit 1\n")
	if _, err := env.Run(context.Background(), Job{Spec: "M.tla"}); err == nil || !strings.Contains(err.Error(), "could not find or load main class") && !strings.Contains(err.Error(), "Could not find or load main class") {
		t.Fatalf("err %v, want the JVM's complaint", err)
	}
}

// realEnv is the TLC that Find finds, or a skip.
func realEnv(t *testing.T) Env {
	t.Helper()
	if testing.Short() {
		t.Skip("runs TLC: not in -short")
	}
	env, err := Find(context.Background(), FindConfig{})
	if errors.Is(err, ErrNotFound) {
		t.Skipf("TLC not found: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestRunReal runs a real TLC on small specs, one per kind of outcome the
// recordings hold that needs no trace spec.
func TestRunReal(t *testing.T) {
	env := realEnv(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recordings {
		if r.name != "deadlock" && r.name != "parse" && r.name != "assume" {
			continue
		}
		t.Run(r.name, func(t *testing.T) {
			job := r.job(t, root, t.TempDir())
			job.Timeout = 2 * time.Minute
			res, err := env.Run(context.Background(), job)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, r.want)
		})
	}
	v, err := env.Version(context.Background())
	if err != nil || !strings.HasPrefix(v, "TLC2 Version") {
		t.Errorf("Version = %q, %v", v, err)
	}
}

// TestRunRealDeadline: a real TLC on a spec that never ends is killed at
// its deadline; its JVM (pid from TLC's mode message) is gone.
func TestRunRealDeadline(t *testing.T) {
	env := realEnv(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	job := tinyJob("Slow")(t, root, t.TempDir())
	job.Output = &out
	job.Timeout = 4 * time.Second
	_, err = env.Run(context.Background(), job)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}
	m := regexp.MustCompile(`\[pid: (\d+)\]`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("TLC did not print its pid within 4s: %q", out.String())
	}
	pid, _ := strconv.Atoi(m[1])
	waitGone(t, pid, 5*time.Second, "the JVM")
}
