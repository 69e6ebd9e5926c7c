package main

import (
	"context"
	crand "crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/store/postgres"
	"github.com/threadclaim/threadclaim/tracecheck"
)

const fleetUsage = `usage: tracecheck fleet [flags]

Runs one many-process execution against PostgreSQL: -procs runner OS
processes (tracecheck worker) whose lease clocks are skewed apart by up to
twice the TTL; one is stopped (SIGSTOP) for three TTLs and continued
(SIGCONT), one is killed (SIGKILL) and replaced by a new process. Messages
are posted to every thread meanwhile. When every message is consumed (or
-timeout passes) the workers are stopped and the execution is checked:
every message consumed exactly once, the trace (writes as storage committed
them, reads from the workers' histories) by the Go trace checker, which
holds I1, I3 and NoLiveAbandon after every line, and the history by
porcupine. Each run uses a fresh schema, dropped at the end unless -keep.

Flags:
`

type fleetFlags struct {
	url, dir, bin                  string
	procs, threads, messages       int
	ttl, timeout, porcupineTimeout time.Duration
	seed                           uint64
	keep, unfenced                 bool
}

func cmdFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f fleetFlags
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.StringVar(&f.url, "storage", os.Getenv("DATABASE_URL"), "PostgreSQL URL (default $DATABASE_URL)")
	fs.IntVar(&f.procs, "procs", 4, "runner processes (at least 3: one is stopped, one killed)")
	fs.IntVar(&f.threads, "threads", 4, "threads")
	fs.IntVar(&f.messages, "messages", 6, "messages posted to each thread")
	fs.DurationVar(&f.ttl, "ttl", 300*time.Millisecond, "claim TTL")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "every message must be consumed within this")
	fs.DurationVar(&f.porcupineTimeout, "porcupine-timeout", time.Minute, "porcupine's time limit")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the workers' choices")
	fs.StringVar(&f.dir, "dir", "", "where workers' histories and logs go (default a temporary directory, removed unless -keep)")
	fs.StringVar(&f.bin, "bin", "", "the tracecheck binary the workers run (default this one)")
	fs.BoolVar(&f.keep, "keep", false, "keep the schema and the directory")
	fs.BoolVar(&f.unfenced, "unfenced", false, "the workers run with every fence off: the mutant the checks must catch (exits 1 when caught)")
	if err := parse(fs, args, stdout, stderr, fleetUsage); err != nil {
		return err
	}
	switch {
	case f.url == "":
		return usageError{"no PostgreSQL: give -storage URL or set DATABASE_URL (scripts/with-postgres starts a throwaway one)"}
	case f.procs < 3 || f.threads < 1 || f.messages < 1 || f.ttl <= 0:
		return usageError{"-procs must be at least 3; -threads, -messages and -ttl positive"}
	}
	if f.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		f.bin = exe
	}
	return runFleet(ctx, f, stdout)
}

type worker struct {
	name string
	skew time.Duration
	cmd  *exec.Cmd
	fate string
}

func runFleet(ctx context.Context, f fleetFlags, out io.Writer) error {
	start := time.Now()
	rng := rand.New(rand.NewPCG(f.seed, 0x666c656574))
	var suffix [4]byte
	if _, err := crand.Read(suffix[:]); err != nil {
		return err
	}
	schema := fmt.Sprintf("tcfleet_%d_%x", os.Getpid(), suffix)
	if f.dir == "" {
		d, err := os.MkdirTemp("", "tracecheck-fleet-")
		if err != nil {
			return err
		}
		f.dir = d
		if !f.keep {
			defer os.RemoveAll(d)
		}
	} else if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return usageError{err.Error()}
	}
	store, err := postgres.Open(ctx, f.url, postgres.Options{Schema: schema, KeepTrace: true})
	if err != nil {
		return err
	}
	defer store.Close()
	if !f.keep {
		defer func() { _ = store.DropSchema(context.WithoutCancel(ctx)) }()
	}
	posterFile, err := os.Create(filepath.Join(f.dir, "poster.history"))
	if err != nil {
		return err
	}
	defer posterFile.Close()
	poster := core.NewWorkspace(store, core.SystemClock{}, core.WithProcess("poster"), core.WithTracer(tracecheck.NewHistoryWriter(posterFile)))
	var threads []core.ThreadID
	for i := range f.threads {
		id := core.ThreadID(fmt.Sprintf("t%d", i+1))
		if err := poster.CreateThread(ctx, id); err != nil {
			return err
		}
		threads = append(threads, id)
	}
	mode := "fences on"
	if f.unfenced {
		mode = "FENCES OFF (the mutant)"
	}
	fmt.Fprintf(out, "tracecheck fleet: %d runner processes, %d threads × %d messages, ttl %v, %s, schema %s\n",
		f.procs, f.threads, f.messages, f.ttl, mode, schema)

	var workers []*worker
	startWorker := func(name string, skew time.Duration) error {
		logf, err := os.Create(filepath.Join(f.dir, name+".log"))
		if err != nil {
			return err
		}
		args := []string{"worker", "-storage", f.url, "-schema", schema, "-name", name,
			"-history", filepath.Join(f.dir, name+".history"), "-skew", skew.String(), "-ttl", f.ttl.String(),
			"-agent-max", (f.ttl * 2 / 3).String(), "-seed", fmt.Sprint(rng.Uint64())}
		if f.unfenced {
			args = append(args, "-unfenced")
		}
		cmd := exec.Command(f.bin, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("start worker %s: %w", name, err)
		}
		logf.Close()
		workers = append(workers, &worker{name: name, skew: skew, cmd: cmd, fate: "ran to the end"})
		return nil
	}
	defer func() {
		for _, w := range workers {
			if w.cmd.ProcessState == nil {
				_ = w.cmd.Process.Kill()
				_ = w.cmd.Wait()
			}
		}
	}()
	for i := range f.procs {
		// Lease clocks spread over two TTLs: the fastest sees the slowest's
		// fresh claims expired.
		if err := startWorker(fmt.Sprintf("p%d", i+1), time.Duration(i)*2*f.ttl/time.Duration(f.procs-1)); err != nil {
			return err
		}
	}
	stopped, killed := workers[0], workers[1]

	total := f.messages * f.threads
	posted := 0
	for m := range f.messages {
		for _, id := range threads {
			if _, err := poster.Post(ctx, id, fmt.Sprintf("message %d", m+1)); err != nil {
				return err
			}
			posted++
		}
		time.Sleep(f.ttl / 3)
		switch m {
		case f.messages / 3:
			// A process stalled past the TTL, its writes and renewals
			// with it; then it goes on as if nothing happened.
			if err := stopped.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				return err
			}
			time.Sleep(3 * f.ttl)
			if err := stopped.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				return err
			}
			stopped.fate = fmt.Sprintf("SIGSTOP for %v, then SIGCONT", 3*f.ttl)
		case 2 * f.messages / 3:
			if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				return err
			}
			_ = killed.cmd.Wait()
			killed.fate = "SIGKILL"
			if err := startWorker(fmt.Sprintf("p%d", f.procs+1), killed.skew); err != nil {
				return err
			}
		}
	}

	// Wait for every message to be consumed and no run to be active.
	deadline := time.Now().Add(f.timeout)
	consumed := false
	for time.Now().Before(deadline) {
		done := true
		for _, id := range threads {
			th, err := poster.Thread(ctx, id)
			if err != nil {
				return err
			}
			if th.Unconsumed() || len(th.ActiveRuns()) > 0 {
				done = false
				break
			}
		}
		if done {
			consumed = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, w := range workers {
		if w.cmd.ProcessState == nil {
			_ = w.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, w := range workers {
		if w.cmd.ProcessState == nil {
			done := make(chan error, 1)
			go func() { done <- w.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil && w.fate != "SIGKILL" {
					w.fate += fmt.Sprintf(" (exit: %v; see %s.log)", err, w.name)
				}
			case <-time.After(10 * time.Second):
				_ = w.cmd.Process.Kill()
				<-done
				w.fate += " (did not stop on SIGTERM: killed)"
			}
		}
	}

	// The execution's trace: writes from storage, reads from histories.
	stored, err := store.TraceLines(ctx)
	if err != nil {
		return err
	}
	var histories [][]core.TraceEvent
	paths, _ := filepath.Glob(filepath.Join(f.dir, "*.history"))
	sort.Strings(paths)
	for _, p := range paths {
		r, err := os.Open(p)
		if err != nil {
			return err
		}
		h, err := tracecheck.ReadHistory(r, p)
		r.Close()
		if err != nil {
			return err
		}
		histories = append(histories, h)
	}
	lines := tracecheck.MergeHistories(stored, histories)
	// In trace order, as written and as checked: a line's number in the
	// check's messages is its line in the file.
	tracecheck.Sort(lines)
	tracePath := filepath.Join(f.dir, "trace.ndjson")
	if tf, err := os.Create(tracePath); err == nil {
		w := tracecheck.NewWriter(tf)
		for _, ev := range lines {
			w.Trace(ev)
		}
		tf.Close()
	}

	// Exactly once: every message consumed once, counted from storage.
	once, twice := 0, 0
	for _, id := range threads {
		th, err := poster.Thread(ctx, id)
		if err != nil {
			return err
		}
		for _, n := range th.Consumed() {
			if n == 1 {
				once++
			} else {
				twice++
			}
		}
	}

	st, checkErr := tracecheck.Check(lines, tracecheck.WithFile(tracePath))
	ops := tracecheck.OperationsFromTrace(lines)
	html := filepath.Join(f.dir, "porcupine.html")
	_, linErr := tracecheck.CheckLinearizable(ops, f.porcupineTimeout, html)

	fmt.Fprintf(out, "\nprocesses\n")
	for _, w := range workers {
		fmt.Fprintf(out, "  %-4s pid %-7d lease clock %+v  %s\n", w.name, w.cmd.Process.Pid, w.skew, w.fate)
	}
	fmt.Fprintf(out, "messages            %d posted, %d consumed exactly once, %d more than once\n", posted, once, twice)
	fmt.Fprintf(out, "trace lines         %d (%d writes as storage committed them)\n", len(lines), len(stored))
	fmt.Fprintf(out, "spec actions        ")
	var parts []string
	for _, a := range core.Actions() {
		if n := st.PerAction[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a, n))
		}
	}
	fmt.Fprintf(out, "%s; Lapse %d inferred (%d under a live holder)\n", strings.Join(parts, ", "), st.LapsesInferred, st.LiveLapses)
	fmt.Fprintf(out, "invariant checks    %d\n", st.InvariantChecks)
	verdictTrace := "accepted"
	if checkErr != nil {
		verdictTrace = "REJECTED"
	}
	fmt.Fprintf(out, "Go trace checker    %s\n", verdictTrace)
	verdictLin := fmt.Sprintf("linearizable (%d operations)", len(ops))
	if linErr != nil {
		verdictLin = linErr.Error()
	}
	fmt.Fprintf(out, "porcupine           %s\n", verdictLin)
	fmt.Fprintf(out, "time                %v\n", time.Since(start).Round(time.Millisecond))
	if f.keep {
		fmt.Fprintf(out, "kept                %s (schema %s)\n", f.dir, schema)
	}

	var problems []string
	if !consumed {
		problems = append(problems, fmt.Sprintf("Liveness: messages left unconsumed after %v", f.timeout))
	}
	if once != total || twice > 0 {
		problems = append(problems, fmt.Sprintf("I1_ConsumedAtMostOnce/Liveness: %d of %d messages consumed once, %d more than once", once, total, twice))
	}
	if checkErr != nil {
		problems = append(problems, checkErr.Error())
	}
	switch {
	case linErr == nil:
	case errors.Is(linErr, tracecheck.ErrLinearizabilityUnknown) && len(problems) == 0:
		return failure{exitInconclusive, "INCONCLUSIVE: " + linErr.Error()}
	default:
		problems = append(problems, linErr.Error())
	}
	if f.unfenced {
		if len(problems) > 0 {
			return failure{exitFailed, "FAIL (as it must with the fences off): the mutant was caught\n" + strings.Join(problems, "\n")}
		}
		return failure{exitFailed, "FAIL: the fences are off and no check caught it in this run"}
	}
	if len(problems) > 0 {
		return failure{exitFailed, "FAIL\n" + strings.Join(problems, "\n")}
	}
	fmt.Fprintln(out, "PASS")
	return nil
}
