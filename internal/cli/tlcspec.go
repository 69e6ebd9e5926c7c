package cli

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/internal/tlc"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// The modes of tracecheck tlc that run the trace spec in batches and the
// spec's mutants (see tlcUsage).

// checkMutants applies every spec/mutants/*.mutant to a copy of spec/ and
// tla/ and requires the check it names to catch it: a mutant that
// survives fails the run, by name.
func (r *tlcRun) checkMutants() error {
	ms, err := tlc.LoadMutants(filepath.Join(r.opts.root, "spec", "mutants"))
	if err != nil {
		return failure{exitUsage, err.Error()}
	}
	r.mu.Lock()
	verified := maps.Clone(r.verified)
	r.mu.Unlock()
	run := tlc.MutantRun{Env: r.env, Root: r.opts.root, Parallel: r.opts.parallel, Job: tlc.Job{Timeout: r.opts.timeout}, Verified: verified}
	rs, err := run.Run(r.ctx, ms)
	if err != nil {
		if r.ctx.Err() != nil {
			return failure{exitCouldNotRun, fmt.Sprintf("tlc: spec mutants: %v", err)}
		}
		// The unmutated spec failed a check a mutant relies on.
		r.report(false, "spec mutants", err.Error(), nil)
		return nil
	}
	caught := 0
	for _, m := range rs {
		what := "mutant " + m.Mutant.Name
		switch {
		case m.Err != nil && errors.Is(m.Err, tlc.ErrMutantStale):
			r.report(false, what, m.Err.Error()+" (update spec/mutants/"+m.Mutant.Name+".mutant)", nil)
		case m.Err != nil:
			r.report(false, what, fmt.Sprintf("%s did not run: %v", m.Mutant.CaughtBy, m.Err), nil)
		case !m.Caught:
			r.report(false, what, fmt.Sprintf("SURVIVED %s (%s)", m.Mutant.CaughtBy, m.Mutant.Doc), nil)
		default:
			caught++
			r.report(true, what, fmt.Sprintf("caught by %s: %s", m.Mutant.CaughtBy, m.How), nil)
		}
	}
	fmt.Fprintf(r.out, "tlc: spec mutants: %d of %d caught\n", caught, len(rs))
	return nil
}

// batchTraces reads the traces of the given files and directories (every
// *.ndjson of a directory), each split by thread: the input of one batch.
func batchTraces(root string, paths []string) (names []string, files [][]tlc.Thread, goLines []int, err error) {
	if len(paths) == 0 {
		return nil, nil, nil, usageError{"batch needs trace files or directories"}
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil, nil, failure{exitUsage, err.Error()}
		}
		list := []string{p}
		if fi.IsDir() {
			list, _ = filepath.Glob(filepath.Join(p, "*.ndjson"))
			if len(list) == 0 {
				return nil, nil, nil, failure{exitUsage, fmt.Sprintf("%s: no *.ndjson traces", p)}
			}
		}
		for _, f := range list {
			lines, err := tracecheck.ReadFile(f)
			if err != nil {
				return nil, nil, nil, failure{exitUsage, err.Error()}
			}
			if len(lines) == 0 {
				return nil, nil, nil, failure{exitUsage, fmt.Sprintf("%s:1: empty trace", relTo(root, f))}
			}
			names = append(names, relTo(root, f))
			files = append(files, tlc.SplitThreads(lines))
			at, _ := tlc.GoVerdict(lines) // the Go checker, held to every fence, as the batch is
			goLines = append(goLines, at)
		}
	}
	return names, files, goLines, nil
}

// checkBatch checks every trace of paths in one TLC run and prints each
// verdict, the lines and the lines per second. Each file's verdict must
// be the Go checker's, at the same line; and ok-* must be accepted and
// bad-* rejected.
func (r *tlcRun) checkBatch(paths []string) error {
	names, files, goLines, err := batchTraces(r.opts.root, paths)
	if err != nil {
		return err
	}
	var flat []tlc.Thread
	lines := 0
	for _, ths := range files {
		for _, th := range ths {
			flat = append(flat, th)
			lines += len(th.Lines)
		}
	}
	b, _, keep := r.batchRun("batch", core.AllFences())
	t0 := time.Now()
	at, res, err := r.env.CheckThreads(r.ctx, b, flat)
	d := time.Since(t0)
	keep()
	if err != nil {
		return failure{exitCouldNotRun, fmt.Sprintf("tlc: batch: %v", err)}
	}
	r.lines += lines
	for i, ths := range files {
		rejectAt := 0
		for range ths {
			if a := at[0]; a > 0 && (rejectAt == 0 || a < rejectAt) {
				rejectAt = a
			}
			at = at[1:]
		}
		got := "accepted"
		if rejectAt > 0 {
			got = fmt.Sprintf("rejected at line %d", rejectAt)
			r.rejected++
		} else {
			r.accepted++
		}
		agree := rejectAt == goLines[i]
		switch {
		case !agree && goLines[i] == 0:
			got += "; the Go checker accepts it"
		case !agree:
			got += fmt.Sprintf("; the Go checker rejects it at line %d", goLines[i])
		case rejectAt > 0:
			got += ", as the Go checker does"
		}
		base := filepath.Base(names[i])
		switch {
		case strings.HasPrefix(base, "ok-"):
			r.report(rejectAt == 0 && agree, names[i], "expected accepted, got "+got, nil)
		case strings.HasPrefix(base, "bad-"):
			r.report(rejectAt > 0 && agree, names[i], "expected rejected, got "+got, nil)
		default:
			r.report(agree, names[i], got, nil)
		}
	}
	fmt.Fprintf(r.out, "tlc: batch: %d traces (%d threads) in one TLC run, %s\n", len(files), len(flat), speed(lines, d, res))
	return nil
}

// checkDifferential has the Go simulation write traces (fences on), makes
// opts.mutated mutants of them, and requires the Go checker and TLC to
// agree on each: the same verdict, at the same line. It does so twice:
// held to every fence, and held to none. A mutant of a fenced trace
// rarely gets as far as an invariant with the fences off (a field of its
// line disagrees first), so the second run also has walks of the model
// with every fence off, each as walked and mutated: stale writes that
// must break an invariant (I1, I3, NoLiveAbandon, SteeringException) at
// the same line in both checkers.
func (r *tlcRun) checkDifferential() error {
	dir := filepath.Join(r.work, "differential")
	self, err := os.Executable()
	if err != nil {
		return failure{exitCouldNotRun, fmt.Sprintf("tracecheck tlc: %v", err)}
	}
	var log bytes.Buffer
	cmd := exec.CommandContext(r.ctx, self, "run", "-seeds", "40", "-concurrent", "0", "-trace-dir", dir)
	cmd.Stdout, cmd.Stderr, cmd.Dir = &log, &log, r.opts.root
	if err := cmd.Run(); err != nil {
		r.report(false, "differential", fmt.Sprintf("tracecheck run -trace-dir: %v", err), &log)
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(dir, "ok-*.ndjson"))
	var names []string
	var traces [][]core.TraceEvent
	for _, f := range files {
		lines, err := tracecheck.ReadFile(f)
		if err != nil {
			return failure{exitFailed, err.Error()}
		}
		names, traces = append(names, filepath.Base(f)), append(traces, lines)
	}
	if len(traces) == 0 {
		r.report(false, "differential", "the simulation wrote no traces", &log)
		return nil
	}
	sim := len(traces)
	// And as many random walks of the fenced cfg's state graph, in the
	// Go model of the spec: traces of any corner of the graph, not only of
	// the paths the runner takes.
	cfg, err := specmodel.ReadConfig(filepath.Join(r.opts.root, "spec", "ThreadClaimLapse.cfg"))
	if err != nil {
		return failure{exitUsage, err.Error()}
	}
	model := specmodel.New(cfg)
	walks := rand.New(rand.NewPCG(r.opts.seed, 0x3a11))
	for k := range diffWalks {
		if lines := model.TraceLines(model.RandomWalk(walks, 10+walks.IntN(30))); len(lines) > 0 {
			names, traces = append(names, fmt.Sprintf("walk-%d", k+1)), append(traces, lines)
		}
	}
	rng := rand.New(rand.NewPCG(r.opts.seed, 0x7d1f))
	cases := tlc.MakeCases(rng, diffMutator, names, traces, r.opts.mutated)
	from := fmt.Sprintf("from %d simulation traces and %d walks of the model, seed %d", sim, len(traces)-sim, r.opts.seed)
	// The walks with every fence off, as walked and as many mutants.
	off := cfg
	off.Fences = core.Fences{}
	unfenced := specmodel.New(off)
	var offNames []string
	var offTraces [][]core.TraceEvent
	var offCases []tlc.DiffCase
	for k, path := range brokenWalks(unfenced, walks, diffWalks) {
		name := fmt.Sprintf("unfenced-walk-%d", k+1)
		lines := unfenced.TraceLines(path)
		offNames, offTraces = append(offNames, name), append(offTraces, lines)
		offCases = append(offCases, tlc.DiffCase{From: name, Desc: "as walked", Lines: lines})
	}
	offCases = append(offCases, tlc.MakeCases(rng, diffMutator, offNames, offTraces, len(offTraces))...)
	if len(offTraces) < diffWalks {
		// Without them the fences-off run compares no invariant: a failure,
		// not a pass that checked less.
		r.report(false, "differential, every fence off", fmt.Sprintf("only %d of %d walks of the model with every fence off broke an invariant in %d tries", len(offTraces), diffWalks, brokenWalkTries*diffWalks), nil)
	}
	for _, d := range diffFences {
		b, _, keep := r.batchRun(d.name, d.fences)
		t0 := time.Now()
		cs, from := cases, from
		if d.fences == (core.Fences{}) {
			cs = append(slices.Clip(cases), offCases...)
			from += fmt.Sprintf(", and %d walks of the model with every fence off, as walked and mutated", len(offTraces))
		}
		rs, err := r.env.Differential(r.ctx, b, cs)
		keep()
		if err != nil {
			return failure{exitCouldNotRun, fmt.Sprintf("tlc: %s: %v", d.name, err)}
		}
		r.reportDifferential(d.name, rs, from, time.Since(t0))
	}
	return nil
}

// brokenWalks returns up to n random walks of m, each cut at the first
// state where one of its cfg's invariants is false (the fenced cfg's are
// those the trace spec checks after each step): with the fences off, a
// walk that lasts breaks one now and then (a stale start, a live
// abandon). It gives up after brokenWalkTries walks for each one it
// wants, so that a model in which nothing breaks costs little.
func brokenWalks(m *specmodel.Model, rng *rand.Rand, n int) [][]specmodel.TraceStep {
	var out [][]specmodel.TraceStep
	for try := 0; len(out) < n && try < brokenWalkTries*n; try++ {
		path := m.RandomWalk(rng, 60)
		for k := range path {
			if m.Violated(&path[k].State) != "" {
				out = append(out, path[:k+1])
				break
			}
		}
	}
	return out
}

// brokenWalkTries is how many walks brokenWalks draws, at most, for each
// one it returns: with every fence off, on the fenced cfg's constants,
// about one walk of 60 steps in ninety breaks an invariant (23 of 2,000).
const brokenWalkTries = 200

// diffFences are the fences the differential holds its cases to, each
// in a run of its own: every fence (as the code runs), and none, so that
// the checks behind the fences (the invariants after each step) are
// compared too, which no fence lets a trace reach when every fence is on.
var diffFences = []struct {
	name   string
	fences core.Fences
}{
	{"differential", core.AllFences()},
	{"differential, every fence off", core.Fences{}},
}

// reportDifferential reports each case on which the Go checker and TLC
// disagree, in verdict or in line, as a failure of its own, then the
// differential's summary, which passes only when they agree on every
// case; name names the run. from says where the cases came from; took
// is TLC's time.
func (r *tlcRun) reportDifferential(name string, rs []tlc.DiffResult, from string, took time.Duration) {
	agree, rejected, byInvariant, lines := 0, 0, 0, 0
	for _, c := range rs {
		lines += len(c.Case.Lines)
		if c.Go > 0 {
			rejected++
			if strings.Contains(c.GoErr, ": invariant ") {
				byInvariant++
			}
		}
		if c.Agree() {
			agree++
			continue
		}
		r.report(false, name+": "+c.Case.From+": "+c.Case.Desc,
			fmt.Sprintf("the Go checker: %s; TLC: %s\n      Go's reason: %s", lineWords(c.Go), lineWords(c.TLC), firstLineOf(c.GoErr)), nil)
	}
	r.mu.Lock()
	r.lines += lines
	r.mu.Unlock()
	r.report(agree == len(rs), name,
		fmt.Sprintf("%d mutated traces (%s), %d rejected by the Go checker (%d through an invariant), %d lines: the Go checker and TLC agree on %d of %d (same verdict, same line); TLC %.1fs",
			len(rs), from, rejected, byInvariant, lines, agree, len(rs), took.Seconds()), nil)
}

func lineWords(n int) string {
	if n == 0 {
		return "accepted"
	}
	return fmt.Sprintf("rejected at line %d", n)
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
