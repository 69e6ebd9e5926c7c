package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/internal/tlc"
)

const modelUsage = `usage: tracecheck model [flags] [CFG...]

Enumerates the states of spec/ThreadClaimLapse.tla reachable under a cfg's
constants with the Go model of the spec (package specmodel), breadth first
as TLC does, checking the cfg's invariants in every state. Prints the
number of distinct states ("N distinct states"), the successors computed
per action, the depth, and for a violation the invariant, its depth and a
shortest counterexample. Of the temporal properties (PROPERTIES), the
action property NoLiveTakeover is checked on every transition; liveness
properties (EveryPostConsumed) are not checked.

The cfgs are -cfg and any given as arguments (default
spec/ThreadClaimLapse.cfg). A cfg that declares its outcome in an
"\* expect:" comment passes when the outcome is the declared one (a
violation of one of the invariants it names, or ok); one that declares none
passes when no invariant is violated, and so does one that declares the
violation of a liveness property (TLC alone can find that: tracecheck tlc
spec).

With -compare-tlc, TLC (the jar at -jar, else the one tracecheck tlc
finds) also explores each cfg and dumps its state graph; for a cfg with no
violation the two graphs must be equal, state for state and transition for
transition (the same action from the same state to the same state), and
for one with a violation the outcome and the states up to its depth; the
first state or transition that differs is printed.

Exits 0 when every cfg has its expected outcome (and, with -compare-tlc,
TLC's states), 1 when not, 2 for a bad cfg or bad usage, 4 when TLC could
not be run.

Flags:
`

// modelReport is one cfg's outcome, as -json prints it.
type modelReport struct {
	Cfg         string              `json:"cfg"`
	Distinct    int                 `json:"distinct"`
	Generated   int                 `json:"generated"`
	Depth       int                 `json:"depth"`
	Transitions map[core.Action]int `json:"transitions"`
	Seconds     float64             `json:"seconds"`
	Violation   *modelViolation     `json:"violation,omitempty"`
	Unchecked   []string            `json:"unchecked_properties,omitempty"`
	Expect      string              `json:"expect,omitempty"`
	AsExpected  bool                `json:"as_expected"`
	TLCOnly     bool                `json:"tlc_only,omitempty"` // the declared violation is of a property the model does not check
	TLC         *tlcComparison      `json:"tlc,omitempty"`
}

type modelViolation struct {
	Invariant string      `json:"invariant"`
	Depth     int         `json:"depth"`
	Trace     []modelStep `json:"trace"`
}

type modelStep struct {
	Action string `json:"action"` // as the spec writes it: Init, Post, Claim(p1), Abandon(p1, 2)
	State  string `json:"state"`
}

type tlcComparison struct {
	States    int    `json:"states"`          // distinct states in TLC's dump
	Edges     int    `json:"edges,omitempty"` // transitions in TLC's graph (a cfg with no violation)
	Distinct  int    `json:"distinct"`
	Violated  string `json:"violated,omitempty"`
	Depth     int    `json:"depth"`
	Equal     bool   `json:"equal"`
	FirstDiff string `json:"first_difference,omitempty"`
}

func cmdModel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("model", flag.ContinueOnError)
	cfgPath := fs.String("cfg", "", "the cfg file (default spec/ThreadClaimLapse.cfg when no CFG argument is given)")
	asJSON := jsonFlag(fs)
	compare := fs.Bool("compare-tlc", false, "also run TLC with -dump and compare its state graph with the model's, state for state and transition for transition")
	jar := fs.String("jar", "", "tla2tools.jar for -compare-tlc (default: the one tracecheck tlc finds: $TLA2TOOLS_JAR, the local directory, the pinned release)")
	if err := parse(fs, args, stdout, stderr, modelUsage); err != nil {
		return err
	}
	paths := fs.Args()
	if *cfgPath != "" {
		paths = append([]string{*cfgPath}, paths...)
	}
	if len(paths) == 0 {
		paths = []string{"spec/ThreadClaimLapse.cfg"}
	}
	var cfgs []specmodel.Config
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil {
			return usageError{err.Error()}
		} else if fi.IsDir() {
			return usageError{fmt.Sprintf("%s: is a directory, not a cfg file", p)}
		}
		c, err := specmodel.ReadConfig(p)
		if err != nil {
			return usageError{err.Error()}
		}
		cfgs = append(cfgs, c)
	}
	if fi, err := os.Stat(*jar); *jar != "" && (err != nil || fi.IsDir()) {
		// Where java said only that it found no tlc2.TLC class.
		return usageError{fmt.Sprintf("-jar %s: no such file", *jar)}
	}
	env := tlc.Env{Jar: *jar} // java on the PATH
	if *compare && *jar == "" {
		// The java and jar tracecheck tlc would use: TLA2TOOLS_JAR, else
		// the local directory, else the pinned release.
		var err error
		env, err = tlc.Find(ctx, findConfig("."))
		if err != nil {
			return failure{exitCouldNotRun, fmt.Sprintf("tracecheck model: -compare-tlc needs a jar (-jar, TLA2TOOLS_JAR, or the local directory; see spec/README.md, \"Pinned tools\"): %v", err)}
		}
	}
	failed := 0
	var reps []modelReport
	for i, c := range cfgs {
		rep := modelRun(paths[i], c)
		if *compare {
			cmp, err := compareTLC(ctx, env, paths[i])
			if err != nil {
				err = failure{exitCouldNotRun, fmt.Sprintf("tracecheck model: %s: TLC: %v", paths[i], err)}
				if *asJSON {
					return writeJSON(stdout, "model", err, reps)
				}
				return err
			}
			rep.TLC = cmp
		}
		if !rep.AsExpected || (rep.TLC != nil && !rep.TLC.Equal) {
			failed++
		}
		reps = append(reps, rep)
		if !*asJSON {
			printModelReport(stdout, rep)
		}
	}
	var err error
	if failed > 0 {
		err = failure{exitFailed, fmt.Sprintf("tracecheck model: %d of %d cfgs not as expected", failed, len(cfgs))}
	}
	if *asJSON {
		// The one object every command's -json prints; figures is the
		// list of the cfgs' reports.
		return writeJSON(stdout, "model", err, reps)
	}
	return err
}

func modelRun(path string, c specmodel.Config) modelReport {
	m := specmodel.New(c)
	t0 := time.Now()
	g := m.Explore()
	el := time.Since(t0)
	r := g.Result()
	rep := modelReport{
		Cfg: path, Distinct: r.Distinct, Generated: r.Generated, Depth: r.Depth,
		Transitions: r.Transitions, Seconds: el.Seconds(), Unchecked: c.Unchecked(),
		Expect: strings.Join(c.Expect, " "),
	}
	if v := r.Violation; v != nil {
		mv := &modelViolation{Invariant: v.Invariant, Depth: v.Depth}
		for _, ts := range v.Trace {
			name := "Init"
			if ts.Step.Action != "" {
				name = m.Describe(ts.Step)
			}
			mv.Trace = append(mv.Trace, modelStep{Action: name, State: ts.State.String()})
		}
		rep.Violation = mv
	}
	rep.TLCOnly = c.ExpectsUnchecked()
	rep.AsExpected = asExpected(c.Expect, r.Violation, rep.TLCOnly)
	return rep
}

// asExpected compares an outcome with a cfg's declared one. A declared
// violation of a property the model does not check (tlcOnly) is TLC's to
// find; the model's part is no invariant violated.
func asExpected(expect []string, v *specmodel.Violation, tlcOnly bool) bool {
	if len(expect) == 0 || expect[0] == "ok" || tlcOnly {
		return v == nil
	}
	return expect[0] == "violation" && v != nil && slices.Contains(expect[1:], v.Invariant)
}

func printModelReport(w io.Writer, r modelReport) {
	fmt.Fprintf(w, "%s: %d distinct states (%d generated), depth %d, %.2fs\n", r.Cfg, r.Distinct, r.Generated, r.Depth, r.Seconds)
	fmt.Fprintf(w, "  transitions by action:")
	for _, a := range core.Actions() {
		if n, ok := r.Transitions[a]; ok {
			fmt.Fprintf(w, " %s %d", a, n)
		}
	}
	fmt.Fprintln(w)
	if v := r.Violation; v != nil {
		fmt.Fprintf(w, "  invariant %s violated at depth %d; shortest counterexample:\n", v.Invariant, v.Depth)
		for i, s := range v.Trace {
			fmt.Fprintf(w, "  %3d %-16s %s\n", i+1, s.Action, s.State)
		}
	} else {
		fmt.Fprintln(w, "  no invariant violated")
	}
	if len(r.Unchecked) > 0 {
		fmt.Fprintf(w, "  not checked (temporal): %s\n", strings.Join(r.Unchecked, ", "))
	}
	if r.TLC != nil {
		tlcSays := "no violation"
		if r.TLC.Violated != "" {
			tlcSays = r.TLC.Violated + " violated"
		}
		on := ""
		if r.TLC.Edges > 0 && len(r.Unchecked) > 0 {
			on = " (the cfg's safety part, whose graph it dumps: " + strings.Join(r.Unchecked, ", ") + " is tlc spec's to check)"
		}
		fmt.Fprintf(w, "  TLC%s: %d distinct states, depth %d, %s\n", on, r.TLC.Distinct, r.TLC.Depth, tlcSays)
		switch {
		case r.TLC.Equal && r.TLC.Edges > 0:
			fmt.Fprintf(w, "  TLC's state graph (%d states, %d transitions) equals the model's, state for state and edge for edge; same outcome\n", r.TLC.States, r.TLC.Edges)
		case r.TLC.Equal:
			fmt.Fprintf(w, "  TLC's state set (%d states dumped) equals the model's, state for state; same outcome\n", r.TLC.States)
		default:
			fmt.Fprintf(w, "  TLC DIFFERS from the model (%d states dumped):\n%s\n", r.TLC.States, indent(r.TLC.FirstDiff, "    "))
		}
	}
	expect := r.Expect
	if expect == "" {
		expect = "ok (none declared)"
	}
	verdict := "as expected"
	if r.TLCOnly {
		verdict = "a property TLC alone checks; no invariant violated on the way, " + verdict
	}
	if !r.AsExpected {
		verdict = "NOT AS EXPECTED"
	}
	fmt.Fprintf(w, "  expect %s: %s\n", expect, verdict)
}

func indent(s, pre string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = pre + lines[i]
	}
	return strings.Join(lines, "\n")
}

// compareTLC runs TLC on the cfg, dumping its state graph, and compares
// it with the model's (tlc.Env.CompareGraph).
func compareTLC(ctx context.Context, env tlc.Env, path string) (*tlcComparison, error) {
	cmp, err := env.CompareGraph(ctx, path)
	if err != nil {
		return nil, err
	}
	o := cmp.Summary
	return &tlcComparison{States: cmp.TLCStates, Edges: cmp.TLCEdges, Distinct: o.Distinct, Violated: o.Violated, Depth: o.Depth,
		Equal: cmp.Equal(), FirstDiff: cmp.Differences()}, nil
}
