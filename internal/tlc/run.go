package tlc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Env is how to run TLC: which java and which jars. Find makes one from
// the environment; a zero Workers means "auto".
type Env struct {
	Java         string // path of the java executable
	Jar          string // tla2tools.jar
	CommunityJar string // CommunityModules-deps.jar; "" when there is none (the models do not need it)
	// Workers is TLC's -workers for jobs that do not set their own; 0
	// means "auto" (one per core).
	Workers int
	// JavaOpts are the JVM's options; nil means DefaultJavaOpts.
	JavaOpts []string
	// Source says where the jars came from, for logs: "TLA2TOOLS_JAR",
	// "local DIR", "release URL (sha256 verified)".
	Source string
}

// DefaultJavaOpts are the JVM options TLC's authors recommend, with a
// larger thread stack for the deep recursion of big TLA+ values.
var DefaultJavaOpts = []string{"-XX:+UseParallelGC", "-Xss16m"}

// ShortJavaOpts suit a run of seconds to a minute: a small model, a spec
// mutant, a batch of traces through the trace spec. They keep the JIT at
// its first tier (C1) and use the serial collector: such a run spends
// most of its CPU starting up and compiling, and C2's compilations do not
// pay for themselves. On this project's machine they halve a small
// model's CPU time (5.8 s to 2.9 s for ThreadClaimLapseSmall.cfg) and cut
// the default run's 24,566 trace lines, in one batch, from 16.3 s of CPU
// to 6.0 s. A long model check wants DefaultJavaOpts.
var ShortJavaOpts = []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss16m"}

// Job is one TLC run: a spec and its configuration, checked in Dir.
type Job struct {
	// Spec is the module file ("ThreadClaimLapse.tla"), relative to Dir
	// or absolute. Required.
	Spec string
	// Config is the cfg file, relative to Dir or absolute; "" lets TLC
	// use the module's name with .cfg.
	Config string
	// Dir is the working directory TLC runs in; "" is the current one.
	// Newer TLCs write nothing beside the spec when given -metadir, but
	// older ones write trace-exploration modules there: run on a copy.
	Dir string
	// Library lists directories where TLC looks for modules the spec
	// extends (-DTLA-Library), e.g. spec/ for the trace spec.
	Library []string
	// Env holds extra environment variables, "KEY=VALUE", on top of this
	// process's environment (the trace spec reads its input from them).
	Env []string
	// Args are extra TLC options, after the driver's own and before the
	// spec, e.g. "-dump", "states".
	Args []string
	// Workers overrides Env.Workers when > 0.
	Workers int
	// JavaOpts, when not nil, replace Env.JavaOpts for this run.
	JavaOpts []string
	// MetaDir is TLC's -metadir; "" means a fresh temporary directory,
	// removed when the run ends.
	MetaDir string
	// Timeout, when > 0, is this run's own deadline on top of ctx's.
	Timeout time.Duration
	// Output, when set, receives a copy of TLC's raw output (stdout, then
	// stderr's lines as they come), for logs.
	Output io.Writer
}

// Errors Run and Find return; test with errors.Is.
var (
	// ErrNotFound: no java, or no tla2tools.jar could be had. TLC was not
	// run; the error says what is missing.
	ErrNotFound = errors.New("tlc: not found")
	// ErrDigest: a jar's sha256 is not the expected one. Nothing was run.
	ErrDigest = errors.New("tlc: sha256 mismatch")
	// ErrIncomplete: TLC exited without reporting an outcome (it crashed,
	// ran out of memory, or was given options it refused). Run returns the
	// partial Result with it.
	ErrIncomplete = errors.New("tlc: TLC ended without a result")
)

// Run runs TLC with -tool on job and returns what it reported. A TLC that
// reports an outcome, whatever it is (a violation, a parse error),
// returns a Result and a nil error. Run returns an error wrapping
// ctx.Err() (context.DeadlineExceeded when job.Timeout passed) when the
// run was cut short, after killing the JVM; ErrIncomplete, with the
// partial Result, when TLC exited without an outcome; and any other
// error when TLC could not be started.
func (e Env) Run(ctx context.Context, job Job) (*Result, error) {
	if job.Spec == "" {
		return nil, errors.New("tlc: Job.Spec is empty")
	}
	if job.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, job.Timeout)
		defer cancel()
	}
	meta := job.MetaDir
	if meta == "" {
		d, err := os.MkdirTemp("", "tlc-meta-")
		if err != nil {
			return nil, fmt.Errorf("tlc: %w", err)
		}
		defer os.RemoveAll(d)
		meta = d
	}
	cmd := exec.CommandContext(ctx, e.java(), e.args(job, meta)...)
	cmd.Dir = job.Dir
	cmd.Env = append(os.Environ(), job.Env...)
	killGroup(cmd)
	cmd.WaitDelay = 5 * time.Second

	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("tlc: %w", err)
	}
	var out io.Writer = io.Discard
	var mu sync.Mutex // Output gets stdout and stderr from two goroutines
	if job.Output != nil {
		out = lockedWriter{&mu, job.Output}
	}
	stderr := &tail{max: 64 << 10}
	cmd.Stderr = io.MultiWriter(stderr, out)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("tlc: starting %s: %w", e.java(), err)
	}
	p := newParser()
	var perr error
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		fmt.Fprintln(out, sc.Text())
		if perr == nil {
			perr = p.line(sc.Text())
		}
	}
	if err := sc.Err(); err != nil && perr == nil {
		perr = err
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("tlc: %s: %w", job.Spec, ctx.Err())
	}
	if perr != nil {
		return nil, fmt.Errorf("tlc: %s: reading TLC's output: %w", job.Spec, perr)
	}
	res, err := p.finish()
	if err != nil {
		return nil, fmt.Errorf("tlc: %s: %w (exit: %v; stderr: %s)", job.Spec, err, werr, strings.TrimSpace(stderr.String()))
	}
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
	}
	if !res.Finished || res.Outcome == OutcomeUnknown {
		return res, fmt.Errorf("%w: %s (exit: %v): %s", ErrIncomplete, job.Spec, werr, lastLines(stderr.String(), 5))
	}
	return res, nil
}

func (e Env) java() string {
	if e.Java == "" {
		return "java"
	}
	return e.Java
}

// ClassPath is the jars joined for java's -cp.
func (e Env) ClassPath() string {
	if e.CommunityJar == "" {
		return e.Jar
	}
	return e.Jar + string(os.PathListSeparator) + e.CommunityJar
}

func (e Env) args(job Job, meta string) []string {
	opts := job.JavaOpts
	if opts == nil {
		opts = e.JavaOpts
	}
	if opts == nil {
		opts = DefaultJavaOpts
	}
	// TLC's JVM makes a temporary directory of its own (tlc-<number>) and
	// leaves it: in the metadir, it goes with the metadir. An option of
	// the caller's comes after, and so wins.
	a := append([]string{"-Djava.io.tmpdir=" + meta}, opts...)
	if len(job.Library) > 0 {
		a = append(a, "-DTLA-Library="+strings.Join(job.Library, string(os.PathListSeparator)))
	}
	workers := "auto"
	switch {
	case job.Workers > 0:
		workers = strconv.Itoa(job.Workers)
	case e.Workers > 0:
		workers = strconv.Itoa(e.Workers)
	}
	a = append(a, "-cp", e.ClassPath(), "tlc2.TLC", "-tool", "-workers", workers, "-metadir", meta)
	if job.Config != "" {
		a = append(a, "-config", job.Config)
	}
	a = append(a, job.Args...)
	return append(a, job.Spec)
}

// Version runs TLC just long enough to print its version line (TLC prints
// it before it complains that -version is no option of its).
func (e Env) Version(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.java(), "-cp", e.Jar, "tlc2.TLC", "-version")
	killGroup(cmd)
	b, err := cmd.CombinedOutput()
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "TLC2 Version") {
			return strings.TrimSpace(l), nil
		}
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("tlc: version: %w", ctx.Err())
	}
	return "", fmt.Errorf("tlc: %s -cp %s tlc2.TLC printed no version line (%v): %s", e.java(), e.Jar, err, lastLines(string(b), 3))
}

// lockedWriter serialises writes from stdout's and stderr's readers.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
