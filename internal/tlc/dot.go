package tlc

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// CompareDot reads the state graph TLC wrote with -dump dot,actionlabels
// for g's cfg and compares it with g, which must have its edges
// (Options.Edges, explored to the end without a violation: HasEdges): the
// same states, and from each state the same transitions, by the same
// actions to the same states. FirstDiff names the first state or
// transition that differs, TLC's first in the file, else the model's in
// breadth-first order, with a shortest path to its state.
func CompareDot(g *specmodel.Graph, r io.Reader) (GraphComparison, error) {
	if !g.HasEdges() {
		return GraphComparison{}, fmt.Errorf("tlc: CompareDot needs a graph with its edges, explored to the end")
	}
	c := &dotComparison{
		g: g, m: g.Model(), procs: g.Model().Config().Procs,
		cmp:  GraphComparison{StateComparison: StateComparison{ModelStates: g.Len()}},
		ids:  map[int64]int32{},
		seen: make([]bool, g.Len()),
	}
	if err := c.read(r); err != nil {
		return c.cmp, err
	}
	label := modelLabels(c.m, namesOnly(c.edges))
	model := c.modelEdges(label)
	c.cmp.ModelEdges = len(model)
	tlcEdges, err := c.compareTLCEdges(model)
	if err != nil {
		return c.cmp, err
	}
	c.compareModelStates()
	c.compareModelEdges(label, tlcEdges)
	return c.cmp, nil
}

// dotComparison is CompareDot's work: TLC's graph as read, mapped onto
// the model's states, and the comparison so far.
type dotComparison struct {
	g     *specmodel.Graph
	m     *specmodel.Model
	procs []string
	cmp   GraphComparison
	ids   map[int64]int32 // TLC's node ids (fingerprints) to the model's state numbers, -1 for none
	seen  []bool          // the model's states TLC's graph has
	edges []dotEdge       // TLC's edges, in the file's order
}

// dotEdge is an edge of TLC's graph, as the file gives it: TLC writes an
// edge before the state it leads to when that state is new, so edges are
// resolved once every state is read.
type dotEdge struct {
	from, to int64
	action   string
	line     int
}

// edgeKey is a transition: its two states (the model's numbers) and its
// action as TLC labels it, quotes and spaces removed (Claim(p1),
// Abandon(p1,2)).
type edgeKey struct {
	from, to int32
	action   string
}

// diff records the first difference found.
func (c *dotComparison) diff(format string, a ...any) {
	if c.cmp.FirstDiff == "" {
		c.cmp.FirstDiff = fmt.Sprintf(format, a...)
	}
}

// describe is the model's state i with a shortest path to it.
func (c *dotComparison) describe(i int32) string {
	s := c.g.State(int(i))
	return fmt.Sprintf("%s\nreached by:\n%s", s.TLA(c.procs), c.m.FormatTrace(c.g.Path(int(i))))
}

// read reads TLC's graph: each node's state, looked up among the model's
// (a state the model lacks is counted and reported), and each edge, kept
// for later. Lines that are neither (the graph's header and footer) are
// skipped.
func (c *dotComparison) read(r io.Reader) error {
	labels := map[string]string{} // the action labels, interned
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<26)
	line := 0
	for sc.Scan() {
		line++
		idText, rest, ok := strings.Cut(sc.Text(), " ")
		id, err := strconv.ParseInt(idText, 10, 64)
		if !ok || err != nil {
			continue // the graph's header and footer
		}
		if to, attrs, ok := strings.Cut(rest, " "); ok && to == "->" {
			e, err := readDotEdge(id, attrs, labels)
			if err != nil {
				return fmt.Errorf("%w: line %d: %v", ErrDump, line, err)
			}
			e.line = line
			c.edges = append(c.edges, e)
			continue
		}
		if err := c.readNode(id, rest, line); err != nil {
			return fmt.Errorf("%w: line %d: %v", ErrDump, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if c.cmp.TLCStates == 0 {
		return fmt.Errorf("%w: no state in TLC's graph", ErrDump)
	}
	return nil
}

// readDotEdge reads an edge's "DST [label=...]" after "FROM -> ", its
// action label interned in labels.
func readDotEdge(from int64, attrs string, labels map[string]string) (dotEdge, error) {
	dstText, attrs, _ := strings.Cut(attrs, " ")
	dst, err := strconv.ParseInt(dstText, 10, 64)
	if err != nil {
		return dotEdge{}, fmt.Errorf("an edge to %q", dstText)
	}
	label, err := dotAttr(attrs, "label")
	if err != nil {
		return dotEdge{}, err
	}
	a, ok := labels[label]
	if !ok {
		a = actionLabel(label)
		labels[label] = a
	}
	return dotEdge{from: from, to: dst, action: a}, nil
}

// readNode reads the node id's state, the first time the file gives it,
// and maps it to the model's state.
func (c *dotComparison) readNode(id int64, attrs string, line int) error {
	if _, ok := c.ids[id]; ok {
		return nil
	}
	label, err := dotAttr(attrs, "label")
	if err != nil {
		return err
	}
	s, err := specmodel.ParseState(label, c.m.Config())
	if err != nil {
		return err
	}
	c.cmp.TLCStates++
	i, ok := c.g.Lookup(s.Key())
	if !ok {
		c.ids[id] = -1
		c.cmp.OnlyTLC++
		c.diff("TLC's state (line %d of its graph) is not a state the model reaches:\n%s", line, s.TLA(c.procs))
		return nil
	}
	c.ids[id] = int32(i)
	c.seen[i] = true
	return nil
}

// namesOnly reports whether TLC labelled its edges with the actions'
// names alone: releases before 1.8 (the pinned v1.7.4) do; later ones
// give the parameters too (Claim("p1")).
func namesOnly(edges []dotEdge) bool {
	for _, e := range edges {
		if strings.Contains(e.action, "(") {
			return false
		}
	}
	return true
}

// modelLabels labels the model's steps as TLC labelled its edges, so that
// the two sets compare: with names alone, two transitions between the same
// two states by one action with other parameters count once on each side.
func modelLabels(m *specmodel.Model, namesOnly bool) func(specmodel.Step) string {
	return func(st specmodel.Step) string {
		a := actionLabel(m.Describe(st))
		if namesOnly {
			a, _, _ = strings.Cut(a, "(")
		}
		return a
	}
}

// modelEdges is the set of the model's transitions, labelled by label.
func (c *dotComparison) modelEdges(label func(specmodel.Step) string) map[edgeKey]bool {
	model := make(map[edgeKey]bool, c.g.NumEdges())
	for i := 0; i < c.g.Len(); i++ {
		first, end := c.g.Out(i)
		for e := first; e < end; e++ {
			st, to := c.g.Edge(e)
			model[edgeKey{int32(i), int32(to), label(st)}] = true
		}
	}
	return model
}

// compareTLCEdges counts TLC's transitions between states the model has,
// each once, and those the model does not take; it returns them as a set.
// An edge from or to a node the file does not give is ErrDump.
func (c *dotComparison) compareTLCEdges(model map[edgeKey]bool) (map[edgeKey]bool, error) {
	tlcEdges := make(map[edgeKey]bool, c.g.NumEdges())
	for _, e := range c.edges {
		from, ok1 := c.ids[e.from]
		into, ok2 := c.ids[e.to]
		if !ok1 || !ok2 {
			return tlcEdges, fmt.Errorf("%w: line %d: an edge from or to a state the graph does not give", ErrDump, e.line)
		}
		if from < 0 || into < 0 {
			continue // counted as a state the model lacks
		}
		k := edgeKey{from, into, e.action}
		if tlcEdges[k] {
			continue
		}
		tlcEdges[k] = true
		c.cmp.TLCEdges++
		if !model[k] {
			c.cmp.OnlyTLCEdges++
			c.diff("TLC takes %s from the model's state %d to its state %d; the model does not. The state:\n%s", k.action, from+1, into+1, c.describe(from))
		}
	}
	return tlcEdges, nil
}

// compareModelStates counts the model's states TLC's graph lacks.
func (c *dotComparison) compareModelStates() {
	for i := 0; i < c.g.Len(); i++ {
		if !c.seen[i] {
			c.cmp.OnlyModel++
			c.diff("the model's state %d (depth %d) is not in TLC's graph:\n%s", i+1, c.g.Depth(i), c.describe(int32(i)))
		}
	}
}

// compareModelEdges counts, once each, the model's transitions between
// states TLC has that TLC does not take.
func (c *dotComparison) compareModelEdges(label func(specmodel.Step) string, tlcEdges map[edgeKey]bool) {
	missing := map[edgeKey]bool{}
	for i := 0; i < c.g.Len(); i++ {
		first, end := c.g.Out(i)
		for e := first; e < end; e++ {
			st, to := c.g.Edge(e)
			k := edgeKey{int32(i), int32(to), label(st)}
			if c.seen[i] && c.seen[to] && !tlcEdges[k] && !missing[k] {
				missing[k] = true
				c.cmp.OnlyModelEdges++
				c.diff("the model takes %s from its state %d to its state %d; TLC does not. The state:\n%s", k.action, i+1, to+1, c.describe(int32(i)))
			}
		}
	}
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
