package tlc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// ErrDump: TLC's state dump or state graph could not be parsed, or holds
// a state the Go model's types cannot represent.
var ErrDump = errors.New("bad TLC state dump")

// StateComparison is the outcome of comparing TLC's state set with the Go
// model's (specmodel).
type StateComparison struct {
	TLCStates   int // distinct states in TLC's dump
	ModelStates int
	// OnlyTLC and OnlyModel count the states one side has and the other
	// lacks.
	OnlyTLC, OnlyModel int
	// FirstDiff describes the first state that differs, empty when the
	// sets are equal: TLC's first such state in dump order, else the
	// model's first in breadth-first order, with a shortest path to it.
	FirstDiff string
}

// Equal reports whether the two state sets are the same.
func (c StateComparison) Equal() bool { return c.OnlyTLC == 0 && c.OnlyModel == 0 }

// GraphComparison is the outcome of comparing TLC's state graph (its
// -dump dot,actionlabels output: every distinct state and every
// transition, labelled with its action) with the Go model's, state for
// state and edge for edge.
type GraphComparison struct {
	StateComparison
	TLCEdges, ModelEdges int
	// OnlyTLCEdges and OnlyModelEdges count the transitions one side
	// takes and the other does not: the same two states, the same action
	// with the same parameters.
	OnlyTLCEdges, OnlyModelEdges int
	// Summary is what TLC reported of its run, and OutcomeDiffs how it
	// differs from the model's (CompareOutcome): set by
	// Env.CompareGraph, empty from CompareDot alone.
	Summary      Summary
	OutcomeDiffs []string
}

// Equal reports whether the two graphs, and the two outcomes, are the
// same.
func (c GraphComparison) Equal() bool {
	return c.StateComparison.Equal() && c.OnlyTLCEdges == 0 && c.OnlyModelEdges == 0 && len(c.OutcomeDiffs) == 0
}

// Differences describes what differs: the outcome's differences, then the
// first state or transition that does; "" when nothing does.
func (c GraphComparison) Differences() string {
	return strings.TrimSpace(strings.Join(c.OutcomeDiffs, "\n") + "\n" + c.FirstDiff)
}

// Summary is what a TLC run of the spec reported, in the Go model's terms.
type Summary struct {
	Distinct  int
	Generated int
	Depth     int // the complete search's depth, or the error trace's length
	// Violated names the invariant or property TLC reports violated, ""
	// for none.
	Violated string
	// Trace lists the error trace's steps as TLC names them, quotes and
	// spaces removed so that they read as Model.Describe's: Init, Post,
	// Claim(p1), Abandon(p1,1).
	Trace []string
}

// Summarize reads a Summary from a Result: the figures TLC reported (0
// for one it did not), the violated invariant or property and the
// counterexample's steps. The depth of a violation is the length of its
// counterexample, as the model counts it.
func Summarize(res *Result) Summary {
	s := Summary{Distinct: int(max(res.Distinct, 0)), Generated: int(max(res.Generated, 0)), Depth: max(res.Depth, 0)}
	if res.Outcome != InvariantViolated && res.Outcome != PropertyViolated {
		return s
	}
	s.Violated = res.Name
	for _, st := range res.Trace {
		name := st.ActionName()
		if name == "Initial predicate" {
			name = "Init"
		}
		s.Trace = append(s.Trace, actionLabel(name))
	}
	s.Depth = len(s.Trace)
	return s
}

// actionLabel is an action's name as both sides write it: TLC's label or
// Model.Describe's, quotes and spaces removed. It runs for each of a
// graph's transitions on both sides (1.9 M on the fenced cfg): it builds
// no strings.Replacer, which took a fifth of the comparison's CPU.
func actionLabel(s string) string {
	if !strings.ContainsAny(s, `" `) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '"' || r == ' ' {
			return -1
		}
		return r
	}, s)
}

// CompareOutcome compares TLC's outcome with the model's exploration (g,
// Explore's, which stops at the first violation as TLC does): the same
// distinct states and depth for a cfg with no violation; the same violated
// invariant, at the same depth, by the same counterexample, for one with.
// It returns the differences, none when they agree.
func CompareOutcome(g *specmodel.Graph, o Summary) []string {
	r := g.Result()
	var diffs []string
	if r.Violation == nil {
		if o.Violated != "" {
			diffs = append(diffs, fmt.Sprintf("TLC reports %s violated; the model, no violation", o.Violated))
		}
		if o.Distinct != r.Distinct || o.Depth != r.Depth {
			diffs = append(diffs, fmt.Sprintf("TLC: %d distinct states, depth %d; the model: %d, depth %d", o.Distinct, o.Depth, r.Distinct, r.Depth))
		}
		return diffs
	}
	v := r.Violation
	if o.Violated != v.Invariant || o.Depth != v.Depth {
		return append(diffs, fmt.Sprintf("TLC: %q violated at depth %d; the model: %s at depth %d", o.Violated, o.Depth, v.Invariant, v.Depth))
	}
	for k, ts := range v.Trace {
		name := "Init"
		if ts.Step.Action != "" {
			name = strings.ReplaceAll(g.Model().Describe(ts.Step), " ", "")
		}
		if k < len(o.Trace) && o.Trace[k] != name {
			diffs = append(diffs, fmt.Sprintf("counterexample step %d: TLC %s, the model %s (both shortest; a tie broken otherwise)", k+1, o.Trace[k], name))
			break
		}
	}
	return diffs
}

// CompareDump reads a state dump TLC wrote with -dump for g's cfg and
// compares it with g's states in the model's canonical form. For a cfg with
// no violation g is Explore's, and the two sets must be equal. TLC stops at
// a violation, at depth D, after it has found every state of depth < D and
// some of depth D, in an order of its own; for such a cfg g is
// ExploreWith(Options{Continue: true, MaxDepth: D}), and every TLC state
// must be one of g's and every g state of depth < D one of TLC's.
func CompareDump(g *specmodel.Graph, r io.Reader) (StateComparison, error) {
	m := g.Model()
	procs := m.Config().Procs
	cmp := StateComparison{ModelStates: g.Len()}
	seen := make(map[string]bool, g.Len())
	err := ReadDump(r, m.Config(), func(n int, s specmodel.State) error {
		k := s.Key()
		if seen[k] {
			return nil
		}
		seen[k] = true
		cmp.TLCStates++
		if _, ok := g.Lookup(k); !ok {
			cmp.OnlyTLC++
			if cmp.FirstDiff == "" {
				cmp.FirstDiff = fmt.Sprintf("TLC's state %d is not a state the model reaches:\n%s", n, s.TLA(procs))
			}
		}
		return nil
	})
	if err != nil {
		return cmp, err
	}
	for i := 0; i < g.Len(); i++ {
		if seen[g.Key(i)] || (g.MaxDepth() > 0 && g.Depth(i) >= g.MaxDepth()) {
			continue
		}
		cmp.OnlyModel++
		if cmp.FirstDiff == "" {
			s := g.State(i)
			cmp.FirstDiff = fmt.Sprintf("the model's state %d (depth %d) is not in TLC's dump:\n%s\nreached by:\n%s",
				i+1, g.Depth(i), s.TLA(procs), m.FormatTrace(g.Path(i)))
		}
	}
	return cmp, nil
}

// ReadDump parses TLC's -dump output ("State N:" followed by the state as
// a conjunction `/\ var = value`, a value possibly over several lines) and
// calls fn with each state, converted to the model's State for cfg
// (specmodel.ParseState).
func ReadDump(r io.Reader, cfg specmodel.Config, fn func(n int, s specmodel.State) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	n, line := 0, 0
	var cur strings.Builder
	flush := func() error {
		if n == 0 {
			if strings.TrimSpace(cur.String()) != "" {
				return fmt.Errorf("%w: line %d: text before the first state", ErrDump, line)
			}
			return nil
		}
		s, err := specmodel.ParseState(cur.String(), cfg)
		if err != nil {
			return fmt.Errorf("%w: state %d (before line %d): %v", ErrDump, n, line, err)
		}
		cur.Reset()
		return fn(n, s)
	}
	for sc.Scan() {
		line++
		t := sc.Text()
		if rest, ok := strings.CutPrefix(t, "State "); ok && strings.HasSuffix(rest, ":") {
			if err := flush(); err != nil {
				return err
			}
			k, err := strconv.Atoi(strings.TrimSuffix(rest, ":"))
			if err != nil {
				return fmt.Errorf("%w: line %d: %q", ErrDump, line, t)
			}
			n = k
			continue
		}
		cur.WriteString(t)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: no state in the dump", ErrDump)
	}
	return flush()
}

// CompareGraph runs TLC on the cfg at cfgPath (the spec module
// specmodel.Module beside it, on a copy, with one worker and
// DefaultJavaOpts whatever e's) with -dump, and compares its outcome and
// its whole state graph with the Go model's: for a cfg with no violation,
// state for state and edge for edge (CompareDot, on -dump
// dot,actionlabels); for one with a violation, where TLC stops at its
// depth, the outcome and the states (CompareDump). The comparison holds
// TLC's Summary and how it differs from the model's (CompareOutcome).
func (e Env) CompareGraph(ctx context.Context, cfgPath string) (GraphComparison, error) {
	c, err := specmodel.ReadConfig(cfgPath)
	if err != nil {
		return GraphComparison{}, err
	}
	dir, err := os.MkdirTemp("", "tlc-graph-") // the dump is large: not under the caller's directory
	if err != nil {
		return GraphComparison{}, err
	}
	defer os.RemoveAll(dir)
	m := specmodel.New(c)
	g := m.ExploreWith(specmodel.Options{Edges: true}) // Explore's result, and the edges when it ends without a violation
	kind := dumpGraph
	if g.Result().Violation != nil {
		kind = dumpStates
	}
	dump, sum, err := e.runModel(ctx, cfgPath, dir, kind)
	if err != nil {
		return GraphComparison{}, err
	}
	f, err := os.Open(dump)
	if err != nil {
		return GraphComparison{}, err
	}
	defer f.Close()
	var cmp GraphComparison
	if kind == dumpGraph {
		cmp, err = CompareDot(g, f)
	} else {
		cmp.StateComparison, err = CompareDump(m.ExploreWith(specmodel.Options{Continue: true, MaxDepth: g.Result().Violation.Depth}), f)
	}
	cmp.Summary, cmp.OutcomeDiffs = sum, CompareOutcome(g, sum)
	return cmp, err
}

// What a run of the spec's model dumps.
type dumpKind int

const (
	dumpNone   dumpKind = iota
	dumpStates          // -dump FILE: the distinct states
	dumpGraph           // -dump dot,actionlabels FILE.dot: every state and transition, on the cfg's safety part (safetyCfg)
)

// runModel runs TLC on a copy, in a new directory under dir, of the spec
// modules beside cfgPath and of the cfg (its safety part for a graph
// dump), with one worker, dumping what dump says, and returns the dump
// file's path and TLC's Summary. A run that ends in anything but no error
// or a violated invariant or property is an error.
func (e Env) runModel(ctx context.Context, cfgPath, dir string, dump dumpKind) (string, Summary, error) {
	tmp, err := os.MkdirTemp(dir, "tlcdump")
	if err != nil {
		return "", Summary{}, err
	}
	if err := copyModel(cfgPath, tmp, dump == dumpGraph); err != nil {
		return "", Summary{}, err
	}
	job := Job{
		Spec: specmodel.Module + ".tla", Config: filepath.Base(cfgPath), Dir: tmp,
		MetaDir: filepath.Join(tmp, "meta"), Workers: 1, JavaOpts: DefaultJavaOpts,
	}
	var file string
	switch dump {
	case dumpStates:
		file = filepath.Join(tmp, "states.dump")
		job.Args = []string{"-dump", file}
	case dumpGraph:
		file = filepath.Join(tmp, "graph.dot") // TLC adds .dot to a name without it
		job.Args = []string{"-dump", "dot,actionlabels", file}
	}
	res, err := e.Run(ctx, job)
	if err != nil {
		return "", Summary{}, err
	}
	switch res.Outcome {
	case NoError, InvariantViolated, PropertyViolated:
		return file, Summarize(res), nil
	}
	return "", Summary{}, fmt.Errorf("tlc: %s: TLC reported %s: %s", cfgPath, res.Outcome, res.Text)
}

// copyModel copies the .tla modules beside cfgPath, and the cfg, into
// dst; with safety, the cfg's safety part (safetyCfg).
func copyModel(cfgPath, dst string, safety bool) error {
	tlas, err := filepath.Glob(filepath.Join(filepath.Dir(cfgPath), "*.tla"))
	if err != nil || len(tlas) == 0 {
		return fmt.Errorf("no .tla beside %s", cfgPath)
	}
	for _, f := range append(tlas, cfgPath) {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if f == cfgPath && safety {
			b, err = safetyCfg(b, cfgPath)
			if err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// safetyCfg is the cfg's text for a run that dumps the state graph: the
// liveness properties the model does not check (Config.Unchecked) left
// out and LiveSpec read as Spec (its fairness does not change which
// states and transitions there are; TLC's liveness checking, with the
// graph dumped, took 68 s of the liveness cfg's 90).
func safetyCfg(text []byte, path string) ([]byte, error) {
	c, err := specmodel.ParseConfig(path, string(text))
	if err != nil {
		return nil, err
	}
	drop := c.Unchecked()
	if len(drop) == 0 && c.Specification != specmodel.LiveSpec {
		return text, nil
	}
	var out []string
	for _, line := range strings.Split(string(text), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "SPECIFICATION" && f[1] == specmodel.LiveSpec:
			line = "SPECIFICATION " + specmodel.SafetySpec
		case len(f) == 1 && slices.Contains(drop, f[0]):
			continue
		case len(f) == 2 && (f[0] == "PROPERTY" || f[0] == "PROPERTIES") && slices.Contains(drop, f[1]):
			continue
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\n")), nil
}
