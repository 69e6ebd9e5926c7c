package tlc

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// dotOf renders g as TLC's -dump dot,actionlabels would: each state once,
// a node whose label is the state, escaped, and each transition an edge
// labelled with its action (TLC quotes the processes); as TLC does, an
// edge comes before the node of a state it reaches first.
func dotOf(g *specmodel.Graph) string {
	var b strings.Builder
	b.WriteString("strict digraph DiskGraph {\nnode [shape=box,style=rounded]\nsubgraph cluster_graph {\n")
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	node := func(i int) string { return "-" + strconv.Itoa(1000+i) }
	written := make([]bool, g.Len())
	write := func(i int) {
		if !written[i] {
			written[i] = true
			s := g.State(i)
			b.WriteString(node(i) + ` [label="` + esc.Replace(s.TLA(g.Model().Config().Procs)) + `",style = filled]` + "\n")
		}
	}
	for i := 0; i < g.Len(); i++ {
		write(i)
		first, end := g.Out(i)
		for e := first; e < end; e++ {
			st, to := g.Edge(e)
			label := g.Model().Describe(st)
			for _, p := range g.Model().Config().Procs {
				label = strings.ReplaceAll(label, p, `"`+p+`"`)
			}
			b.WriteString(node(i) + " -> " + node(to) + ` [label="` + esc.Replace(label) + `",color="black",fontcolor="black"];` + "\n")
			write(to)
		}
	}
	b.WriteString("}\n}\n")
	return b.String()
}

// TestCompareDotCatchesDifference: a graph equal to the model's, state for
// state and edge for edge, compares equal; an edge more, an edge less, an
// edge under another action, a state less and a state more are each
// reported, with the transition or state; a malformed graph is ErrDump.
func TestCompareDotCatchesDifference(t *testing.T) {
	c, g, dot := smallGraph(t)
	cmp, err := CompareDot(g, strings.NewReader(dot))
	if err != nil || !cmp.Equal() || cmp.TLCStates != g.Len() || cmp.TLCEdges != g.NumEdges() {
		t.Fatalf("the model's own graph: %+v, %v", cmp, err)
	}
	lines := strings.Split(dot, "\n")
	edit := func(f func(l string) string) string {
		out := make([]string, 0, len(lines))
		done := false
		for _, l := range lines {
			if !done {
				if n := f(l); n != l {
					done = true
					if n != "" {
						out = append(out, n)
					}
					continue
				}
			}
			out = append(out, l)
		}
		if !done {
			t.Fatal("the edit matched no line")
		}
		return strings.Join(out, "\n")
	}
	isEdge := func(l, action string) bool {
		return strings.Contains(l, " -> ") && strings.Contains(l, `label="`+action)
	}
	for _, tc := range []struct {
		name  string
		dot   string
		check func(GraphComparison) bool
		first string
	}{
		{"an edge less", edit(func(l string) string {
			if isEdge(l, "Renew") {
				return ""
			}
			return l
		}), func(c GraphComparison) bool { return c.OnlyModelEdges == 1 && c.OnlyTLCEdges == 0 }, "the model takes Renew"},
		{"an edge under another action", edit(func(l string) string {
			if isEdge(l, "Release") {
				return strings.Replace(l, `label="Release`, `label="Crash`, 1)
			}
			return l
		}), func(c GraphComparison) bool { return c.OnlyModelEdges == 1 && c.OnlyTLCEdges == 1 }, "TLC takes Crash"},
		{"an edge more", edit(func(l string) string {
			if isEdge(l, "Post") {
				from, _, _ := strings.Cut(l, " ")
				return l + "\n" + from + " -> " + from + ` [label="Renew(\"p1\")",color="black"];`
			}
			return l
		}), func(c GraphComparison) bool { return c.OnlyTLCEdges == 1 && c.OnlyModelEdges == 0 }, "TLC takes Renew(p1)"},
		{"a state more", strings.Replace(dot, "/\\\\ taken = 0", "/\\\\ taken = 1", 1),
			// the edges to and from the two states count as the states
			// do, not as edges one side lacks (a mutant of the
			// seventeenth pass counted the model's)
			func(c GraphComparison) bool {
				return c.OnlyTLC == 1 && c.OnlyModel == 1 && c.OnlyTLCEdges == 0 && c.OnlyModelEdges == 0
			}, "not a state the model reaches"},
	} {
		cmp, err := CompareDot(g, strings.NewReader(tc.dot))
		if err != nil || cmp.Equal() || !tc.check(cmp) || !strings.Contains(cmp.FirstDiff, tc.first) {
			t.Errorf("%s: %+v, %v", tc.name, cmp, err)
		}
	}
	// A node or an edge the file gives twice counts once: TLC before 1.8
	// labels two transitions between the same two states by one action
	// with other parameters alike. (Written against mutants of the
	// seventeenth pass that counted them twice.)
	var twice []string
	for _, l := range lines {
		twice = append(twice, l)
		if strings.Contains(l, `[label="`) {
			twice = append(twice, l)
		}
	}
	cmp, err = CompareDot(g, strings.NewReader(strings.Join(twice, "\n")))
	if err != nil || !cmp.Equal() || cmp.TLCStates != g.Len() || cmp.TLCEdges != g.NumEdges() {
		t.Errorf("every node and edge given twice: %+v, %v", cmp, err)
	}
	for name, bad := range map[string]string{
		"an edge to a state not given": edit(func(l string) string {
			if isEdge(l, "Post") {
				from, _, _ := strings.Cut(l, " ")
				return from + ` -> -1 [label="Post"];`
			}
			return l
		}),
		"a label unterminated": "-1 [label=\"/\\\\ msgs = 0\n",
		"a state unreadable":   "-1 [label=\"/\\\\ msgs = <<\"]\n",
		"no state":             "strict digraph DiskGraph {\n}\n",
	} {
		if _, err := CompareDot(g, strings.NewReader(bad)); !errors.Is(err, ErrDump) {
			t.Errorf("%s: %v, want ErrDump", name, err)
		}
	}
	if _, err := CompareDot(specmodel.New(c).Explore(), strings.NewReader(dot)); err == nil {
		t.Error("a graph explored without its edges compared")
	}
}

// smallGraph is the small cfg's graph with its edges, two claims and one
// message, and the dot file TLC would write of it.
func smallGraph(t *testing.T) (specmodel.Config, *specmodel.Graph, string) {
	t.Helper()
	c, err := specmodel.ReadConfig("../../spec/ThreadClaimLapseSmall.cfg")
	if err != nil {
		t.Fatal(err)
	}
	c.MaxClaims, c.MaxMsgs = 2, 1
	g := specmodel.New(c).ExploreWith(specmodel.Options{Edges: true})
	return c, g, dotOf(g)
}

// TestCompareDotNamesOnly: TLC before 1.8 (the pinned v1.7.4) labels an
// edge with the action's name alone; the same graph compares equal, and
// an edge less is still seen.
func TestCompareDotNamesOnly(t *testing.T) {
	_, g, dot := smallGraph(t)
	named := regexp.MustCompile(`label="([A-Za-z]+)\((?:[^"\\]|\\.)*\)"`).ReplaceAllString(dot, `label="$1"`)
	if named == dot || strings.Contains(named, `label="Claim(`) {
		t.Fatal("the names-only graph still has parameters")
	}
	cmp, err := CompareDot(g, strings.NewReader(named))
	if err != nil || !cmp.Equal() || cmp.TLCStates != g.Len() {
		t.Errorf("names only, the model's own graph: %+v, %v", cmp, err)
	}
	var cut []string
	dropped := false
	for _, l := range strings.Split(named, "\n") {
		if !dropped && strings.Contains(l, ` -> `) && strings.Contains(l, `label="Renew"`) {
			dropped = true
			continue
		}
		cut = append(cut, l)
	}
	cmp, err = CompareDot(g, strings.NewReader(strings.Join(cut, "\n")))
	if err != nil || cmp.OnlyModelEdges != 1 || !strings.Contains(cmp.FirstDiff, "the model takes Renew") {
		t.Errorf("names only, an edge less: %+v, %v", cmp, err)
	}
}

// The cfg a graph dump runs leaves out the liveness properties the model
// does not check and reads LiveSpec as Spec; a safety cfg is unchanged.
func TestSafetyCfg(t *testing.T) {
	for _, tc := range []struct{ path, has, lacks string }{
		{"../../spec/ThreadClaimLapseLiveness.cfg", "SPECIFICATION Spec\n", "    EveryPostConsumed\n"},
		{"../../spec/ThreadClaimLapseSmall.cfg", "NoLiveTakeover", "SPECIFICATION LiveSpec"},
	} {
		b, err := os.ReadFile(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		out, err := safetyCfg(b, tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), tc.has) || strings.Contains(string(out), tc.lacks) {
			t.Errorf("%s:\n%s", tc.path, out)
		}
		if !strings.Contains(string(out), "NoLiveTakeover") {
			t.Errorf("%s: the action property the model checks was dropped", tc.path)
		}
		if _, err := specmodel.ParseConfig(tc.path, string(out)); err != nil {
			t.Errorf("%s: %v", tc.path, err)
		}
	}
}
