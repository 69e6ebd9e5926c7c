package tlc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// FixturesCheck is the CaughtBy of a mutant that the trace fixtures must
// catch (tla/testdata and its subdirectories, see Fixture).
const FixturesCheck = "trace fixtures"

// GraphCheck prefixes the CaughtBy of a mutant that the comparison of
// TLC's state graph with the Go model's (Env.CompareGraph) must
// catch on a cfg: "graph spec/NAME.cfg". It catches an edit that changes
// what an action may do where no invariant or property notices: an edge
// more or less, a state more or less.
const GraphCheck = "graph "

// Mutant is an edit of the spec or the trace spec that a named check must
// catch, kept in spec/mutants/NAME.mutant:
//
//	# what the edit breaks, and why the check catches it
//	file: spec/ThreadClaimLapse.tla
//	caught-by: spec/ThreadClaimLapseSmall.cfg   (or: trace fixtures, or: graph spec/NAME.cfg)
//	--- replace
//	    /\ FenceStart => HasLease(p)
//	--- with
//	    /\ TRUE
//
// The text between "--- replace" and "--- with" must occur exactly once in
// the file; it is replaced by the text after "--- with" (each without its
// last newline).
type Mutant struct {
	Name     string // the file's name without .mutant
	Doc      string // the comment lines
	File     string // relative to the repository's root: spec/... or tla/...
	CaughtBy string // "spec/NAME.cfg", FixturesCheck or GraphCheck+"spec/NAME.cfg"
	Replace  string
	With     string
}

// ErrMutantStale is a mutant whose text to replace does not occur exactly
// once in its file: the spec moved on, and the mutant must follow it.
var ErrMutantStale = errors.New("tlc: mutant's text to replace does not occur exactly once")

// LoadMutants reads every *.mutant file in dir, sorted by name.
func LoadMutants(dir string) ([]Mutant, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.mutant"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.mutant files", dir)
	}
	sort.Strings(files)
	var out []Mutant
	for _, f := range files {
		m, err := ReadMutant(f)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// ReadMutant reads one mutant file (see Mutant).
func ReadMutant(path string) (Mutant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Mutant{}, err
	}
	m := Mutant{Name: strings.TrimSuffix(filepath.Base(path), ".mutant")}
	var doc, rep, with []string
	section := ""
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case l == "--- replace" && section == "":
			section = "replace"
		case l == "--- with" && section == "replace":
			section = "with"
		case section == "replace":
			rep = append(rep, l)
		case section == "with":
			with = append(with, l)
		case strings.HasPrefix(l, "#"):
			doc = append(doc, strings.TrimSpace(strings.TrimPrefix(l, "#")))
		case strings.TrimSpace(l) == "":
		default:
			k, v, ok := strings.Cut(l, ":")
			v = strings.TrimSpace(v)
			switch {
			case ok && k == "file":
				m.File = v
			case ok && k == "caught-by":
				m.CaughtBy = v
			default:
				return m, fmt.Errorf("%s:%d: want \"file:\", \"caught-by:\", a # comment or \"--- replace\", got %q", path, n, l)
			}
		}
	}
	m.Doc, m.Replace, m.With = strings.Join(doc, " "), strings.Join(rep, "\n"), strings.Join(with, "\n")
	switch {
	case m.File == "" || m.CaughtBy == "":
		return m, fmt.Errorf("%s: needs file: and caught-by:", path)
	case section != "with":
		return m, fmt.Errorf("%s: needs a \"--- replace\" and a \"--- with\" section", path)
	case m.Replace == "":
		return m, fmt.Errorf("%s: the text to replace is empty", path)
	case !strings.HasPrefix(m.File, "spec/") && !strings.HasPrefix(m.File, "tla/"):
		return m, fmt.Errorf("%s: file %q is not in spec/ or tla/", path, m.File)
	case m.CaughtBy != FixturesCheck && !isCfg(strings.TrimPrefix(m.CaughtBy, GraphCheck)):
		return m, fmt.Errorf("%s: caught-by %q is neither spec/NAME.cfg, %q nor %q", path, m.CaughtBy, FixturesCheck, GraphCheck+"spec/NAME.cfg")
	}
	return m, nil
}

func isCfg(s string) bool { return strings.HasPrefix(s, "spec/") && strings.HasSuffix(s, ".cfg") }

// CopySpecs copies root's spec/ and tla/ modules and cfgs into dst/spec
// and dst/tla: TLC runs on copies, so that nothing it writes, and no
// mutant, lands in the repository.
func CopySpecs(root, dst string) error {
	for _, d := range []string{"spec", "tla"} {
		if err := os.MkdirAll(filepath.Join(dst, d), 0o755); err != nil {
			return err
		}
		for _, pat := range []string{"*.tla", "*.cfg"} {
			files, _ := filepath.Glob(filepath.Join(root, d, pat))
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dst, d, filepath.Base(f)), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Apply edits the copy of m.File under dst.
func (m Mutant) Apply(dst string) error {
	path := filepath.Join(dst, filepath.FromSlash(m.File))
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("mutant %s: %w", m.Name, err)
	}
	if n := strings.Count(string(b), m.Replace); n != 1 {
		return fmt.Errorf("%w: mutant %s: %d times in %s", ErrMutantStale, m.Name, n, m.File)
	}
	return os.WriteFile(path, []byte(strings.Replace(string(b), m.Replace, m.With, 1)), 0o644)
}

// MutantRun runs spec mutants: the repository at Root, TLC from Env (run
// with ShortJavaOpts and one worker unless Env.JavaOpts and Job.Workers
// say otherwise).
type MutantRun struct {
	Env      Env
	Root     string
	Parallel int // mutants checked at once; < 1 means 1
	Job      Job // Timeout and Output for every TLC run

	// Verified names checks (a Mutant's CaughtBy: "spec/NAME.cfg" or
	// GraphCheck+"spec/NAME.cfg") that the caller has just seen give their
	// expected result on the spec at Root, unmutated: the baseline does
	// not run them again. `tracecheck tlc all` passes the models it
	// checked before the mutants. The trace fixtures' check is always
	// run, since its verdicts are what each mutant's are compared with.
	Verified map[string]bool
}

// MutantResult is what became of one mutant.
type MutantResult struct {
	Mutant Mutant
	Caught bool
	How    string // what the check reported instead of its expectation
	Err    error  // the check could not run (Caught is then false)
}

// FixtureDirs are the trace fixture directories under root: tla/testdata
// and each of its subdirectories that holds traces.
func FixtureDirs(root string) []string {
	base := filepath.Join(root, "tla", "testdata")
	dirs := []string{base}
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		if e.IsDir() {
			if fs, _ := filepath.Glob(filepath.Join(base, e.Name(), "*.ndjson")); len(fs) > 0 {
				dirs = append(dirs, filepath.Join(base, e.Name()))
			}
		}
	}
	return dirs
}

// Run checks the unmutated spec first (every check a mutant names must
// give its expected result there, or no mutant's result means anything:
// that is an error), then each mutant on a copy of its own. A mutant is
// caught when its check reports anything but what it expects (a model
// cfg: another outcome, or an action on its fires line that takes no
// step; the trace fixtures: any verdict other than the unmutated spec's).
func (r MutantRun) Run(ctx context.Context, ms []Mutant) ([]MutantResult, error) {
	if r.Env.JavaOpts == nil {
		r.Env.JavaOpts = ShortJavaOpts
	}
	if r.Job.Workers == 0 {
		r.Job.Workers = 1
	}
	fxs, err := LoadFixtures(FixtureDirs(r.Root)...)
	if err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "tlc-mutants-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)

	// The unmutated spec: every named check as expected.
	orig := filepath.Join(base, "orig")
	if err := CopySpecs(r.Root, orig); err != nil {
		return nil, err
	}
	want, err := r.baseline(ctx, orig, ms, fxs)
	if err != nil {
		return nil, err
	}

	out := make([]MutantResult, len(ms))
	par := max(r.Parallel, 1)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = r.one(ctx, base, m, fxs, want)
		}()
	}
	wg.Wait()
	return out, ctx.Err()
}

// baseline runs each check a mutant in ms names on the unmutated copy in
// orig (but those r.Verified names), r.Parallel at once, and returns the trace fixtures' verdicts there
// (when a mutant names them). A check that does not give its expected
// result is an error: no mutant's result would mean anything.
func (r MutantRun) baseline(ctx context.Context, orig string, ms []Mutant, fxs []Fixture) ([]FixtureVerdict, error) {
	checks := map[string]bool{}
	for _, m := range ms {
		if m.CaughtBy == FixturesCheck || !r.Verified[m.CaughtBy] {
			checks[m.CaughtBy] = true
		}
	}
	var (
		want []FixtureVerdict
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, max(r.Parallel, 1))
	for c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			got, err := r.baselineCheck(ctx, orig, c, fxs)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if c == FixturesCheck {
				want = got
			}
		}()
	}
	wg.Wait()
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return want, errors.Join(errs...)
}

// baselineCheck runs one check c on the unmutated copy in orig; for the
// trace fixtures it returns their verdicts.
func (r MutantRun) baselineCheck(ctx context.Context, orig, c string, fxs []Fixture) ([]FixtureVerdict, error) {
	if c == FixturesCheck {
		want, err := r.Env.CheckFixtures(ctx, r.batch(orig), fxs)
		if err != nil {
			return nil, fmt.Errorf("trace fixtures, unmutated: %w", err)
		}
		for i, fx := range fxs {
			if p := fx.Problem(want[i]); p != "" {
				return nil, fmt.Errorf("trace fixtures, unmutated: %s: %s", fx.Path, p)
			}
		}
		return want, nil
	}
	if how, err := r.checkModel(ctx, orig, c); err != nil || how != "" {
		return nil, fmt.Errorf("%s, unmutated: %s%v", c, how, errOrEmpty(err))
	}
	return nil, nil
}

// checkModel runs check c, a model cfg or (GraphCheck) a cfg's state
// graph, on the copy in dir and says how its result differs from the
// expected one ("" when it does not).
func (r MutantRun) checkModel(ctx context.Context, dir, c string) (string, error) {
	if cfg, graph := strings.CutPrefix(c, GraphCheck); graph {
		return r.checkGraph(ctx, dir, cfg)
	}
	return r.checkCfg(ctx, dir, c)
}

func errOrEmpty(err error) any {
	if err == nil {
		return ""
	}
	return err
}

func (r MutantRun) batch(dir string) Batch {
	return Batch{Dir: filepath.Join(dir, "tla"), SpecDir: filepath.Join(dir, "spec"), Job: r.Job}
}

// checkCfg runs one model cfg of the copy in dir and says how its result
// differs from the cfg's expectation ("" when it does not).
func (r MutantRun) checkCfg(ctx context.Context, dir, cfg string) (string, error) {
	path := filepath.Join(dir, filepath.FromSlash(cfg))
	exp, err := ReadExpectation(path)
	if err != nil {
		return "", err
	}
	module := moduleOf(path)
	if module == "" {
		return "", fmt.Errorf("%s: no spec module whose name prefixes the cfg's", cfg)
	}
	job := r.Job
	job.Spec, job.Config, job.Dir = module, filepath.Base(path), filepath.Dir(path)
	job.Args = append(append([]string(nil), job.Args...), exp.Args()...)
	res, err := r.Env.Run(ctx, job)
	if err != nil && res == nil {
		return "", err
	}
	if err != nil {
		// TLC ended without an outcome: a crash is a result too, but only
		// when TLC itself reported one; otherwise the run did not happen.
		return "", err
	}
	return exp.Check(res), nil
}

// moduleOf is the module a cfg checks: the longest *.tla name in the
// cfg's directory that prefixes the cfg's name.
func moduleOf(cfg string) string {
	base := strings.TrimSuffix(filepath.Base(cfg), ".cfg")
	tlas, _ := filepath.Glob(filepath.Join(filepath.Dir(cfg), "*.tla"))
	best := ""
	for _, t := range tlas {
		m := strings.TrimSuffix(filepath.Base(t), ".tla")
		if strings.HasPrefix(base, m) && len(m) > len(best) {
			best = m
		}
	}
	if best == "" {
		return ""
	}
	return best + ".tla"
}

func (r MutantRun) one(ctx context.Context, base string, m Mutant, fxs []Fixture, want []FixtureVerdict) MutantResult {
	res := MutantResult{Mutant: m}
	dir := filepath.Join(base, "m-"+m.Name)
	if err := CopySpecs(r.Root, dir); err != nil {
		res.Err = err
		return res
	}
	if err := m.Apply(dir); err != nil {
		res.Err = err
		return res
	}
	if m.CaughtBy == FixturesCheck {
		// The runs stop at the first whose verdicts differ: one is enough.
		var diffs []string
		changed := func(got []FixtureVerdict, run []int) bool {
			for _, i := range run {
				if got[i].RejectedAt != want[i].RejectedAt {
					diffs = append(diffs, fmt.Sprintf("%s: %s instead of %s", filepath.Base(got[i].Path), verdictWords(got[i]), verdictWords(want[i])))
				}
			}
			return len(diffs) > 0
		}
		if _, err := r.Env.checkFixtures(ctx, r.batch(dir), fxs, changed); err != nil {
			// A trace spec that TLC cannot run at all (a parse error, say)
			// catches nothing: the mutant must change a verdict.
			res.Err = err
			return res
		}
		res.Caught, res.How = len(diffs) > 0, strings.Join(diffs, "; ")
		return res
	}
	how, err := r.checkModel(ctx, dir, m.CaughtBy)
	res.Caught, res.How, res.Err = err == nil && how != "", how, err
	return res
}

// checkGraph compares TLC's state graph of one cfg of the copy in dir
// with the Go model's and says how they differ ("" when they do not).
func (r MutantRun) checkGraph(ctx context.Context, dir, cfg string) (string, error) {
	cmp, err := r.Env.CompareGraph(ctx, filepath.Join(dir, filepath.FromSlash(cfg)))
	if err != nil || cmp.Equal() {
		return "", err
	}
	first, _, _ := strings.Cut(cmp.Differences(), "\n")
	return fmt.Sprintf("TLC's state graph is not the Go model's (%d states and %d transitions only TLC's, %d and %d only the model's): %s",
		cmp.OnlyTLC, cmp.OnlyTLCEdges, cmp.OnlyModel, cmp.OnlyModelEdges, first), nil
}

func verdictWords(v FixtureVerdict) string {
	switch {
	case v.RejectedAt == 0:
		return "accepted"
	case v.RejectedAt < 0:
		return "rejected by the Go reader"
	}
	return fmt.Sprintf("rejected at line %d", v.RejectedAt)
}
