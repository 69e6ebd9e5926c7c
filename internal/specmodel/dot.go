package specmodel

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Module is the spec module the model is a model of: TLC's runs of it are
// what CompareGraphTLC and CompareDump compare with.
const Module = "ThreadClaimLapse"

// GraphComparison is the outcome of comparing TLC's state graph (its
// -dump dot,actionlabels output: every distinct state and every
// transition, labelled with its action) with the model's, state for state
// and edge for edge.
type GraphComparison struct {
	Comparison
	TLCEdges, ModelEdges int
	// OnlyTLCEdges and OnlyModelEdges count the transitions one side
	// takes and the other does not: the same two states, the same action
	// with the same parameters.
	OnlyTLCEdges, OnlyModelEdges int
	// Outcome is what TLC's output said of its run, and OutcomeDiffs how
	// it differs from the model's (CompareOutcome): set by
	// CompareGraphTLC, empty from CompareDot alone.
	Outcome      TLCOutcome
	OutcomeDiffs []string
}

// Equal reports whether the two graphs, and the two outcomes, are the
// same.
func (c GraphComparison) Equal() bool {
	return c.Comparison.Equal() && c.OnlyTLCEdges == 0 && c.OnlyModelEdges == 0 && len(c.OutcomeDiffs) == 0
}

// Differences describes what differs: the outcome's differences, then the
// first state or transition that does; "" when nothing does.
func (c GraphComparison) Differences() string {
	return strings.TrimSpace(strings.Join(c.OutcomeDiffs, "\n") + "\n" + c.FirstDiff)
}

// edgeKey is a transition: its two states (the model's numbers) and its
// action as TLC labels it, quotes and spaces removed (Claim(p1),
// Abandon(p1,2)).
type edgeKey struct {
	from, to int32
	action   string
}

// actionLabel is an action's name as both sides write it: TLC's label or
// Model.Describe's, quotes and spaces removed.
func actionLabel(s string) string { return strings.NewReplacer(`"`, "", " ", "").Replace(s) }

// CompareDot reads the state graph TLC wrote with -dump dot,actionlabels
// for g's cfg and compares it with g, which must have its edges
// (Options.Edges, explored to the end without a violation: HasEdges): the
// same states, and from each state the same transitions, by the same
// actions to the same states. FirstDiff names the first state or
// transition that differs, TLC's first in the file, else the model's in
// breadth-first order, with a shortest path to its state.
func CompareDot(g *Graph, r io.Reader) (GraphComparison, error) {
	if !g.HasEdges() {
		return GraphComparison{}, fmt.Errorf("specmodel: CompareDot needs a graph with its edges, explored to the end")
	}
	m := g.model
	cmp := GraphComparison{Comparison: Comparison{ModelStates: g.Len()}}
	ids := map[int64]int32{} // TLC's node ids (fingerprints) to the model's state numbers, -1 for none
	seen := make([]bool, g.Len())
	tlcEdges := make(map[edgeKey]bool, g.NumEdges())
	diff := func(format string, a ...any) {
		if cmp.FirstDiff == "" {
			cmp.FirstDiff = fmt.Sprintf(format, a...)
		}
	}
	describe := func(i int32) string {
		s := g.State(int(i))
		return fmt.Sprintf("%s\nreached by:\n%s", s.TLA(m.cfg.Procs), m.FormatTrace(g.Path(int(i))))
	}
	// TLC writes an edge before the state it leads to when that state is
	// new: edges are resolved once every state is read.
	type dotEdge struct {
		from, to int64
		action   string
		line     int
	}
	var edges []dotEdge
	labels := map[string]string{} // the action labels, interned
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<26)
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		idText, rest, ok := strings.Cut(t, " ")
		id, err := strconv.ParseInt(idText, 10, 64)
		if !ok || err != nil {
			continue // the graph's header and footer
		}
		if to, rest2, ok := strings.Cut(rest, " "); ok && to == "->" {
			dstText, attrs, _ := strings.Cut(rest2, " ")
			dst, err := strconv.ParseInt(dstText, 10, 64)
			if err != nil {
				return cmp, fmt.Errorf("%w: line %d: an edge to %q", ErrDump, line, dstText)
			}
			label, err := dotAttr(attrs, "label")
			if err != nil {
				return cmp, fmt.Errorf("%w: line %d: %v", ErrDump, line, err)
			}
			a, ok := labels[label]
			if !ok {
				a = actionLabel(label)
				labels[label] = a
			}
			edges = append(edges, dotEdge{id, dst, a, line})
			continue
		}
		if _, ok := ids[id]; ok {
			continue
		}
		label, err := dotAttr(rest, "label")
		if err != nil {
			return cmp, fmt.Errorf("%w: line %d: %v", ErrDump, line, err)
		}
		s, err := parseDumpState(label, m.cfg)
		if err != nil {
			return cmp, fmt.Errorf("%w: line %d: %v", ErrDump, line, err)
		}
		cmp.TLCStates++
		i, ok := g.Lookup(s.Key())
		if !ok {
			ids[id] = -1
			cmp.OnlyTLC++
			diff("TLC's state (line %d of its graph) is not a state the model reaches:\n%s", line, s.TLA(m.cfg.Procs))
			continue
		}
		ids[id] = int32(i)
		seen[i] = true
	}
	if err := sc.Err(); err != nil {
		return cmp, err
	}
	if cmp.TLCStates == 0 {
		return cmp, fmt.Errorf("%w: no state in TLC's graph", ErrDump)
	}
	// TLC labels an edge with its action and parameters (Claim("p1"));
	// releases before 1.8 (the pinned v1.7.4) with the action's name alone.
	// The model's edges are labelled the same way, so that the two sets
	// compare: with names alone, two transitions between the same two
	// states by one action with other parameters count once on each side.
	named := true
	for _, e := range edges {
		if strings.Contains(e.action, "(") {
			named = false
			break
		}
	}
	label := func(st Step) string {
		a := actionLabel(m.Describe(st))
		if named {
			a, _, _ = strings.Cut(a, "(")
		}
		return a
	}
	model := make(map[edgeKey]bool, g.NumEdges())
	for i := 0; i < g.Len(); i++ {
		first, end := g.Out(i)
		for e := first; e < end; e++ {
			st, to := g.Edge(e)
			model[edgeKey{int32(i), int32(to), label(st)}] = true
		}
	}
	cmp.ModelEdges = len(model)
	for _, e := range edges {
		from, ok1 := ids[e.from]
		into, ok2 := ids[e.to]
		if !ok1 || !ok2 {
			return cmp, fmt.Errorf("%w: line %d: an edge from or to a state the graph does not give", ErrDump, e.line)
		}
		if from < 0 || into < 0 {
			continue // counted as a state the model lacks
		}
		k := edgeKey{from, into, e.action}
		if tlcEdges[k] {
			continue
		}
		tlcEdges[k] = true
		cmp.TLCEdges++
		if !model[k] {
			cmp.OnlyTLCEdges++
			diff("TLC takes %s from the model's state %d to its state %d; the model does not. The state:\n%s", k.action, from+1, into+1, describe(from))
		}
	}
	for i := 0; i < g.Len(); i++ {
		if !seen[i] {
			cmp.OnlyModel++
			diff("the model's state %d (depth %d) is not in TLC's graph:\n%s", i+1, g.Depth(i), describe(int32(i)))
		}
	}
	missing := map[edgeKey]bool{} // the model's edges TLC lacks, counted once
	for i := 0; i < g.Len(); i++ {
		first, end := g.Out(i)
		for e := first; e < end; e++ {
			st, to := g.Edge(e)
			k := edgeKey{int32(i), int32(to), label(st)}
			if seen[i] && seen[to] && !tlcEdges[k] && !missing[k] {
				missing[k] = true
				cmp.OnlyModelEdges++
				diff("the model takes %s from its state %d to its state %d; TLC does not. The state:\n%s", k.action, i+1, to+1, describe(int32(i)))
			}
		}
	}
	return cmp, nil
}

// dotAttr returns the unescaped value of the quoted attribute name in a
// dot attribute list ([label="...",...]).
func dotAttr(attrs, name string) (string, error) {
	i := strings.Index(attrs, name+`="`)
	if i < 0 {
		return "", fmt.Errorf("no %s attribute in %.60q", name, attrs)
	}
	var b strings.Builder
	for j := i + len(name) + 2; j < len(attrs); j++ {
		switch c := attrs[j]; c {
		case '"':
			return b.String(), nil
		case '\\':
			j++
			if j == len(attrs) {
				return "", fmt.Errorf("an unfinished escape in %s", name)
			}
			switch attrs[j] {
			case 'n', 'l', 'r':
				b.WriteByte('\n')
			default:
				b.WriteByte(attrs[j])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("an unterminated %s", name)
}

// CompareGraphTLC runs TLC on the cfg at cfgPath (the spec beside it, one
// worker; see DumpTLC) with -dump dot,actionlabels, and compares its
// outcome and its whole state graph with the model's: for a cfg with no
// violation, state for state and edge for edge (CompareDot); for one with
// a violation, where TLC stops at its depth, the outcome and the states
// (CompareDump). The comparison holds TLC's outcome and how it differs
// from the model's (CompareOutcome).
func CompareGraphTLC(ctx context.Context, jar, cfgPath string) (GraphComparison, error) {
	c, err := ReadConfig(cfgPath)
	if err != nil {
		return GraphComparison{}, err
	}
	dir, err := os.MkdirTemp("", "specmodel-tlc") // the dump is large: not under the caller's directory
	if err != nil {
		return GraphComparison{}, err
	}
	defer os.RemoveAll(dir)
	m := New(c)
	g := m.ExploreWith(Options{Edges: true}) // Explore's result, and the edges when it ends without a violation
	kind := dumpGraph
	if g.Result().Violation != nil {
		kind = dumpStates
	}
	dump, outcome, err := runTLC(ctx, jar, cfgPath, dir, kind)
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
		cmp.Comparison, err = CompareDump(m.ExploreWith(Options{Continue: true, MaxDepth: g.Result().Violation.Depth}), f)
	}
	cmp.Outcome, cmp.OutcomeDiffs = outcome, CompareOutcome(g, outcome)
	return cmp, err
}
