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
	"sync"
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

// lineWatch is an Output that calls fn once the output holds want.
type lineWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	fn   func()
	seen bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.seen && strings.Contains(w.buf.String(), w.want) {
		w.seen = true
		w.fn()
	}
	return len(p), nil
}

// TestRunCancelKillsGroup: a run cancelled while the JVM works returns
// context.Canceled, and neither the JVM nor anything it started survives
// it.
func TestRunCancelKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	env := fakeJava(t, `sleep 300 &
echo $! > "$PIDFILE"
echo "@!@!@STARTMSG 2262:0 @!@!@"
echo "TLC2 Version fake"
echo "@!@!@ENDMSG 2262 @!@!@"
wait
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &lineWatch{want: "TLC2 Version fake", fn: cancel}
	res, err := env.Run(ctx, Job{Spec: "M.tla", Timeout: time.Minute, Output: w, Env: []string{"PIDFILE=" + pidFile}})
	if !w.seen {
		t.Fatalf("the stand-in printed nothing within its minute: %v", err)
	}
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("Run = %v, %v; want context.Canceled", res, err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the stand-in never started its child: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitGone(t, pid, 10*time.Second, "the JVM's child process")
}

// TestRunTimeout: a job's Timeout is its deadline.
func TestRunTimeout(t *testing.T) {
	env := fakeJava(t, "exec sleep 300\n")
	start := time.Now()
	_, err := env.Run(context.Background(), Job{Spec: "M.tla", Timeout: 200 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}
	// Generous: the point is that Run does not wait for the sleep's 300s.
	if d := time.Since(start); d > time.Minute {
		t.Errorf("Run returned %v after its 200ms deadline", d)
	}
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
	wantArgs := "args: -Djava.io.tmpdir=/meta -XX:+UseParallelGC -Xss16m -DTLA-Library=/lib -cp /no/tla2tools.jar:/no/cm.jar tlc2.TLC -tool -workers 2 -metadir /meta -config T.cfg -dump states T.tla"
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
	res, err = env.Run(context.Background(), Job{Spec: "T.tla", JavaOpts: []string{"-Xmx1g"}, MetaDir: "/meta"})
	if err != nil {
		t.Fatal(err)
	}
	if body := res.Messages[0].Body; !strings.Contains(body, "args: -Djava.io.tmpdir=/meta -Xmx1g -cp ") {
		t.Errorf("a job's JavaOpts do not replace the defaults: %q", body)
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
	root, err := filepath.Abs("../..")
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
			job.MetaDir = t.TempDir()
			res, err := env.Run(context.Background(), job)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, r.want)
			// The JVM's temporary directory is the metadir: what TLC
			// leaves there goes with it, not into the system's.
			if made, _ := filepath.Glob(filepath.Join(job.MetaDir, "tlc-[0-9]*")); len(made) == 0 {
				t.Errorf("TLC made no temporary directory in the metadir %s: is java.io.tmpdir passed?", job.MetaDir)
			}
			if res.CPU <= 0 {
				t.Errorf("Result.CPU = %v: a JVM that ran takes CPU time", res.CPU)
			}
		})
	}
	v, err := env.Version(context.Background())
	if err != nil || !strings.HasPrefix(v, "TLC2 Version") {
		t.Errorf("Version = %q, %v", v, err)
	}
}

// pidWatch is an Output that cancels a run once TLC has printed its pid
// (in the message that starts model checking), so that the run is cut
// while the JVM works, however slow the machine is.
type pidWatch struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	pid    int
	cancel context.CancelFunc
}

var pidRe = regexp.MustCompile(`\[pid: (\d+)\]`)

func (w *pidWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := pidRe.FindSubmatch(w.buf.Bytes()); m != nil && w.pid == 0 {
		w.pid, _ = strconv.Atoi(string(m[1]))
		w.cancel()
	}
	return len(p), nil
}

// TestRunRealCancel: a real TLC on a spec that never ends, cancelled once
// it is checking, returns context.Canceled, and its JVM is gone.
func TestRunRealCancel(t *testing.T) {
	env := realEnv(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &pidWatch{cancel: cancel}
	job := tinyJob("Slow")(t, root, t.TempDir())
	job.Output = w
	// The run's own deadline: TLC must have started checking by then.
	job.Timeout = 3 * time.Minute
	_, err = env.Run(ctx, job)
	w.mu.Lock()
	pid := w.pid
	w.mu.Unlock()
	if pid == 0 {
		t.Fatalf("TLC never printed its pid (the run ended with %v)", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	waitGone(t, pid, 10*time.Second, "the JVM")
}
