package tlc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Fixture is a trace file whose verdict is known from its name: ok-*.ndjson
// is accepted, bad-*.ndjson rejected, at the line its directory's
// expected-lines file names ("FILE LINE" a line) when it names one. A
// directory's "fences" file, when present, names the fences its traces are
// held to ("reply abandon": RunStart unfenced); without one, all are on.
type Fixture struct {
	Path       string
	Accept     bool
	ExpectLine int         // 0: any line
	Fences     core.Fences // the fences its traces are held to
	Threads    []Thread
	// ReaderErr is set when the Go reader rejects the file (a malformed
	// bad-* fixture): TLC never sees it.
	ReaderErr error
}

// LoadFixtures reads the fixtures of each directory (not recursively).
// A file named neither ok-* nor bad-*, or an ok-* file the reader rejects,
// is an error.
func LoadFixtures(dirs ...string) ([]Fixture, error) {
	var out []Fixture
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.ndjson"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no *.ndjson fixtures", dir)
		}
		sort.Strings(files)
		expect, err := ReadExpectedLines(filepath.Join(dir, "expected-lines"))
		if err != nil {
			return nil, err
		}
		fences, err := ReadFences(filepath.Join(dir, "fences"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			base := filepath.Base(f)
			fx := Fixture{Path: f, ExpectLine: expect[base], Fences: fences}
			switch {
			case strings.HasPrefix(base, "ok-"):
				fx.Accept = true
			case strings.HasPrefix(base, "bad-"):
			default:
				return nil, fmt.Errorf("%s: name a fixture ok-*.ndjson or bad-*.ndjson", f)
			}
			lines, err := tracecheck.ReadFile(f)
			switch {
			case err != nil && fx.Accept:
				return nil, err
			case err != nil:
				fx.ReaderErr = err
			default:
				fx.Threads = SplitThreads(lines)
			}
			out = append(out, fx)
		}
	}
	return out, nil
}

// ReadExpectedLines reads a fixture directory's "expected-lines" file:
// "FILE LINE" a line (the line at which the Go checker rejects FILE), #
// comments. A missing file is no expectations.
func ReadExpectedLines(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		v, err := strconv.Atoi(fs[len(fs)-1])
		if len(fs) != 2 || err != nil || v < 1 {
			return nil, fmt.Errorf("%s:%d: want FILE LINE, got %q", path, n, sc.Text())
		}
		m[fs[0]] = v
	}
	return m, sc.Err()
}

// ReadFences reads a fixture directory's "fences" file: the fences its
// traces are held to, as core.ParseFences reads them ("reply abandon",
// "none"). A missing file is every fence; an unknown name is an error.
func ReadFences(path string) (core.Fences, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return core.AllFences(), nil
	}
	if err != nil {
		return core.Fences{}, err
	}
	f, err := core.ParseFences(string(b))
	if err != nil {
		return core.Fences{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// FixtureVerdict is TLC's verdict on one fixture: the file line of the
// first line nothing explains (the least over the file's threads), 0 when
// every thread was accepted, -1 when the Go reader rejected the file.
type FixtureVerdict struct {
	Path       string
	RejectedAt int
}

// Problem says how v differs from what fx expects, "" if it does not.
func (fx Fixture) Problem(v FixtureVerdict) string {
	switch {
	case v.RejectedAt < 0 && fx.ReaderErr != nil:
		return ""
	case fx.Accept && v.RejectedAt != 0:
		return fmt.Sprintf("expected accepted, got rejected at line %d", v.RejectedAt)
	case !fx.Accept && v.RejectedAt == 0:
		return "expected rejected, got accepted"
	case !fx.Accept && fx.ExpectLine > 0 && v.RejectedAt != fx.ExpectLine:
		return fmt.Sprintf("expected rejected at line %d (the Go checker's), got line %d", fx.ExpectLine, v.RejectedAt)
	}
	return ""
}

// CheckFixtures puts every fixture's threads through the trace spec, one
// TLC run per set of fences, and returns a verdict per fixture.
func (e Env) CheckFixtures(ctx context.Context, b Batch, fxs []Fixture) ([]FixtureVerdict, error) {
	return e.checkFixtures(ctx, b, fxs, nil)
}

// checkFixtures is CheckFixtures; with enough set, it stops after the
// first TLC run (a set of fences) for which enough, given the verdicts
// and the indexes in fxs of that run's fixtures, returns true, and the
// fixtures of the runs not made have no verdict (a spec mutant is caught
// once one verdict changed).
func (e Env) checkFixtures(ctx context.Context, b Batch, fxs []Fixture, enough func(out []FixtureVerdict, run []int) bool) ([]FixtureVerdict, error) {
	out := make([]FixtureVerdict, len(fxs))
	groups := map[string][]int{} // fences -> fixtures
	var keys []string
	for i, fx := range fxs {
		out[i].Path = fx.Path
		if fx.ReaderErr != nil {
			out[i].RejectedAt = -1
			continue
		}
		k := fx.Fences.String()
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range keys {
		var traces [][]Thread
		var batch = b
		batch.Unfenced = core.AllFences().Without(fxs[groups[k][0]].Fences)
		var flat []Thread
		for _, i := range groups[k] {
			traces = append(traces, fxs[i].Threads)
			flat = append(flat, fxs[i].Threads...)
		}
		vs, err := e.ValidateThreads(ctx, batch, flat)
		if err != nil {
			return nil, err
		}
		for gi, i := range groups[k] {
			for range traces[gi] {
				if at := vs[0]; at > 0 && (out[i].RejectedAt == 0 || at < out[i].RejectedAt) {
					out[i].RejectedAt = at
				}
				vs = vs[1:]
			}
		}
		if enough != nil && enough(out, groups[k]) {
			break
		}
	}
	return out, nil
}

// ValidateThreads is ValidateBatch over threads of trace files: for each
// thread, the file line of the first line nothing explains, 0 if the
// thread was accepted.
func (e Env) ValidateThreads(ctx context.Context, b Batch, threads []Thread) ([]int, error) {
	out, _, err := e.CheckThreads(ctx, b, threads)
	return out, err
}

// CheckThreads is ValidateThreads that also returns TLC's Result (its
// state counts and CPU time), for a caller that reports the speed.
func (e Env) CheckThreads(ctx context.Context, b Batch, threads []Thread) ([]int, *Result, error) {
	traces := make([][]core.TraceEvent, len(threads))
	for i, th := range threads {
		traces[i] = th.Lines
	}
	vs, res, err := e.ValidateBatch(ctx, b, traces)
	if err != nil {
		return nil, res, err
	}
	out := make([]int, len(vs))
	for i, v := range vs {
		if at := v.RejectedAt(); at > 0 {
			out[i] = threads[i].N[at-1]
		}
	}
	return out, res, nil
}
