package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/fleet"
	"github.com/threadclaim/threadclaim/internal/progress"
	"github.com/threadclaim/threadclaim/internal/report"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/internal/sim/shrink"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/store/postgres"
	"github.com/threadclaim/threadclaim/tracecheck"
)

const runUsage = `usage: tracecheck run [flags]

Runs -seeds deterministic executions (a seeded scheduler interleaving real
runner processes with clock jumps, stalls, crashes and renewals) and
-concurrent concurrent ones (goroutines, real time, short TTLs), on the
in-memory storage, or on PostgreSQL with -storage URL. Every execution's
invariants are checked in storage, its trace by the Go trace checker
against spec/ThreadClaimLapse.tla, and the concurrent executions' histories
by porcupine. With -cfg FILE the executions take the cfg's processes and
messages, a coverage line reports the share of its state graph they
visited, and on the in-memory storage (-forks) forked executions drive the
runner along every edge of that graph a plan can steer it along: each
state's execution is forked and each fork takes one of its edges. -walks
directed executions drive it along planned walks of the graph from Init
instead, or as well.
A fork or a walk whose trace leaves its plan fails the run. With -unfenced
the fences are off: the run must catch the mutant, and exits 1 naming
what broke.

Flags:
`

type runFlags struct {
	report                                           bool // -junit or -summary: keep a verdict per check
	seeds, seedBase, steps, procs, threads, messages int
	concurrent, workers, walks                       int
	cfgPath                                          string
	spec                                             *specmodel.Config
	minCoverage, minEdgeCoverage                     float64
	minActions                                       int // each spec action at least this often; -1: automatic
	ttl                                              time.Duration
	unfenced                                         core.Fences // the fences switched off
	shrink, json, forks                              bool
	mutant                                           string
	interleave                                       bool
	faults                                           float64
	traceDir, htmlOut, storageURL, opsOut, shrinkDir string
	porcupineTimeout                                 time.Duration
	// openStorage, when set, gives each execution its storage in place
	// of -storage's (tests: a storage with a defect written into it).
	openStorage func(ctx context.Context) (core.Storage, func(), error)
	// meter, when set, makes the progress meter of total executions in
	// place of a meter on a terminal stderr (tests: a buffer and a clock).
	meter func(total int) *progress.Meter
	// stepTracer receives the trace lines of the seeded and concurrent
	// executions as they are traced, for the meter's steps; nil for none.
	stepTracer core.Tracer
}

// stepCounter counts trace lines as a meter's steps: a long execution
// shows progress before it ends.
type stepCounter struct{ m *progress.Meter }

func (c stepCounter) Trace(core.TraceEvent) { c.m.Step(1) }

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.IntVar(&f.seeds, "seeds", 200, "deterministic executions, one per seed")
	fs.IntVar(&f.seedBase, "seed", 0, "first seed; seed N replays the same execution")
	fs.IntVar(&f.steps, "steps", 300, "scheduled operations per deterministic execution")
	fs.IntVar(&f.procs, "procs", 3, "runner processes per execution")
	fs.IntVar(&f.threads, "threads", 2, "threads per execution")
	fs.IntVar(&f.messages, "messages", 4, "messages posted to each thread")
	fs.IntVar(&f.concurrent, "concurrent", 4, "concurrent executions (real goroutines and time)")
	fs.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "deterministic executions run at once; the output is the same for any number")
	fs.DurationVar(&f.ttl, "ttl", 40*time.Millisecond, "claim TTL of the concurrent executions")
	fs.Var(everyFenceOff{&f.unfenced}, "unfenced", "switch every fence off: the mutant the checks must catch (the same as -mutant unfenced)")
	fs.StringVar(&f.mutant, "mutant", "", "switch a deliberate defect on, which the checks must catch: unfenced (every fence off), fence-own-tx (fenced writes check the claim in a transaction of its own, committed first), retry-commit-unknown (the runner retries a consuming write whose commit outcome is unknown), output-abandoned (a run's output is recorded although its end was refused: the run was abandoned), steer-after-abandon (a steering record accepted after its run was abandoned), steer-keeps-cursor (a steering record that does not move the taken cursor), steer-consumed (steering given from a message already consumed), steer-inactive (steering given to a run that is not active)")
	fs.BoolVar(&f.interleave, "interleave", true, "let the scheduler run other operations between any two storage transactions of one process's step")
	fs.Float64Var(&f.faults, "faults", 0.05, "probability of a storage fault (commit unknown, rolled back, failed) on a process's Abandon, RunStart, Reply, RunEnd or Release in the deterministic executions")
	fs.StringVar(&f.storageURL, "storage", "", "run on PostgreSQL at this URL instead of in memory: each execution in a fresh schema, dropped after (give fewer -seeds: each is slower); a server that does not answer within 15s is exit 4")
	fs.StringVar(&f.traceDir, "trace-dir", "", "write each execution's trace here, one ndjson file per thread (ok-* accepted, bad-* rejected)")
	fs.StringVar(&f.opsOut, "ops-out", "", "write the first seed's (-seed N) operation log to this file, for tracecheck replay")
	fs.BoolVar(&f.shrink, "shrink", true, "shrink the first failing seed of each failure to its shortest story, printed and written to -shrink-dir")
	fs.StringVar(&f.shrinkDir, "shrink-dir", "tracecheck-out", "where a failing seed's operation log and trace are written, and beside them the shrunk ones")
	fs.StringVar(&f.htmlOut, "porcupine-html", "tracecheck-out/porcupine.html", "where a history that is not linearizable is drawn")
	fs.StringVar(&f.cfgPath, "cfg", "", "take the processes and messages from this TLC cfg (spec/*.cfg) and report how much of its reachable state graph the deterministic executions visit")
	fs.BoolVar(&f.forks, "forks", true, "with -cfg on the in-memory storage: drive the runner along every edge of the cfg's state graph a plan can steer it along, on forks of the execution at each state")
	fs.IntVar(&f.walks, "walks", 0, "with -cfg: directed executions drive the runner processes along this many walks of the cfg's state graph from Init, each planned to visit the most of what earlier walks left unvisited")
	fs.Float64Var(&f.minCoverage, "min-coverage", 0, "with -cfg: fail (exit 1) when the executions visit less than this percentage of the cfg's states")
	fs.Float64Var(&f.minEdgeCoverage, "min-edge-coverage", 0, "with -cfg: fail (exit 1) when the executions take less than this percentage of the cfg's edges")
	fs.IntVar(&f.minActions, "min-actions", -1, "fail (exit 1) when a spec action is exercised fewer than this many times; -1 (the default): 1 when the run is big enough that every action is reached in practice (at least 15000 scheduled steps of seeded executions with 2 or more processes, no -cfg), else 0")
	fs.DurationVar(&f.porcupineTimeout, "porcupine-timeout", time.Minute, "porcupine's time limit per history; past it the result is inconclusive (0: no limit)")
	jsonOut := jsonFlag(fs)
	files := reportFlags(fs)
	if err := parse(fs, args, stdout, stderr, runUsage); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	if err := checkRunFiles(f, files); err != nil {
		return err
	}
	if f.seeds < 0 || f.concurrent < 0 {
		return usageError{"-seeds and -concurrent must not be negative"}
	}
	// !(x >= 0 && x <= max) refuses NaN too, which x < 0 || x > max takes.
	if !(f.minCoverage >= 0 && f.minCoverage <= 100) || (f.minCoverage > 0 && f.cfgPath == "") {
		return usageError{fmt.Sprintf("-min-coverage %v must be a percentage, and needs -cfg", f.minCoverage)}
	}
	if !(f.minEdgeCoverage >= 0 && f.minEdgeCoverage <= 100) || (f.minEdgeCoverage > 0 && f.cfgPath == "") {
		return usageError{fmt.Sprintf("-min-edge-coverage %v must be a percentage, and needs -cfg", f.minEdgeCoverage)}
	}
	if f.cfgPath != "" {
		c, err := specmodel.ReadConfig(f.cfgPath)
		if err != nil {
			return usageError{err.Error()}
		}
		for i, p := range c.Procs {
			if p != fmt.Sprintf("p%d", i+1) {
				return usageError{fmt.Sprintf("-cfg %s: its processes must be p1, p2, ... as the executions name theirs, not %v", f.cfgPath, c.Procs)}
			}
		}
		f.spec, f.procs, f.messages = &c, len(c.Procs), c.MaxMsgs
	}
	if err := checkStorageURL(f.storageURL); err != nil {
		return err
	}
	if f.walks < 0 || f.walks > 0 && f.spec == nil {
		return usageError{fmt.Sprintf("-walks %d must not be negative, and needs -cfg", f.walks)}
	}
	forksSet := isSet(fs, "forks")
	switch {
	case forksSet && f.forks && (f.spec == nil || f.storageURL != ""):
		return usageError{"-forks needs -cfg and the in-memory storage (forks copy it)"}
	case forksSet && f.forks && !f.interleave:
		return usageError{"-forks needs -interleave: a run's questions pause for the other processes' steps"}
	}
	f.forks = f.forks && f.spec != nil && f.storageURL == "" && f.interleave
	if f.seeds+f.concurrent+f.walks == 0 && !f.forks {
		return usageError{"nothing to run: -seeds, -concurrent or (with -cfg) -walks must be positive, or -forks on"}
	}
	if f.procs < 1 || f.threads < 1 || f.messages < 1 || f.steps < 0 || f.ttl <= 0 || f.workers < 1 {
		return usageError{"-procs, -threads, -messages, -ttl and -workers must be positive, -steps not negative"}
	}
	if f.minActions < -1 {
		return usageError{fmt.Sprintf("-min-actions %d must not be negative (or -1, automatic)", f.minActions)}
	}
	if f.minActions == -1 {
		f.minActions = autoMinActions(f)
	}
	if !(f.faults >= 0 && f.faults <= 1) {
		return usageError{fmt.Sprintf("-faults %v must be a probability, in [0, 1]", f.faults)}
	}
	if _, ok := sim.ParseMutant(f.mutant); !ok && f.mutant != "" {
		if f.mutant != "unfenced" {
			return usageError{fmt.Sprintf("-mutant %q: want unfenced or one of %s", f.mutant, strings.Join(sim.MutantNames(), ", "))}
		}
		f.unfenced = core.AllFences()
	}
	if f.unfenced != (core.Fences{}) && f.mutant != "" && f.mutant != "unfenced" {
		return usageError{fmt.Sprintf("-unfenced and -mutant %s: one mutant at a time (-unfenced is -mutant unfenced)", f.mutant)}
	}
	if f.unfenced != (core.Fences{}) && f.mutant == "" {
		f.mutant = "unfenced"
	}
	if f.opsOut != "" && f.seeds == 0 {
		return usageError{"-ops-out needs a seeded execution: -seeds must be positive"}
	}
	if f.traceDir != "" {
		if err := os.MkdirAll(f.traceDir, 0o755); err != nil {
			return usageError{err.Error()}
		}
	}
	f.json, f.report = *jsonOut, files.Wanted()
	return runAndReport(ctx, f, files, stdout, stderr)
}

// checkRunFiles refuses, before anything runs, output paths that cannot
// be written (or would overwrite -cfg) and a negative -porcupine-timeout.
func checkRunFiles(f runFlags, files *report.Files) error {
	if err := checkReportFiles(files, f.cfgPath); err != nil {
		return err
	}
	if err := checkNotInput("-ops-out", f.opsOut, f.cfgPath); err != nil {
		return err
	}
	if fi, err := os.Stat(f.opsOut); f.opsOut != "" && err == nil && fi.IsDir() {
		return usageError{fmt.Sprintf("-ops-out %s: is a directory", f.opsOut)}
	}
	if err := checkDirFlag("-shrink-dir", f.shrinkDir); err != nil {
		return err
	}
	if f.porcupineTimeout < 0 {
		return usageError{fmt.Sprintf("-porcupine-timeout %v must not be negative (0: no limit)", f.porcupineTimeout)}
	}
	return nil
}

// runAndReport runs the checks f asks for and writes what they found:
// the text, or -json's object, and -junit's and -summary's files.
func runAndReport(ctx context.Context, f runFlags, files *report.Files, stdout, stderr io.Writer) error {
	out := stdout
	if f.json {
		out = io.Discard
	}
	parent := ctx
	if f.storageURL != "" {
		// Ctrl-C or SIGTERM cancels the executions, whose schemas are
		// dropped as each one ends, rather than leave them behind.
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	t, err := runAll(ctx, f, out, stderr)
	if err != nil && parent.Err() == nil && ctx.Err() != nil {
		// A signal stopped the run: say so, not only "context canceled".
		err = fmt.Errorf("stopped: %v; the executions' schemas were dropped (%w)", context.Cause(ctx), err)
	}
	if t != nil && t.rep != nil {
		status, msg := verdictOf(err)
		t.rep.Add(report.Verdict{Suite: "run: verdict", Name: "run (" + runMode(f) + ")", Status: status, Message: msg, Time: t.elapsed})
		err = writeReports(files, t.rep, err)
	}
	if f.json {
		return writeJSON(stdout, "run", err, t.figures())
	}
	return err
}

// tally is what a run found.
type tally struct {
	executions, concurrent int
	lines                  int
	perAction              map[core.Action]int
	lapses, liveLapses     int
	invariantChecks        int
	threads                int
	// givenTwice counts the messages given to a model more than once
	// (ADR-0069's one exception), and givenAgain those of them first given
	// as steering that was never recorded: a steered run abandoned, its
	// message given again by the next holder (gives.go).
	givenTwice, givenAgain int

	invariantFails map[string]int // broken invariants in storage, by name
	firstInvariant error
	traceFails     int // executions whose trace the checker rejected
	firstTrace     error
	lin            linTally

	// failed holds, for each failure in the order first seen, the first
	// seed's log that shows it: what shrinking starts from.
	failed  []failedSeed
	stories []story
	// concFailed and concLin are the concurrent executions kept for
	// shrinking (shrinklines.go).
	concFailed []concurrentFailure
	concLin    *concurrentFailure
	concDefect *concurrentFailure // the first that failed InvNoDefectError
	elapsed    time.Duration

	cov     *sim.Coverage // with -cfg: the cfg's states the executions visited
	covName string
	// directed executions: walks driven, those whose trace left the plan
	// (the code took another step than the spec's), and the first such.
	directed, walks, diverged int
	firstDiverged             string
	// forked executions (-forks): edges driven as planned, edges a plan
	// can steer the runner along, forks made, and forks that left the plan, broke an
	// invariant or had their trace rejected.
	forkEdges, forkReach, forks int
	forkDiverged, forkFailed    int

	// rep holds a verdict per check (-junit, -summary); nil without them.
	rep *report.Report
}

// coverage returns the percentages of the cfg's states and edges visited.
func (t *tally) coverage() (states, edges float64) {
	v, n := t.cov.States()
	e, m := t.cov.Edges()
	return 100 * float64(v) / float64(n), 100 * float64(e) / float64(m)
}

type failedSeed struct {
	failure shrink.Failure
	seed    uint64
	exec    *shrink.Execution
}

func runAll(ctx context.Context, f runFlags, out, stderr io.Writer) (*tally, error) {
	start := time.Now()
	t := &tally{perAction: map[core.Action]int{}, invariantFails: map[string]int{}}
	if f.report {
		t.rep = &report.Report{Name: "tracecheck run"}
	}
	printRunHeader(f, out)

	var g *specmodel.Graph
	if f.spec != nil {
		g = specmodel.New(*f.spec).ExploreWith(specmodel.Options{Edges: f.walks > 0 || f.forks})
		if v := g.Result().Violation; v != nil {
			return t, usageError{fmt.Sprintf("-cfg %s: its model breaks %s at depth %d; coverage needs a cfg whose invariants hold", f.cfgPath, v.Invariant, v.Depth)}
		}
		t.cov, t.covName = sim.NewCoverage(g), f.cfgPath
	}
	directed := (f.walks + walksPerExecution - 1) / walksPerExecution
	var tree *sim.Tree
	var parts []sim.Part
	if f.forks {
		var err error
		if tree, err = sim.NewTree(g, sim.RunnerSkips); err != nil {
			return t, err
		}
		parts = tree.Parts(forkCut)
		_, t.forkReach = tree.Reachable()
	}
	total := f.seeds + f.concurrent + directed + len(parts)
	meter := progress.New(stderr, "run", total, "executions", time.Now)
	if f.meter != nil {
		meter = f.meter(total)
	}
	if meter != nil {
		f.stepTracer = stepCounter{meter}
	}
	err := runSeeds(ctx, f, t.cov, func(seed uint64, e *shrink.Execution, v *sim.Visits) error {
		meter.Add(1)
		if v != nil {
			t.cov.Mark(v)
		}
		return t.seeded(f, fmt.Sprintf("seed-%d", seed), e)
	})
	if err == nil && f.walks > 0 {
		err = runWalks(ctx, f, g, t.cov, func(j int, e *shrink.Execution, v *sim.Visits) error {
			meter.Add(1)
			t.cov.Mark(v)
			t.directed++
			t.walks += e.Sim.Walks
			t.diverged += e.Sim.Diverged
			if e.Sim.Diverged > 0 && t.firstDiverged == "" {
				// The execution's operations, for tracecheck replay.
				path := filepath.Join(f.shrinkDir, fmt.Sprintf("walks-%d.ops.ndjson", j))
				if err := writeLogFile(path, e.Log); err != nil {
					return err
				}
				t.firstDiverged = fmt.Sprintf("walks-%d (its operations: %s; tracecheck replay it)", j, path)
			}
			return t.seeded(f, fmt.Sprintf("walks-%d", j), e)
		})
	}
	if err == nil && f.forks {
		err = runForks(ctx, f, tree, parts, func(j int, res *sim.TreeResult) error {
			meter.Add(1)
			return t.forked(ctx, f, j, res)
		})
	}
	if err != nil {
		meter.Done()
		return t, err
	}
	if err := t.runConcurrent(ctx, f, meter); err != nil {
		meter.Done()
		return t, err
	}
	meter.Done()
	t.elapsed = time.Since(start)
	t.print(out, t.elapsed)
	if f.shrink {
		if err := t.shrinkAll(ctx, f, out); err != nil {
			return t, err
		}
		if err := t.shrinkConcurrent(ctx, f, out); err != nil {
			return t, err
		}
	}
	if err := t.verdict(f.mutant, f.minActions, out); err != nil {
		return t, err
	}
	if t.cov != nil {
		ps, pe := t.coverage()
		if f.minCoverage > 0 && ps < f.minCoverage {
			return t, failure{exitFailed, fmt.Sprintf("FAIL: the executions visited %.2f%% of %s's states, below the floor of %.2f%%", ps, t.covName, f.minCoverage)}
		}
		if f.minEdgeCoverage > 0 && pe < f.minEdgeCoverage {
			return t, failure{exitFailed, fmt.Sprintf("FAIL: the executions took %.2f%% of %s's edges, below the floor of %.2f%%", pe, t.covName, f.minEdgeCoverage)}
		}
	}
	return t, nil
}

// printRunHeader prints run's first line: what runs, where, and how.
func printRunHeader(f runFlags, out io.Writer) {
	mode := runMode(f)
	if f.interleave {
		mode += ", steps interleaved between transactions"
	}
	if f.faults > 0 {
		mode += fmt.Sprintf(", storage faults %.0f%%", 100*f.faults)
	}
	where := "in-memory storage"
	if f.storageURL != "" {
		where = "PostgreSQL storage"
	}
	seeds := fmt.Sprintf("%d deterministic executions", f.seeds)
	if f.seeds > 0 {
		seeds += fmt.Sprintf(" (seeds %d..%d)", f.seedBase, f.seedBase+f.seeds-1)
	}
	if f.walks > 0 {
		seeds += fmt.Sprintf(", %d directed walks of %s", f.walks, f.cfgPath)
	}
	fmt.Fprintf(out, "tracecheck run: %s, %d concurrent, %s, %s\n", seeds, f.concurrent, where, mode)
}

// runMode says which fences are on, or which mutant runs.
func runMode(f runFlags) string {
	switch {
	case f.unfenced != (core.Fences{}):
		return "FENCES OFF (the mutant)"
	case f.mutant != "":
		return "MUTANT " + f.mutant
	}
	return "fences on"
}

// runConcurrent runs the -concurrent executions and checks each one's
// invariants, trace and history.
func (t *tally) runConcurrent(ctx context.Context, f runFlags, meter *progress.Meter) error {
	for i := range f.concurrent {
		seed := uint64(f.seedBase + i)
		storage, done, err := f.storage(ctx)
		if err != nil {
			return err
		}
		res, runErr := sim.RunConcurrent(ctx, sim.ConcurrentConfig{
			Seed: seed, Procs: f.procs, Threads: f.threads, Messages: f.messages + 2, ClaimTTL: f.ttl,
			Unfenced: f.unfenced, Mutants: f.simMutants(), Storage: storage, Tracer: f.stepTracer,
		})
		done()
		meter.Add(1)
		t.concurrent++
		var inv *sim.InvariantError
		if runErr == nil || errors.As(runErr, &inv) {
			t.record("run: invariants", fmt.Sprintf("concurrent-%d", seed), runErr)
		}
		if err := t.invariant(runErr, fmt.Sprintf("concurrent %d", seed)); err != nil {
			return err
		}
		if f.shrink && res.Defect != nil && t.concDefect == nil {
			t.concDefect = &concurrentFailure{seed: seed, lines: res.Lines, defect: res.Defect}
		}
		tracecheck.Sort(res.Lines) // in the order the processes traced them
		st, checkErr := tracecheck.Check(res.Lines, tracecheck.WithFile(fmt.Sprintf("concurrent-%d", seed)))
		if err := t.trace(res.Lines, st, checkErr, fmt.Sprintf("concurrent-%d", seed), f.traceDir); err != nil {
			return err
		}
		vis := ""
		if f.traceDir != "" {
			vis = filepath.Join(f.traceDir, porcupineFile(fmt.Sprint(seed)))
		}
		illegal, unknown := t.lin.illegal, t.lin.unknown
		if err := t.lin.check(res, f.porcupineTimeout, f.htmlOut, vis); err != nil {
			return err
		}
		t.recordHistory(fmt.Sprintf("concurrent-%d", seed), t.lin.illegal > illegal, t.lin.unknown > unknown)
		if f.shrink {
			t.noteConcurrent(seed, res.Lines, checkErr, t.lin.illegal > illegal)
		}
	}
	return nil
}

// record keeps one check's verdict for -junit and -summary: err nil
// passed, else failed with err's text.
func (t *tally) record(suite, name string, err error) {
	if t.rep == nil {
		return
	}
	v := report.Verdict{Suite: suite, Name: name, Status: report.Passed}
	if err != nil {
		v.Status, v.Message = report.Failed, err.Error()
	}
	t.rep.Add(v)
}

// recordHistory keeps porcupine's verdict on a concurrent execution's
// history.
func (t *tally) recordHistory(name string, illegal, unknown bool) {
	if t.rep == nil {
		return
	}
	v := report.Verdict{Suite: "run: histories", Name: name, Status: report.Passed}
	switch {
	case illegal:
		v.Status, v.Message = report.Failed, "not linearizable: "+t.lin.last
	case unknown:
		v.Status, v.Message = report.Skipped, "inconclusive: porcupine timed out"
	}
	t.rep.Add(v)
}

// seeded counts one deterministic execution, in seed order.
func (t *tally) seeded(f runFlags, name string, e *shrink.Execution) error {
	seed := e.Log.Seed
	t.executions++
	t.invariantChecks += e.Sim.InvariantChecks
	var invErr error // not the typed nil of a *sim.InvariantError
	if e.Invariant != nil {
		invErr = e.Invariant
	}
	t.record("run: invariants", name, invErr)
	if e.Invariant != nil {
		if err := t.invariant(e.Invariant, strings.Replace(name, "-", " ", 1)); err != nil {
			return err
		}
	}
	var checkErr error
	if e.Violation != nil {
		checkErr = e.Violation
	}
	if err := t.trace(e.Lines, e.Trace, checkErr, name, f.traceDir); err != nil {
		return err
	}
	for _, fl := range e.Failures() {
		if !slices.ContainsFunc(t.failed, func(s failedSeed) bool { return s.failure == fl }) {
			t.failed = append(t.failed, failedSeed{failure: fl, seed: seed, exec: e})
		}
	}
	if f.opsOut != "" && name == fmt.Sprintf("seed-%d", f.seedBase) {
		return writeLogFile(f.opsOut, e.Log)
	}
	return nil
}

// runSeeds runs the deterministic executions on f.workers goroutines and
// hands each to fold in seed order, whatever order they finish in: the
// output is the same for any number of workers. At most a few executions
// per worker wait to be folded, so memory stays flat over many seeds.
func runSeeds(ctx context.Context, f runFlags, cov *sim.Coverage, fold func(uint64, *shrink.Execution, *sim.Visits) error) error {
	i := 0
	return runJobs(ctx, f.workers, cov, func() (uint64, bool) {
		if i == f.seeds {
			return 0, false
		}
		i++
		return uint64(f.seedBase + i - 1), true
	}, func(seed uint64) (*shrink.Execution, error) {
		e, err := runSeed(ctx, f, seed)
		if err != nil {
			return nil, fmt.Errorf("seed %d: %w", seed, err)
		}
		return e, nil
	}, fold)
}

// walksPerExecution is how many walks one directed execution drives, a
// thread each.
const walksPerExecution = 200

// runWalks runs f.walks walks of g, planned from the seed, as directed
// executions of walksPerExecution walks each, on f.workers workers, and
// folds them in order. The plan depends on the graph and -seed only, so
// the output is the same whatever the number of workers.
func runWalks(ctx context.Context, f runFlags, g *specmodel.Graph, cov *sim.Coverage, fold func(int, *shrink.Execution, *sim.Visits) error) error {
	pl, err := sim.NewPlanner(g, uint64(f.seedBase), sim.RunnerSkips)
	if err != nil {
		return err
	}
	// A directed execution's job: its number and its walks.
	type job struct {
		n     uint64
		walks []sim.Walk
	}
	left, n := f.walks, uint64(0)
	return runJobs(ctx, f.workers, cov, func() (job, bool) {
		var ws []sim.Walk
		for len(ws) < walksPerExecution && left > 0 {
			w, ok := pl.Next()
			if !ok {
				left = 0
				break
			}
			ws = append(ws, w)
			left--
		}
		if len(ws) == 0 {
			return job{}, false
		}
		n++
		return job{n: n - 1, walks: ws}, true
	}, func(j job) (*shrink.Execution, error) {
		storage, done, err := f.storage(ctx)
		if err != nil {
			return nil, err
		}
		defer done()
		e, err := shrink.Execute(ctx, sim.Config{
			Seed: j.n, Walks: j.walks, Spec: g.Model(), Storage: storage, Unfenced: f.unfenced, Interleave: f.interleave,
			Mutants: f.simMutants(),
		})
		if err != nil {
			return nil, fmt.Errorf("walks-%d: %w", j.n, err)
		}
		return e, nil
	}, func(j job, e *shrink.Execution, v *sim.Visits) error { return fold(int(j.n), e, v) })
}

// runJobs runs the deterministic executions next names on workers at once
// and folds them in the order next named them. With cov, each worker also
// follows its execution through the graph (the costly part of coverage),
// and fold marks what it visited.
func runJobs[J any](ctx context.Context, workers int, cov *sim.Coverage, next func() (J, bool), run func(J) (*shrink.Execution, error), fold func(J, *shrink.Execution, *sim.Visits) error) error {
	var follow func(*shrink.Execution) *sim.Visits
	if cov != nil {
		follow = func(e *shrink.Execution) *sim.Visits { return cov.Follow(e.Coverage) }
	}
	return runOrdered(ctx, workers, next, run, follow, fold)
}

// runOrdered runs the jobs next names on workers at once and folds their
// results in the order next named them; with follow, each worker also
// finds what its result visited, for fold to mark.
func runOrdered[J, R any](ctx context.Context, workers int, next func() (J, bool), run func(J) (R, error), follow func(R) *sim.Visits, fold func(J, R, *sim.Visits) error) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// On an early return the producer and the workers see ctx end; wait
	// for the workers only after cancelling.
	defer func() {
		cancel()
		wg.Wait()
	}()
	type slot struct {
		id     J
		exec   R
		visits *sim.Visits
		err    error
		done   chan struct{}
	}
	window := make(chan *slot, 2*workers) // in order
	jobs := make(chan *slot)
	go func() {
		defer close(window)
		defer close(jobs)
		for {
			id, ok := next()
			if !ok {
				return
			}
			s := &slot{id: id, done: make(chan struct{})}
			select {
			case window <- s:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- s:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		wg.Go(func() {
			for s := range jobs {
				s.exec, s.err = run(s.id)
				if s.err == nil && follow != nil {
					s.visits = follow(s.exec)
				}
				close(s.done)
			}
		})
	}
	for s := range window {
		select {
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if s.err != nil {
			return s.err
		}
		if err := fold(s.id, s.exec, s.visits); err != nil {
			return err
		}
	}
	return nil
}

// forkCut is the depth at which runForks cuts the spanning tree into
// jobs: deep enough that the jobs, a few hundred, keep every worker busy
// to the end, shallow enough that driving each job's path to its root
// costs little.
const forkCut = 6

// runForks drives every edge of g a plan can steer the runner along, on
// forks of the execution at each state (sim.Tree), in jobs of the tree's
// parts on f.workers workers, and folds each part's result in order: the output is
// the same for any number of workers.
func runForks(ctx context.Context, f runFlags, tr *sim.Tree, parts []sim.Part, fold func(int, *sim.TreeResult) error) error {
	i := 0
	return runOrdered(ctx, f.workers, func() (int, bool) {
		if i == len(parts) {
			return 0, false
		}
		i++
		return i - 1, true
	}, func(j int) (*sim.TreeResult, error) {
		res, err := tr.Drive(ctx, parts[j], sim.TreeConfig{
			Seed: uint64(f.seedBase), Unfenced: f.unfenced, Interleave: f.interleave, Mutants: f.simMutants(),
		})
		if err != nil {
			return nil, fmt.Errorf("forks, part %d: %w", j, err)
		}
		return res, nil
	}, nil, func(j int, r *sim.TreeResult, _ *sim.Visits) error { return fold(j, r) })
}

// forked counts one part of the forked executions, in order. A fork that
// failed is run again from its log as a deterministic execution, which
// then counts as one: its trace, its broken invariant, its story.
func (t *tally) forked(ctx context.Context, f runFlags, j int, r *sim.TreeResult) error {
	t.cov.Mark(r.Visits)
	t.forkEdges += r.Edges
	t.forks += r.Forks
	t.forkDiverged += r.Diverged
	t.forkFailed += r.Diverged + r.Broken + r.Rejected
	t.lines += r.Lines
	for a, n := range r.PerAction {
		t.perAction[a] += n
	}
	t.lapses += r.Lapses
	t.invariantChecks += r.InvariantChecks
	for k, fl := range r.Failed {
		name := fmt.Sprintf("forks-%d-%d", j, k)
		path := filepath.Join(f.shrinkDir, name+".ops.ndjson")
		if err := writeLogFile(path, fl.Log); err != nil {
			return err
		}
		if fl.Diverged {
			if t.firstDiverged == "" {
				t.firstDiverged = fmt.Sprintf("%s, %s (its operations: %s; tracecheck replay it)", name, fl.Edge, path)
			}
			continue
		}
		e, err := shrink.Execute(ctx, fl.Log.Config())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if e.Violation != nil {
			e.Violation.File = name
		}
		if len(e.Failures()) == 0 {
			return fmt.Errorf("%s: a fork failed (%s) but its log, replayed from Init, does not: the fork is not the execution its log says", name, fl.Edge)
		}
		if err := t.seeded(f, name, e); err != nil {
			return err
		}
	}
	return nil
}

// runSeed runs and checks the deterministic execution of one seed.
func runSeed(ctx context.Context, f runFlags, seed uint64) (*shrink.Execution, error) {
	storage, done, err := f.storage(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return shrink.Execute(ctx, sim.Config{
		Seed: seed, Procs: f.procs, Threads: f.threads, Messages: f.messages, Steps: f.steps,
		Unfenced: f.unfenced, Storage: storage,
		Interleave: f.interleave, Faults: f.faults,
		Mutants: f.simMutants(), Tracer: f.stepTracer,
	})
}

// simMutants are the code defects -mutant switches on in the simulations.
func (f runFlags) simMutants() sim.Mutants {
	m, _ := sim.ParseMutant(f.mutant) // none for "" and unfenced
	return m
}

// storage returns the storage of one execution: f.openStorage's, else
// openStorage's for -storage.
func (f runFlags) storage(ctx context.Context) (core.Storage, func(), error) {
	if f.openStorage != nil {
		return f.openStorage(ctx)
	}
	return openStorage(ctx, f.storageURL)
}

// openStorage returns the storage of one execution: nil (the default,
// in memory) without a URL, else a PostgreSQL store in a fresh schema that
// done drops.
func openStorage(ctx context.Context, url string) (core.Storage, func(), error) {
	if url == "" {
		return nil, func() {}, nil
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, err
	}
	s, err := fleet.OpenStore(ctx, url, postgres.Options{Schema: fmt.Sprintf("tcrun_%x", b)})
	if err != nil {
		return nil, nil, err
	}
	return s, func() {
		_ = s.DropSchema(context.WithoutCancel(ctx))
		s.Close()
	}, nil
}

// invariant counts a broken invariant; other errors end the run.
func (t *tally) invariant(err error, where string) error {
	var inv *sim.InvariantError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &inv):
		t.invariantFails[inv.Invariant]++
		if t.firstInvariant == nil {
			t.firstInvariant = fmt.Errorf("%s: %w", where, err)
		}
		return nil
	}
	return fmt.Errorf("%s: %w", where, err)
}

// trace counts one execution's checked lines and, with dir, writes them
// per thread.
func (t *tally) trace(lines []core.TraceEvent, st tracecheck.Stats, err error, name string, dir string) error {
	t.lines += len(lines)
	t.threads += st.Threads
	t.lapses += st.LapsesInferred
	t.liveLapses += st.LiveLapses
	t.invariantChecks += st.InvariantChecks
	twice, again := givenTwice(lines)
	t.givenTwice += twice
	t.givenAgain += again
	for a, n := range st.PerAction {
		t.perAction[a] += n
	}
	var v *tracecheck.Violation
	if err == nil || errors.As(err, &v) {
		t.record("run: traces", name, err)
	}
	switch {
	case errors.As(err, &v):
		t.traceFails++
		if t.firstTrace == nil {
			t.firstTrace = err
		}
	case err != nil:
		return err
	}
	if dir == "" {
		return nil
	}
	for _, th := range tracecheck.Order(lines) {
		// Each file is one thread, labelled by the checker's verdict on
		// that thread alone.
		own := make([]core.TraceEvent, len(th.Lines))
		for i, l := range th.Lines {
			own[i] = *l.Ev
		}
		prefix, at := "ok", 0
		var tv *tracecheck.Violation
		if _, err := tracecheck.Check(own); errors.As(err, &tv) {
			prefix, at = "bad", tv.Line
		}
		base := fmt.Sprintf("%s-%s-%s.ndjson", prefix, name, th.Thread)
		if err := writeTraceFile(filepath.Join(dir, base), own); err != nil {
			return err
		}
		if at > 0 {
			// scripts/tlc requires TLC to reject the file at this line too.
			if err := appendLine(filepath.Join(dir, "expected-lines"), fmt.Sprintf("%s %d", base, at)); err != nil {
				return err
			}
		}
	}
	return nil
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (t *tally) print(out io.Writer, elapsed time.Duration) {
	fmt.Fprintf(out, "\nexecutions          %d deterministic, %d concurrent (%d threads)\n", t.executions, t.concurrent, t.threads)
	fmt.Fprintf(out, "trace lines         %d\n", t.lines)
	fmt.Fprintf(out, "spec actions\n")
	for _, a := range core.Actions() {
		n := t.perAction[a]
		note := ""
		switch {
		case a == core.ActionLapse:
			n = t.lapses
			note = fmt.Sprintf("   (inferred, never written; %d under a live holder)", t.liveLapses)
		case n == 0:
			note = "   (never exercised)"
		}
		fmt.Fprintf(out, "  %-15s %8d%s\n", a, n, note)
	}
	fmt.Fprintf(out, "given twice         %d messages given to a model more than once; %d of them given again after steering that was never recorded (the exception: a steered run abandoned before its record)\n", t.givenTwice, t.givenAgain)
	fmt.Fprintf(out, "invariant checks    %d (storage after every operation, and the checker after every line)\n", t.invariantChecks)
	if len(t.invariantFails) == 0 {
		fmt.Fprintf(out, "invariants          held: I1_ConsumedAtMostOnce, I3_OneActiveRun, NoLiveAbandon, Liveness, RoundsAgree (the spec's pc[p] of each process agrees with Go's rounds at the end), NoDefectError (no call failed with an error only a defect explains)\n")
	} else {
		fmt.Fprintf(out, "invariants          BROKEN %s\n", countList(t.invariantFails))
	}
	if t.traceFails == 0 {
		fmt.Fprintf(out, "Go trace checker    accepted every trace\n")
	} else {
		fmt.Fprintf(out, "Go trace checker    REJECTED %d of %d executions' traces\n", t.traceFails, t.executions+t.concurrent)
	}
	fmt.Fprintf(out, "porcupine           %s\n", t.lin.summary())
	if t.cov != nil {
		v, n := t.cov.States()
		e, m := t.cov.Edges()
		ps, pe := t.coverage()
		fmt.Fprintf(out, "coverage            %.2f%% of states (%d of %d), %.2f%% of edges (%d of %d) of %s\n", ps, v, n, pe, e, m, t.covName)
	}
	if t.directed > 0 {
		fmt.Fprintf(out, "directed walks      %d in %d executions, %d left their plan\n", t.walks, t.directed, t.diverged)
	}
	if t.forks > 0 {
		fmt.Fprintf(out, "forked executions   %d of the %d edges a plan can steer the runner along, on %d forks; %d left their plan, %d failed\n", t.forkEdges, t.forkReach, t.forks, t.forkDiverged, t.forkFailed)
	}
	fmt.Fprintf(out, "time                %v\n", elapsed.Round(time.Millisecond))
}

// verdict is the run's exit: with mutant (unfenced, or a code mutant)
// a failure is the mutant caught, a pass the mutant surviving.
// Without a mutant, a spec action exercised fewer than minActions times
// fails the run too.
func (t *tally) verdict(mutant string, minActions int, out io.Writer) error {
	what, on := "the mutant "+mutant, "the mutant "+mutant+" is on"
	if mutant == "unfenced" {
		what, on = "the fences off", "the fences are off"
	}
	caught := len(t.invariantFails) > 0 || t.traceFails > 0 || t.lin.illegal > 0 || t.diverged > 0 || t.forkFailed > 0
	var b strings.Builder
	if t.firstInvariant != nil {
		fmt.Fprintf(&b, "\nfirst broken invariant: %v", t.firstInvariant)
	}
	if t.firstTrace != nil {
		fmt.Fprintf(&b, "\nfirst rejected trace: %v", t.firstTrace)
	}
	if t.lin.first != "" {
		fmt.Fprintf(&b, "\nfirst non-linearizable history: %s", t.lin.first)
	}
	if t.firstDiverged != "" {
		fmt.Fprintf(&b, "\nfirst walk or fork whose trace left its plan (the code took a step the spec's path did not): %s", t.firstDiverged)
	}
	if t.forkFailed > 0 {
		fmt.Fprintf(&b, "\nforked executions: %d of %d forks failed (left their plan, broke an invariant, or had their trace rejected)", t.forkFailed, t.forks)
	}
	switch {
	case mutant != "" && caught:
		return failure{exitFailed, fmt.Sprintf("FAIL (as it must with %s): the mutant was caught: invariants %s, %d traces rejected, %d histories not linearizable, %d walks left their plan, %d forks failed%s",
			what, countList(t.invariantFails), t.traceFails, t.lin.illegal, t.diverged, t.forkFailed, b.String())}
	case mutant != "":
		return failure{exitSurvived, "SURVIVED: " + on + " and no check caught it: the checks are blind"}
	case caught:
		return failure{exitFailed, "FAIL" + b.String()}
	}
	if rare := t.rareActions(minActions); len(rare) > 0 {
		return failure{exitFailed, fmt.Sprintf("FAIL: spec actions exercised fewer than %d times (-min-actions): %s", minActions, strings.Join(rare, ", "))}
	}
	if minActions > 0 && t.givenAgain == 0 {
		return failure{exitFailed, "FAIL: the run never reached the exception (-min-actions): no message given as steering to a run abandoned before its record and given again"}
	}
	if t.lin.unknown > 0 {
		return failure{exitInconclusive, fmt.Sprintf("INCONCLUSIVE: porcupine timed out on %d histories", t.lin.unknown)}
	}
	fmt.Fprintln(out, "PASS")
	return nil
}

// autoSteps is the smallest number of scheduled steps of seeded
// executions for which -min-actions is 1 by default. Measured: every spec
// action is exercised by any 5 seeds of 300 steps (seeds 0, 1000, 5000,
// 9000), and 200 seeds of 20 steps reach the rarest ones 3 times; 15000 is
// ten times the first.
const autoSteps = 15000

// autoMinActions is -min-actions' default: 1 for a run big enough that
// every spec action is reached in practice, else 0. A run with one
// process never fences anyone, and a -cfg bounds the processes and
// messages: neither is held to the floor unless asked.
func autoMinActions(f runFlags) int {
	if f.seeds*f.steps >= autoSteps && f.procs >= 2 && f.spec == nil {
		return 1
	}
	return 0
}

// rareActions names, in the spec's order, the actions the run exercised
// fewer than min times, with their counts.
func (t *tally) rareActions(min int) []string {
	var rare []string
	for _, a := range core.Actions() {
		n := t.perAction[a]
		if a == core.ActionLapse {
			n = t.lapses
		}
		if n < min {
			rare = append(rare, fmt.Sprintf("%s %d", a, n))
		}
	}
	return rare
}

// runFigures is run's summary for -json.
type runFigures struct {
	Executions       int            `json:"executions"`
	Concurrent       int            `json:"concurrent"`
	Threads          int            `json:"threads"`
	Lines            int            `json:"lines"`
	Actions          map[string]int `json:"actions"`
	LapsesInferred   int            `json:"lapses_inferred"`
	LiveLapses       int            `json:"live_lapses"`
	InvariantChecks  int            `json:"invariant_checks"`
	InvariantsBroken map[string]int `json:"invariants_broken"`
	TracesRejected   int            `json:"traces_rejected"`
	Histories        int            `json:"histories"`
	NotLinearizable  int            `json:"not_linearizable"`
	Inconclusive     int            `json:"inconclusive"`
	GivenTwice       int            `json:"given_twice"`
	GivenAgain       int            `json:"given_again_after_steering"`
	Stories          []story        `json:"stories,omitempty"`
	// With -cfg: the percentages of the cfg's states and edges visited,
	// and the directed walks.
	CoverageStates float64 `json:"coverage_states_pct,omitempty"`
	CoverageEdges  float64 `json:"coverage_edges_pct,omitempty"`
	Walks          int     `json:"walks,omitempty"`
	WalksDiverged  int     `json:"walks_diverged,omitempty"`
	// With -forks: edges driven as planned, of those a plan can steer the
	// runner along; forks made and failed.
	ForkEdges  int     `json:"fork_edges,omitempty"`
	ForkReach  int     `json:"fork_reachable_edges,omitempty"`
	Forks      int     `json:"forks,omitempty"`
	ForkFailed int     `json:"forks_failed,omitempty"`
	Seconds    float64 `json:"seconds"`
}

func (t *tally) figures() runFigures {
	r := runFigures{Executions: t.executions, Concurrent: t.concurrent, Threads: t.threads, Lines: t.lines,
		Actions: map[string]int{}, LapsesInferred: t.lapses, LiveLapses: t.liveLapses, InvariantChecks: t.invariantChecks,
		InvariantsBroken: t.invariantFails, TracesRejected: t.traceFails, Histories: t.lin.histories,
		NotLinearizable: t.lin.illegal, Inconclusive: t.lin.unknown, GivenTwice: t.givenTwice, GivenAgain: t.givenAgain, Stories: t.stories, Seconds: t.elapsed.Seconds()}
	for a, n := range t.perAction {
		r.Actions[string(a)] = n
	}
	r.Actions[string(core.ActionLapse)] = t.lapses
	if t.cov != nil {
		r.CoverageStates, r.CoverageEdges = t.coverage()
	}
	r.Walks, r.WalksDiverged = t.walks, t.diverged
	r.ForkEdges, r.ForkReach, r.Forks, r.ForkFailed = t.forkEdges, t.forkReach, t.forks, t.forkFailed
	return r
}

func countList(m map[string]int) string {
	if len(m) == 0 {
		return "none broken"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
