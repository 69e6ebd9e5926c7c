package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/report"
	"github.com/threadclaim/threadclaim/internal/sim/apimachine"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/internal/tlc"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

const tlcUsage = `usage: tracecheck tlc [flags] [all|spec|trace|generated|mutants|batch|differential] [DIR|FILE...]

Runs TLC (package tlc) and checks every result against what is expected:

  spec       every spec/*.cfg, whose first line declares its outcome:
               \* expect: ok               TLC must report no error
               \* expect: violation NAME   TLC must report the invariant or
                                           property NAME violated
             and, on a later leading line, "\* fires: ACTION..." names
             actions that must each take a step (TLC's -coverage)
             A cfg without that line, or naming more or less than one
             property, fails. Then each cfg's whole state graph, dumped
             by TLC, must be the Go model's (specmodel): every state and
             every transition, by the same action to the same state (for
             a cfg with a violation: the outcome and the states up to it)
  trace      the trace spec tla/ThreadClaimLapseTrace.tla on every *.ndjson
             of each DIR (default: $TRACE_DIR, else tla/testdata, each of
             its subdirectories that holds traces, and tracecheck/testdata):
             ok-* must be accepted, bad-* rejected, at the line the
             directory's expected-lines file names (the Go checker's line)
             when it names one, and held to the fences its "fences" file
             names (all when there is none). A FILE given by itself is
             expected to be accepted unless it is named bad-*.
             Every thread of every file goes to ONE TLC run (the trace
             spec's batch mode; one run per set of fences): it prints the
             run's lines per second, then each file's verdict.
  generated  every trace of a default 'tracecheck run -trace-dir' (fences
             on, about 25,000 lines: all must be accepted), of
             'tracecheck run -unfenced -seeds 3 -concurrent 0 -trace-dir'
             (the bad-* threads rejected at the Go checker's line) and of
             40 apimachine.Machine (the public API misused: all must be
             accepted), checked as fixtures, all in one TLC run
  all        (default) spec, then trace, then generated, then mutants and
             differential. scripts/test runs it with -skip for four of
             the models; the traces are the same in that quick run
  mutants    every spec mutant in spec/mutants (an edit of a copy of spec/
             or tla/) must be caught by the check it names: a model cfg
             reporting other than its expectation, a trace fixture's
             verdict changing, or (graph spec/NAME.cfg) the cfg's state
             graph differing from the Go model's; a mutant that survives
             fails, by name
  differential
             -mutated traces (default 2000), mutants of the traces the Go
             simulation writes (tracecheck run -trace-dir) and of walks of
             the model, each through the Go checker and through TLC (in
             one batch): both must give the same verdict at the same line
             on every one; then the same with every fence off, with 80
             walks of the unfenced model that each break an invariant, as
             walked and mutated; prints the counts and every disagreement
  batch      every trace of the DIRs and FILEs, split by thread, in ONE TLC
             run, with every fence on; prints each verdict and the lines
             per second. Each file's verdict must be the Go checker's, at
             the same line; ok-* must be accepted, bad-* rejected

-skip names cfgs not to run: scripts/test skips the long exhaustive
models (the workflow runs them all).

Before TLC sees a trace, the Go reader checks its shape: a malformed or
empty trace is exit 2 with file:line: reason (a bad-* fixture the reader
rejects at its expected line passes without TLC). A file holding several
threads is split by thread, each thread checked on its own in file order,
and lines are reported by their numbers in the file (the least over its
threads). Lines per second are given per second of wall time and per
CPU-second of the JVM (the fair figure on a shared machine).

Jars (see spec/README.md, "Pinned tools"): $TLA2TOOLS_JAR and
$COMMUNITY_MODULES_JAR (checked against $TLA2TOOLS_SHA256 and
$COMMUNITY_MODULES_SHA256 when set); else the local directory
${TLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/threadclaim-tlc}/local;
else, for the models only, the pinned release in scripts/tlc-pins,
downloaded (unless TLC_OFFLINE=1) and verified by sha256.
TLC_WORKERS sets the models' workers (default auto); TLC_KEEP_LOGS a
directory to copy every TLC run's output into.

Exit codes: 0 all as expected; 1 something unexpected (or a jar's sha256
is wrong); 2 bad usage or malformed input; 3 TLC was not run (no java, or
no jar could be had; in all mode, traces not run); 4 a TLC run did not
finish (its deadline passed, or TLC crashed).

Flags:
`

// exitNotRun is TLC not run at all (no java, no jar).
const exitNotRun = 3

// tlcOptions are the flags of tracecheck tlc.
type tlcOptions struct {
	root     string
	timeout  time.Duration
	parallel int
	keepLogs string
	skip     []string       // cfg file names not to run
	mutated  int            // differential: mutated traces compared
	seed     uint64         // differential: the mutations' seed
	rep      *report.Report // -junit, -summary, -json: a verdict per check
	json     io.Writer      // -json: where the object goes
}

// finish writes the verdicts to -junit, -summary and -json (-json: the
// object every command prints, its figures the checks' verdicts) after
// the checks have run; bad usage writes nothing.
func (o tlcOptions) finish(files *report.Files, mode string, err error) error {
	if exitCode(err) == exitUsage {
		if o.json != nil {
			return writeJSON(o.json, "tlc", err, nil)
		}
		return err
	}
	status, msg := verdictOf(err)
	o.rep.Add(report.Verdict{Suite: "tlc: verdict", Name: "tlc " + mode, Status: status, Message: msg})
	err = writeReports(files, o.rep, err)
	if o.json != nil {
		return writeJSON(o.json, "tlc", err, struct {
			Mode   string           `json:"mode"`
			Checks []report.Verdict `json:"checks"`
		}{mode, o.rep.Verdicts})
	}
	return err
}

func cmdTLC(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("tlc", flag.ContinueOnError)
	var o tlcOptions
	files := reportFlags(fs)
	jsonOut := jsonFlag(fs)
	fs.StringVar(&o.root, "root", ".", "the repository's root (holds spec/ and tla/)")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "each TLC run's deadline")
	fs.IntVar(&o.parallel, "parallel", runtime.GOMAXPROCS(0), "spec models and spec mutants checked at once (a mutant's JVM has one worker); a batch of traces is one JVM with TLC's workers")
	fs.StringVar(&o.keepLogs, "keep-logs", os.Getenv("TLC_KEEP_LOGS"), "copy each TLC run's output into this directory")
	fs.IntVar(&o.mutated, "mutated", 2000, "differential: how many mutated traces to compare")
	fs.Uint64Var(&o.seed, "seed", 1, "differential: the seed of the mutations (the same seed, the same traces)")
	fs.Func("skip", "comma-separated spec/*.cfg file names not to run (each must exist), e.g. the long exhaustive models in a quick run", func(v string) error {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				o.skip = append(o.skip, name)
			}
		}
		return nil
	})
	if err := parse(fs, args, stdout, stderr, tlcUsage); err != nil {
		return err
	}
	if err := files.Check(); err != nil {
		return usageError{err.Error()}
	}
	// Each JVM runs in a process group of its own (package tlc), out of
	// reach of the terminal's Ctrl-C: an interrupt cancels the runs, which
	// kills their groups.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	mode, explicitAll := "all", false
	rest := fs.Args()
	if len(rest) > 0 {
		switch rest[0] {
		case "all", "spec", "trace", "generated", "mutants", "batch", "differential":
			mode, explicitAll = rest[0], rest[0] == "all"
			// Flags may follow the mode too.
			if err := parse(fs, rest[1:], stdout, stderr, tlcUsage); err != nil {
				return err
			}
			rest = fs.Args()
		}
	}
	if err := checkReportFiles(files, rest...); err != nil {
		return err
	}
	if *jsonOut {
		// stdout carries the JSON object; the progress goes to stderr.
		stdout, o.json = stderr, stdout
	}
	if files.Wanted() || *jsonOut {
		o.rep = &report.Report{Name: "tracecheck tlc"}
		defer func() { err = o.finish(files, mode, err) }()
	}
	if err := checkTLCArgs(o, mode, explicitAll, rest); err != nil {
		return err
	}

	// Every trace's shape is checked before any TLC runs.
	var traces []traceInput
	if mode == "trace" || mode == "all" {
		var err error
		traces, err = collectTraces(o.root, rest)
		if err != nil {
			return err
		}
	}

	env, err := tlc.Find(ctx, findConfig(o.root))
	switch {
	case errors.Is(err, tlc.ErrNotFound):
		return failure{exitNotRun, fmt.Sprintf("TLC was not run: %v", err)}
	case err != nil:
		return failure{exitFailed, fmt.Sprintf("tracecheck tlc: %v", err)}
	}
	version, err := env.Version(ctx)
	if err != nil {
		return failure{exitCouldNotRun, fmt.Sprintf("tracecheck tlc: %v", err)}
	}
	digest, err := tlc.FileSHA256(env.Jar)
	if err != nil {
		return failure{exitCouldNotRun, fmt.Sprintf("tracecheck tlc: %v", err)}
	}
	// A local jar is used without a digest to check: its own is printed.
	fmt.Fprintf(stdout, "tlc: %s\ntlc: %s (from %s; sha256 %s)\n", version, env.Jar, env.Source, digest)
	tracesNotRun := ""
	if mode != "spec" {
		if env.CommunityJar == "" {
			tracesNotRun = fmt.Sprintf("no %s for the trace spec (set %s, or put one in %s)", tlc.CommunityName, tlc.EnvCommunity, findConfig(o.root).LocalDir())
			if mode != "all" {
				return failure{exitNotRun, "TLC was not run: " + tracesNotRun}
			}
		} else {
			fmt.Fprintf(stdout, "tlc: %s\n", env.CommunityJar)
		}
	}

	work, err := os.MkdirTemp("", "tracecheck-tlc-")
	if err != nil {
		return failure{exitCouldNotRun, fmt.Sprintf("tracecheck tlc: %v", err)}
	}
	defer os.RemoveAll(work)
	r := &tlcRun{ctx: ctx, env: env, opts: o, work: work, out: stdout, start: time.Now()}
	if err := r.copySpecs(); err != nil {
		return failure{exitCouldNotRun, fmt.Sprintf("tracecheck tlc: %v", err)}
	}
	return r.check(mode, rest, traces, tracesNotRun)
}

// check runs mode's checks and prints the summary; tracesNotRun says why
// the traces were not run in all mode ("" when they were).
func (r *tlcRun) check(mode string, rest []string, traces []traceInput, tracesNotRun string) error {
	switch mode {
	case "mutants":
		r.begin("spec mutants")
		if err := r.checkMutants(); err != nil {
			return err
		}
		return r.summary("")
	case "differential":
		r.begin("differential")
		if err := r.checkDifferential(); err != nil {
			return err
		}
		return r.summary("")
	case "batch":
		r.begin("batch")
		if err := r.checkBatch(rest); err != nil {
			return err
		}
		return r.summary("")
	}
	if mode == "spec" || mode == "all" {
		r.begin("models")
		r.checkModels()
	}
	if tracesNotRun == "" {
		if mode == "trace" || mode == "all" {
			r.begin("trace fixtures")
			r.checkTraces("trace fixtures", traces)
		}
		if mode == "generated" || mode == "all" {
			r.begin("generated traces")
			if err := r.checkGenerated(); err != nil {
				return err
			}
		}
		if mode == "all" {
			// The spec mutants (each must be caught) and the differential
			// (mutated traces: both checkers agree on every verdict and
			// line).
			r.begin("spec mutants")
			if err := r.checkMutants(); err != nil {
				return err
			}
			r.begin("differential")
			if err := r.checkDifferential(); err != nil {
				return err
			}
		}
	}
	return r.summary(tracesNotRun)
}

// checkTLCArgs refuses bad usage before anything runs: an unknown mode,
// paths outside trace and batch, bad numbers, no spec/ under -root, a
// -skip naming no cfg.
func checkTLCArgs(o tlcOptions, mode string, explicitAll bool, rest []string) error {
	if len(rest) > 0 && mode == "all" && !explicitAll {
		if _, err := os.Stat(rest[0]); err != nil {
			return usageError{fmt.Sprintf("unknown mode %q: want all, spec, trace, generated, mutants, differential or batch (paths follow trace or batch)", rest[0])}
		}
	}
	if len(rest) > 0 && mode != "trace" && mode != "batch" {
		return usageError{fmt.Sprintf("paths (%s) are for the trace mode only", strings.Join(rest, " "))}
	}
	if o.parallel < 1 {
		return usageError{"-parallel must be at least 1"}
	}
	if o.timeout <= 0 {
		return usageError{"-timeout must be positive"}
	}
	if o.mutated < 1 {
		// Before TLC is looked for: bad usage runs nothing.
		return usageError{"-mutated must be at least 1"}
	}
	if fi, err := os.Stat(o.keepLogs); o.keepLogs != "" && err == nil && !fi.IsDir() {
		return usageError{fmt.Sprintf("-keep-logs %s: not a directory", o.keepLogs)}
	}
	if _, err := os.Stat(filepath.Join(o.root, "spec")); err != nil {
		return usageError{fmt.Sprintf("%s is not the repository's root (no spec/): run from there or give -root", o.root)}
	}
	for _, name := range o.skip {
		if fi, err := os.Stat(filepath.Join(o.root, "spec", name)); err != nil || !strings.HasSuffix(name, ".cfg") || fi.IsDir() {
			return usageError{fmt.Sprintf("-skip %s: no such spec/*.cfg", name)}
		}
	}
	return nil
}

// findConfig is where tracecheck tlc looks for the jars: the environment,
// the local directory, and the release pinned in scripts/tlc-pins, which
// scripts/tlc-jars downloads.
func findConfig(root string) tlc.FindConfig {
	cfg := tlc.FindConfig{}
	pins, err := readPins(filepath.Join(root, "scripts", "tlc-pins"))
	if err != nil {
		return cfg
	}
	cfg.Release = tlc.Release{URL: pins["TLA2TOOLS_RELEASE_URL"], SHA256: pins["TLA2TOOLS_RELEASE_SHA256"]}
	script := filepath.Join(root, "scripts", "tlc-jars")
	cfg.Fetch = func(ctx context.Context, rel tlc.Release, dest string) error {
		cmd := exec.CommandContext(ctx, script, "fetch", rel.URL, rel.SHA256, dest)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	return cfg
}

// readPins reads scripts/tlc-pins: KEY=VALUE lines, # comments.
func readPins(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pins := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE", path, l)
		}
		pins[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return pins, nil
}

// tlcRun is one tracecheck tlc invocation's state: the checks so far.
type tlcRun struct {
	ctx   context.Context
	env   tlc.Env
	opts  tlcOptions
	work  string
	out   io.Writer
	start time.Time

	mu                          sync.Mutex
	checked, failed, incomplete int
	runs                        int
	models, accepted, rejected  int
	readerRejected, lines       int
	skipped                     int
	suite                       string // the checks' kind, for the report
	// verified: the model checks (a spec mutant's caught-by: "spec/NAME.cfg",
	// "graph spec/NAME.cfg") that passed in this run, which the mutants'
	// baseline need not run again (tlc.MutantRun.Verified).
	verified map[string]bool
}

// passed notes a model check that passed, for the mutants' baseline.
func (r *tlcRun) passed(check string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.verified == nil {
		r.verified = map[string]bool{}
	}
	r.verified[check] = true
}

// begin names the kind of the checks that follow, for -junit and -summary.
func (r *tlcRun) begin(suite string) {
	r.mu.Lock()
	r.suite = "tlc: " + suite
	r.mu.Unlock()
}

// verdict keeps one check's verdict for the report; r.mu is held.
func (r *tlcRun) verdict(status report.Status, what, detail string, log *bytes.Buffer) {
	if r.opts.rep == nil {
		return
	}
	v := report.Verdict{Suite: r.suite, Name: what, Status: status}
	if status != report.Passed {
		v.Message = detail
		if log != nil && log.Len() > 0 {
			v.Story = "the last lines of TLC's output:\n" + lastLines(log.String(), 40)
		}
	} else {
		v.Story = detail
	}
	r.opts.rep.Add(v)
}

// lastLines is s's last n lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

func (r *tlcRun) copySpecs() error {
	for _, d := range []string{"spec", "tla"} {
		if err := copyFiles(filepath.Join(r.opts.root, d), filepath.Join(r.work, d), ".tla", ".cfg"); err != nil {
			return err
		}
	}
	return nil
}

// copyFiles copies src's files with one of the suffixes into dst: TLC
// runs on copies, so that nothing it writes lands in the repository.
func copyFiles(src, dst string, suffixes ...string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		ok := false
		for _, s := range suffixes {
			ok = ok || strings.HasSuffix(name, s)
		}
		if !ok || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// runTLC runs one job, keeping its output for the report and the logs.
func (r *tlcRun) runTLC(name string, job tlc.Job) (*tlc.Result, *bytes.Buffer, time.Duration, error) {
	var out bytes.Buffer
	job.Output = &out
	job.Timeout = r.opts.timeout
	r.mu.Lock()
	r.runs++
	job.MetaDir = filepath.Join(r.work, "meta", strconv.Itoa(r.runs))
	r.mu.Unlock()
	t0 := time.Now()
	res, err := r.env.Run(r.ctx, job)
	d := time.Since(t0)
	r.keepLog(name, &out)
	return res, &out, d, err
}

// report prints one check's line; a failure gets the end of TLC's output.
func (r *tlcRun) report(ok bool, what, detail string, log *bytes.Buffer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checked++
	if ok {
		r.verdict(report.Passed, what, detail, nil)
		fmt.Fprintf(r.out, "PASS  %s: %s\n", what, detail)
		return
	}
	r.verdict(report.Failed, what, detail, log)
	r.failed++
	fmt.Fprintf(r.out, "FAIL  %s: %s\n", what, detail)
	if log != nil && log.Len() > 0 {
		fmt.Fprintln(r.out, "      last lines of TLC's output:")
		lines := strings.Split(strings.TrimRight(log.String(), "\n"), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		for _, l := range lines {
			fmt.Fprintf(r.out, "      | %s\n", l)
		}
	}
}

// couldNotRun reports a run that ended without a result.
func (r *tlcRun) couldNotRun(what string, err error, log *bytes.Buffer) {
	r.report(false, what, fmt.Sprintf("TLC did not finish: %v", err), log)
	r.mu.Lock()
	r.failed--
	r.incomplete++
	if rep := r.opts.rep; rep != nil {
		rep.Verdicts[len(rep.Verdicts)-1].Status = report.Errored
	}
	r.mu.Unlock()
}

func (r *tlcRun) summary(tracesNotRun string) error {
	elapsed := time.Since(r.start).Round(100 * time.Millisecond)
	counts := fmt.Sprintf("%d models (%d skipped), %d traces (%d accepted, %d rejected, %d of them by the Go reader), %d TLC runs, %d trace lines, %v",
		r.models, r.skipped, r.accepted+r.rejected, r.accepted, r.rejected, r.readerRejected, r.runs, r.lines, elapsed)
	switch {
	case r.failed > 0:
		return failure{exitFailed, fmt.Sprintf("tlc: %d of %d checks unexpected, %d did not finish; %s", r.failed, r.checked, r.incomplete, counts)}
	case r.incomplete > 0:
		return failure{exitCouldNotRun, fmt.Sprintf("tlc: %d of %d checks did not finish; %s", r.incomplete, r.checked, counts)}
	}
	fmt.Fprintf(r.out, "tlc: all %d checks as expected: %s\n", r.checked, counts)
	if tracesNotRun != "" {
		// The models ran; the traces could not: that is not a pass.
		return failure{exitNotRun, "TLC was not run on the traces: " + tracesNotRun}
	}
	return nil
}

// moduleFor is the spec module a cfg checks: the longest name among the
// modules that prefixes the cfg's.
func moduleFor(cfg string, modules []string) string {
	base := strings.TrimSuffix(filepath.Base(cfg), ".cfg")
	best := ""
	for _, m := range modules {
		if strings.HasPrefix(base, m) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// checkModels checks every spec/*.cfg against its expectation and, for
// the spec's own module, its state graph against the Go model's. The
// cfgs are checked -parallel at once (a small model's run is mostly its
// JVM starting, on one core) and reported in the cfgs' order.
func (r *tlcRun) checkModels() {
	dir := filepath.Join(r.work, "spec")
	cfgs, _ := filepath.Glob(filepath.Join(dir, "*.cfg"))
	tlas, _ := filepath.Glob(filepath.Join(dir, "*.tla"))
	var modules []string
	for _, t := range tlas {
		modules = append(modules, strings.TrimSuffix(filepath.Base(t), ".tla"))
	}
	if len(cfgs) == 0 {
		r.report(false, "spec/", "no *.cfg to check", nil)
		return
	}
	done := make([]chan func(), len(cfgs))
	for i := range done {
		done[i] = make(chan func(), 1)
	}
	go func() {
		slots := make(chan struct{}, max(1, r.opts.parallel))
		for i, cfg := range cfgs {
			slots <- struct{}{}
			go func() {
				defer func() { <-slots }()
				done[i] <- r.checkModel(dir, cfg, modules)
			}()
		}
	}()
	for _, d := range done {
		(<-d)()
	}
}

// checkModel runs TLC on one cfg (and compares its graph) and returns
// what reports the outcome, for checkModels to call in the cfgs' order.
func (r *tlcRun) checkModel(dir, cfg string, modules []string) (reportIt func()) {
	what := "spec/" + filepath.Base(cfg)
	if slices.Contains(r.opts.skip, filepath.Base(cfg)) {
		return func() {
			r.mu.Lock()
			r.skipped++
			r.verdict(report.Skipped, what, "-skip", nil)
			r.mu.Unlock()
			fmt.Fprintf(r.out, "SKIP  %s: -skip\n", what)
		}
	}
	exp, err := tlc.ReadExpectation(cfg)
	if err != nil {
		return func() { r.report(false, what, strings.Replace(err.Error(), cfg, what, 1), nil) }
	}
	module := moduleFor(cfg, modules)
	if module == "" {
		return func() { r.report(false, what, "no spec/*.tla module whose name prefixes the cfg's", nil) }
	}
	r.mu.Lock()
	r.models++
	r.mu.Unlock()
	// A "\* fires:" line asks for TLC's -coverage: each action it names
	// must take a step (tlc.Expectation).
	res, log, d, err := r.runTLC(what, tlc.Job{Spec: module + ".tla", Config: filepath.Base(cfg), Dir: dir, Args: exp.Args()})
	if err != nil {
		return func() { r.couldNotRun(what, err, log) }
	}
	detail := fmt.Sprintf("expected %s, got %s", exp, describe(res))
	problem := exp.Check(res)
	if problem != "" {
		detail = problem
	} else if len(exp.Fires) > 0 {
		detail += fmt.Sprintf(", all %d actions on its fires line took steps", len(exp.Fires))
	}
	graph := func() {}
	if module == specmodel.Module {
		graph = r.checkGraph(cfg)
	}
	return func() {
		r.report(problem == "", what, fmt.Sprintf("%s; %s, %.1fs", detail, stats(res), d.Seconds()), log)
		if problem == "" {
			r.passed(what)
		}
		graph()
	}
}

// checkGraph runs TLC on the cfg again, dumping its state graph, and
// requires the Go model of the spec (specmodel) to have the same graph:
// for a cfg with no violation every state and every transition, by the
// same action to the same state; for one with a violation the same
// outcome and the states up to its depth. A spec whose actions change
// (an edit of a guard, a mutant) fails here unless the model changes with
// it, even where no invariant notices.
func (r *tlcRun) checkGraph(cfg string) (reportIt func()) {
	what := "graph spec/" + filepath.Base(cfg)
	t0 := time.Now()
	r.mu.Lock()
	r.runs++
	r.mu.Unlock()
	cmp, err := r.env.CompareGraph(r.ctx, cfg)
	d := time.Since(t0)
	if err != nil {
		if r.ctx.Err() != nil {
			return func() { r.couldNotRun(what, err, nil) }
		}
		return func() { r.report(false, what, fmt.Sprintf("TLC's state graph against the Go model: %v", err), nil) }
	}
	if !cmp.Equal() {
		return func() {
			r.report(false, what, fmt.Sprintf("TLC's state graph is not the Go model's: %d states and %d transitions only TLC's, %d and %d only the model's; first:\n%s",
				cmp.OnlyTLC, cmp.OnlyTLCEdges, cmp.OnlyModel, cmp.OnlyModelEdges, indent(cmp.Differences(), "      ")), nil)
		}
	}
	if outcome := cmp.Summary; outcome.Violated != "" {
		return func() {
			r.passed(what)
			r.report(true, what, fmt.Sprintf("the Go model's: %s violated at depth %d by the same counterexample, the same %s states up to it, %.1fs",
				outcome.Violated, outcome.Depth, commas(int64(cmp.TLCStates)), d.Seconds()), nil)
		}
	}
	return func() {
		r.passed(what)
		r.report(true, what, fmt.Sprintf("the Go model's, state for state and edge for edge: %s states, %s transitions, %.1fs",
			commas(int64(cmp.TLCStates)), commas(int64(cmp.TLCEdges)), d.Seconds()), nil)
	}
}

// describe is a result in the words of a cfg's expect line.
func describe(res *tlc.Result) string {
	switch res.Outcome {
	case tlc.NoError:
		return "ok"
	case tlc.InvariantViolated, tlc.PropertyViolated:
		return "violation " + res.Name
	case tlc.Deadlock:
		return "deadlock"
	}
	text := strings.TrimSpace(res.Text)
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	return fmt.Sprintf("%s (%s)", res.Outcome, text)
}

func stats(res *tlc.Result) string {
	n := func(v int64) string {
		if v < 0 {
			return "?"
		}
		return commas(v)
	}
	depth := "?"
	if res.Depth >= 0 {
		depth = strconv.Itoa(res.Depth)
	}
	return fmt.Sprintf("%s distinct states, depth %s", n(res.Distinct), depth)
}

func commas(v int64) string {
	s := strconv.FormatInt(v, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// traceInput is one trace file to put through TLC, read and split by
// thread before TLC sees it.
type traceInput struct {
	path, show string
	// want is "accepted", "rejected" or "" (a fixture whose name says
	// neither: a failure).
	want       string
	expectLine int         // the Go checker's line for a bad-* fixture, 0 if none
	fences     core.Fences // the fences its directory names (tlc.ReadFences); all without a file
	// threads are the file's lines by thread, each in file order, with
	// their line numbers in the file (tlc.SplitThreads).
	threads []tlc.Thread
	// readerErr is the Go reader's rejection of a bad-* fixture.
	readerErr *tracecheck.LineError
}

// collectTraces reads every trace the trace mode checks. Paths are
// directories of fixtures or single files; none means $TRACE_DIR or the
// fixture directories: tla/testdata with its subdirectories (each held to
// the fences its "fences" file names: tlc.FixtureDirs, the spec mutants'
// too) and tracecheck/testdata. A malformed trace is a usage error (exit
// 2) naming its file and line, unless it is a bad-* fixture.
func collectTraces(root string, paths []string) ([]traceInput, error) {
	if len(paths) == 0 {
		if d := os.Getenv("TRACE_DIR"); d != "" {
			paths = strings.Fields(d)
		} else {
			paths = append(tlc.FixtureDirs(root), filepath.Join(root, "tracecheck", "testdata"))
		}
	}
	var out []traceInput
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, usageError{err.Error()}
		}
		if !fi.IsDir() {
			in, err := readTrace(root, p, false, nil, core.AllFences())
			if err != nil {
				return nil, err
			}
			out = append(out, in)
			continue
		}
		files, _ := filepath.Glob(filepath.Join(p, "*.ndjson"))
		if len(files) == 0 {
			return nil, usageError{fmt.Sprintf("%s: no *.ndjson traces", p)}
		}
		sort.Strings(files)
		expect, err := tlc.ReadExpectedLines(filepath.Join(p, "expected-lines"))
		if err != nil {
			return nil, usageError{err.Error()}
		}
		fences, err := tlc.ReadFences(filepath.Join(p, "fences"))
		if err != nil {
			return nil, usageError{err.Error()}
		}
		for _, f := range files {
			in, err := readTrace(root, f, true, expect, fences)
			if err != nil {
				return nil, err
			}
			out = append(out, in)
		}
	}
	return out, nil
}

func readTrace(root, path string, fixture bool, expect map[string]int, fences core.Fences) (traceInput, error) {
	base := filepath.Base(path)
	in := traceInput{path: path, show: relTo(root, path), expectLine: expect[base], fences: fences}
	switch {
	case strings.HasPrefix(base, "ok-"):
		in.want = "accepted"
	case strings.HasPrefix(base, "bad-"):
		in.want = "rejected"
	case !fixture:
		in.want = "accepted"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return in, usageError{err.Error()}
	}
	lines, err := tracecheck.Read(bytes.NewReader(b), in.show)
	var le *tracecheck.LineError
	switch {
	case errors.As(err, &le) && in.want == "rejected" && fixture:
		in.readerErr = le
		return in, nil
	case errors.As(err, &le):
		return in, failure{exitUsage, le.Error()}
	case err != nil:
		return in, failure{exitUsage, fmt.Sprintf("%s: %v", in.show, err)}
	case len(lines) == 0:
		return in, failure{exitUsage, fmt.Sprintf("%s:1: empty trace", in.show)}
	}
	in.threads = tlc.SplitThreads(lines)
	return in, nil
}

func relTo(root, p string) string {
	absRoot, err1 := filepath.Abs(root)
	absP, err2 := filepath.Abs(p)
	if err1 != nil || err2 != nil {
		return p
	}
	if rel, err := filepath.Rel(absRoot, absP); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// batchRun is one run of the trace spec's batch mode as this command
// makes it: its scratch directories, its deadline, and its output kept
// for the report and for -keep-logs.
func (r *tlcRun) batchRun(name string, fences core.Fences) (tlc.Batch, *bytes.Buffer, func()) {
	var out bytes.Buffer
	r.mu.Lock()
	r.runs++
	meta := filepath.Join(r.work, "meta", strconv.Itoa(r.runs))
	r.mu.Unlock()
	b := tlc.Batch{
		Dir: filepath.Join(r.work, "tla"), SpecDir: filepath.Join(r.work, "spec"), Unfenced: core.AllFences().Without(fences),
		Job: tlc.Job{Timeout: r.opts.timeout, Output: &out, MetaDir: meta},
	}
	return b, &out, func() { r.keepLog(name, &out) }
}

// keepLog copies a run's output into -keep-logs, when it is set.
func (r *tlcRun) keepLog(name string, out *bytes.Buffer) {
	if r.opts.keepLogs == "" {
		return
	}
	err := os.MkdirAll(r.opts.keepLogs, 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(r.opts.keepLogs, strings.NewReplacer("/", "_", " ", "_").Replace(name)+".log"), out.Bytes(), 0o644)
	}
	if err != nil {
		// Not a verdict: said, where it was dropped without a word.
		r.mu.Lock()
		fmt.Fprintf(r.out, "tlc: -keep-logs: %s's output not kept: %v\n", name, err)
		r.mu.Unlock()
	}
}

// speed is a batch's lines per second of wall time and per CPU-second of
// the JVM (the fair figure on a shared machine).
func speed(lines int, wall time.Duration, res *tlc.Result) string {
	s := fmt.Sprintf("%d lines, %.1fs: %.0f lines/s", lines, wall.Seconds(), float64(lines)/wall.Seconds())
	if res != nil && res.CPU > 0 {
		s += fmt.Sprintf("; %.1fs of CPU: %.0f lines per CPU-second", res.CPU.Seconds(), float64(lines)/res.CPU.Seconds())
	}
	return s
}

// checkTraces puts every trace's threads through the trace spec, all of
// them in ONE TLC run (the batch mode) per set of fences, and reports each
// file's verdict, in order, and each run's speed. A rejection is reported
// at its line in the file: the least over the file's threads, as the Go
// checker stops at the first violation in file order.
func (r *tlcRun) checkTraces(label string, traces []traceInput) {
	rejectAt := make([]int, len(traces))
	checked := make([]bool, len(traces)) // TLC gave a verdict
	type group struct {
		fences core.Fences
		idx    []int
	}
	var groups []*group
	byKey := map[string]*group{}
	for i, in := range traces {
		if in.want == "" || in.readerErr != nil {
			continue
		}
		k := in.fences.String()
		g := byKey[k]
		if g == nil {
			g = &group{fences: in.fences}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	for _, g := range groups {
		var flat []tlc.Thread
		lines := 0
		for _, i := range g.idx {
			flat = append(flat, traces[i].threads...)
			lines += countLines(&traces[i])
		}
		what := label
		if g.fences != core.AllFences() {
			what += fmt.Sprintf(" (fences on: %q)", tlc.TraceFences(g.fences))
		}
		b, log, keep := r.batchRun(what, g.fences)
		t0 := time.Now()
		at, res, err := r.env.CheckThreads(r.ctx, b, flat)
		d := time.Since(t0)
		keep()
		switch {
		case errors.Is(err, tlc.ErrBatch):
			r.report(false, what, fmt.Sprintf("%d traces (%d threads) in one TLC run: %v", len(g.idx), len(flat), err), log)
			continue
		case err != nil:
			r.couldNotRun(fmt.Sprintf("%s: %d traces (%d threads) in one TLC run", what, len(g.idx), len(flat)), err, log)
			continue
		}
		for _, i := range g.idx {
			for range traces[i].threads {
				if a := at[0]; a > 0 && (rejectAt[i] == 0 || a < rejectAt[i]) {
					rejectAt[i] = a
				}
				at = at[1:]
			}
			checked[i] = true
		}
		r.mu.Lock()
		r.lines += lines
		r.mu.Unlock()
		fmt.Fprintf(r.out, "tlc: %s: %d traces (%d threads) in one TLC run, %s\n", what, len(g.idx), len(flat), speed(lines, d, res))
	}
	for i := range traces {
		switch in := &traces[i]; {
		case in.want == "":
			r.report(false, in.show, "cannot tell the expected outcome: name a fixture ok-*.ndjson or bad-*.ndjson", nil)
		case in.readerErr != nil:
			r.reportReader(in)
		case checked[i]:
			r.reportTrace(in, rejectAt[i])
		}
	}
}

// reportReader reports a bad-* fixture the Go reader rejects: TLC never
// sees it; it passes when the reader's line is the expected one.
func (r *tlcRun) reportReader(in *traceInput) {
	ok := in.expectLine == 0 || in.expectLine == in.readerErr.Line
	detail := fmt.Sprintf("expected rejected, got rejected by the Go reader at line %d (%v); TLC not run", in.readerErr.Line, in.readerErr.Err)
	if !ok {
		detail += fmt.Sprintf("; the Go checker's line is %d", in.expectLine)
	}
	r.mu.Lock()
	r.rejected++
	r.readerRejected++
	r.mu.Unlock()
	r.report(ok, in.show, detail, nil)
}

// reportTrace reports TLC's verdict on one file: rejectAt is the file
// line nothing explains, 0 if every thread was accepted.
func (r *tlcRun) reportTrace(in *traceInput, rejectAt int) {
	threads := ""
	if len(in.threads) > 1 {
		threads = fmt.Sprintf(" (%d threads, each checked on its own)", len(in.threads))
	}
	got := "accepted"
	if rejectAt > 0 {
		got = fmt.Sprintf("rejected at line %d of %d (%s)", rejectAt, countLines(in), actionAt(in, rejectAt))
	}
	pass := strings.HasPrefix(got, in.want)
	if pass && rejectAt > 0 && in.expectLine > 0 {
		if rejectAt == in.expectLine {
			got += ", as the Go checker does"
		} else {
			pass = false
			got += fmt.Sprintf("; the Go checker rejects it at line %d", in.expectLine)
		}
	}
	r.mu.Lock()
	if rejectAt > 0 {
		r.rejected++
	} else {
		r.accepted++
	}
	r.mu.Unlock()
	r.report(pass, in.show, fmt.Sprintf("expected %s, got %s%s", in.want, got, threads), nil)
}

func countLines(in *traceInput) int {
	n := 0
	for _, t := range in.threads {
		n += len(t.Lines)
	}
	return n
}

func actionAt(in *traceInput, n int) string {
	for _, t := range in.threads {
		for i, ln := range t.N {
			if ln == n {
				return string(t.Lines[i].Action)
			}
		}
	}
	return "?"
}

// checkGenerated has the Go code write traces and checks every one of
// them, in one TLC run: all the traces of a default `tracecheck run
// -trace-dir` (fences on: each must be accepted), and those of a run with
// the fences off, whose threads the Go checker rejects (bad-*) TLC must
// reject at the same line.
func (r *tlcRun) checkGenerated() error {
	self, err := os.Executable()
	if err != nil {
		return failure{exitCouldNotRun, fmt.Sprintf("tracecheck tlc: %v", err)}
	}
	var log bytes.Buffer
	run := func(args ...string) int {
		cmd := exec.CommandContext(r.ctx, self, append([]string{"run"}, args...)...)
		cmd.Stdout, cmd.Stderr = &log, &log
		cmd.Dir = r.opts.root
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		}
		fmt.Fprintln(&log, err)
		return -1
	}
	on := filepath.Join(r.work, "generated")
	if rc := run("-trace-dir", on); rc != 0 {
		r.report(false, "generated traces", fmt.Sprintf("tracecheck run -trace-dir (the default run, fences on) exited %d", rc), &log)
		return nil
	}
	off := filepath.Join(r.work, "generated-unfenced")
	rc := run("-seeds", "3", "-seed", "100", "-concurrent", "0", "-unfenced", "-trace-dir", off)
	bad, _ := filepath.Glob(filepath.Join(off, "bad-*.ndjson"))
	if !unfencedCaught(rc, len(bad)) {
		r.report(false, "generated traces", fmt.Sprintf("tracecheck run -unfenced did not catch the mutant (exit %d, %d bad traces)", rc, len(bad)), &log)
		return nil
	}
	api := filepath.Join(r.work, "generated-api")
	if err := writeAPITraces(r.ctx, api, apiMachines, apiSteps); err != nil {
		r.report(false, "generated traces", fmt.Sprintf("the public API's machine (apimachine.Machine): %v", err), nil)
		return nil
	}
	var all []traceInput
	for _, dir := range []string{on, off, api} {
		traces, err := collectTraces(r.opts.root, []string{dir})
		if err != nil {
			return err
		}
		for i := range traces {
			traces[i].show = filepath.Base(dir) + "/" + filepath.Base(traces[i].path)
		}
		all = append(all, traces...)
	}
	r.checkTraces(fmt.Sprintf("generated (tracecheck run -trace-dir; -unfenced -seeds 3; %d API machines)", apiMachines), all)
	return nil
}

// unfencedCaught reports whether a 'tracecheck run -unfenced' that exited
// rc and wrote bad bad-* traces caught the mutant: only a run that found
// violations exits 1 (exitFailed), and it must have written the traces
// it rejected for TLC to reject too. Any other exit (0, a usage error, a
// run that could not finish) did not catch it.
func unfencedCaught(rc, bad int) bool {
	return rc == exitFailed && bad > 0
}

// The API machines whose traces go to TLC with the generated ones: each
// makes apiSteps calls of core.Workspace's public methods in any order.
const (
	apiMachines = 40
	apiSteps    = 150
)

// writeAPITraces runs n seeded apimachine.Machine of steps calls each
// on the in-memory storage (calls out of the protocol, on claims of other
// processes, ended and hand-built ones, with any arguments: every one
// refused cleanly or traced validly, which the machine checks with the Go
// checker after each call) and writes each machine's trace to dir as
// ok-api-N.ndjson: TLC must accept what the Go checker accepted, the
// refusals of misused calls included.
func writeAPITraces(ctx context.Context, dir string, n, steps int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for seed := range n {
		ch := apimachine.RandChooser{R: rand.New(rand.NewPCG(uint64(seed), 11))}
		m, err := apimachine.New(ctx, memory.New(), fmt.Sprintf("api%d", seed), 3, ch)
		if err != nil {
			return err
		}
		for range steps {
			if err := m.Step(ch); err != nil {
				return fmt.Errorf("seed %d: %w", seed, err)
			}
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("ok-api-%d.ndjson", seed)))
		if err != nil {
			return err
		}
		werr := tracecheck.WriteLines(f, m.Lines())
		if err := f.Close(); werr == nil {
			werr = err
		}
		if werr != nil {
			return werr
		}
	}
	return nil
}
