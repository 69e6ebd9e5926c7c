package specmodel

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrDump: TLC's state dump could not be parsed, or holds a state the
// model's types cannot represent.
var ErrDump = errors.New("bad TLC state dump")

// Comparison is the outcome of comparing TLC's state set with the model's.
type Comparison struct {
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
func (c Comparison) Equal() bool { return c.OnlyTLC == 0 && c.OnlyModel == 0 }

// CompareOutcome compares TLC's outcome with the model's exploration (g,
// Explore's, which stops at the first violation as TLC does): the same
// distinct states and depth for a cfg with no violation; the same violated
// invariant, at the same depth, by the same counterexample, for one with.
// It returns the differences, none when they agree.
func CompareOutcome(g *Graph, o TLCOutcome) []string {
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
			name = strings.ReplaceAll(g.model.Describe(ts.Step), " ", "")
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
func CompareDump(g *Graph, r io.Reader) (Comparison, error) {
	m := g.model
	cmp := Comparison{ModelStates: g.Len()}
	seen := make(map[string]bool, g.Len())
	err := ReadDump(r, m.cfg, func(n int, s State) error {
		k := s.Key()
		if seen[k] {
			return nil
		}
		seen[k] = true
		cmp.TLCStates++
		if _, ok := g.Lookup(k); !ok {
			cmp.OnlyTLC++
			if cmp.FirstDiff == "" {
				cmp.FirstDiff = fmt.Sprintf("TLC's state %d is not a state the model reaches:\n%s", n, s.TLA(m.cfg.Procs))
			}
		}
		return nil
	})
	if err != nil {
		return cmp, err
	}
	for i := 0; i < g.Len(); i++ {
		if seen[g.keys[i]] || (g.maxDepth > 0 && g.Depth(i) >= g.maxDepth) {
			continue
		}
		cmp.OnlyModel++
		if cmp.FirstDiff == "" {
			s := g.State(i)
			cmp.FirstDiff = fmt.Sprintf("the model's state %d (depth %d) is not in TLC's dump:\n%s\nreached by:\n%s",
				i+1, g.Depth(i), s.TLA(m.cfg.Procs), m.FormatTrace(g.Path(i)))
		}
	}
	return cmp, nil
}

// ReadDump parses TLC's -dump output ("State N:" followed by the state as
// a conjunction `/\ var = value`, a value possibly over several lines) and
// calls fn with each state, converted to the model's State for cfg.
func ReadDump(r io.Reader, cfg Config, fn func(n int, s State) error) error {
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
		s, err := parseDumpState(cur.String(), cfg)
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

// parseDumpState converts one state's text into a State.
func parseDumpState(text string, cfg Config) (State, error) {
	vars := map[string]value{}
	for _, part := range strings.Split("\n"+strings.TrimSpace(text), "\n/\\ ") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rhs, ok := strings.Cut(part, " = ")
		if !ok {
			return State{}, fmt.Errorf("%q is not `var = value`", part)
		}
		p := &tlaParser{s: rhs}
		v, err := p.value()
		if err == nil {
			p.ws()
			if p.i != len(p.s) {
				err = fmt.Errorf("trailing %q", p.s[p.i:])
			}
		}
		if err != nil {
			return State{}, fmt.Errorf("variable %s: %v", name, err)
		}
		vars[strings.TrimSpace(name)] = v
	}
	return fromValues(vars, cfg)
}

// value is a parsed TLA+ value: an int, a bool, a string, a sequence
// (<<...>>), or a record/function (field or key to value).
type value struct {
	kind byte // 'i', 'b', 's', 'q' (sequence), 'r' (record or function)
	i    int
	b    bool
	s    string
	seq  []value
	rec  map[string]value
}

type tlaParser struct {
	s string
	i int
}

func (p *tlaParser) ws() {
	for p.i < len(p.s) && strings.ContainsRune(" \t\r\n", rune(p.s[p.i])) {
		p.i++
	}
}

func (p *tlaParser) eat(tok string) bool {
	p.ws()
	if strings.HasPrefix(p.s[p.i:], tok) {
		p.i += len(tok)
		return true
	}
	return false
}

func (p *tlaParser) ident() string {
	p.ws()
	j := p.i
	for j < len(p.s) && (p.s[j] == '_' || p.s[j] >= 'a' && p.s[j] <= 'z' || p.s[j] >= 'A' && p.s[j] <= 'Z' || p.s[j] >= '0' && p.s[j] <= '9') {
		j++
	}
	id := p.s[p.i:j]
	p.i = j
	return id
}

func (p *tlaParser) str() (string, error) {
	p.ws()
	j := p.i + 1
	for j < len(p.s) && p.s[j] != '"' {
		if p.s[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(p.s) {
		return "", errors.New("unterminated string")
	}
	s, err := strconv.Unquote(p.s[p.i : j+1])
	p.i = j + 1
	return s, err
}

func (p *tlaParser) value() (value, error) {
	p.ws()
	if p.i >= len(p.s) {
		return value{}, errors.New("value expected")
	}
	switch c := p.s[p.i]; {
	case c == '"':
		s, err := p.str()
		return value{kind: 's', s: s}, err
	case c >= '0' && c <= '9' || c == '-':
		j := p.i + 1
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(p.s[p.i:j])
		p.i = j
		return value{kind: 'i', i: n}, err
	case p.eat("<<"):
		v := value{kind: 'q'}
		if p.eat(">>") {
			return v, nil
		}
		for {
			e, err := p.value()
			if err != nil {
				return v, err
			}
			v.seq = append(v.seq, e)
			if p.eat(">>") {
				return v, nil
			}
			if !p.eat(",") {
				return v, errors.New("`,` or `>>` expected")
			}
		}
	case p.eat("["):
		v := value{kind: 'r', rec: map[string]value{}}
		for {
			p.ws()
			var key string
			if p.i < len(p.s) && p.s[p.i] == '"' {
				k, err := p.str()
				if err != nil {
					return v, err
				}
				key = k
			} else {
				key = p.ident()
			}
			if key == "" || !p.eat("|->") {
				return v, errors.New("`field |-> value` expected")
			}
			e, err := p.value()
			if err != nil {
				return v, err
			}
			v.rec[key] = e
			if p.eat("]") {
				return v, nil
			}
			if !p.eat(",") {
				return v, errors.New("`,` or `]` expected")
			}
		}
	case p.eat("("):
		// a function over strings printed as (k1 :> v1 @@ k2 :> v2)
		v := value{kind: 'r', rec: map[string]value{}}
		for {
			k, err := p.value()
			if err != nil {
				return v, err
			}
			if k.kind != 's' || !p.eat(":>") {
				return v, errors.New("`\"key\" :> value` expected")
			}
			e, err := p.value()
			if err != nil {
				return v, err
			}
			v.rec[k.s] = e
			if p.eat(")") {
				return v, nil
			}
			if !p.eat("@@") {
				return v, errors.New("`@@` or `)` expected")
			}
		}
	default:
		switch id := p.ident(); id {
		case "TRUE", "FALSE":
			return value{kind: 'b', b: id == "TRUE"}, nil
		}
		return value{}, fmt.Errorf("unexpected %q", p.s[p.i:min(len(p.s), p.i+10)])
	}
}

// fromValues maps TLC's variables onto the model's State.
func fromValues(vars map[string]value, cfg Config) (State, error) {
	want := []string{"msgs", "taken", "lease", "runs", "reqs", "consumed", "liveAbandoned", "pc", "hold", "plan", "run", "nextHolder"}
	for _, k := range want {
		if _, ok := vars[k]; !ok {
			return State{}, fmt.Errorf("variable %s missing", k)
		}
	}
	if len(vars) != len(want) {
		return State{}, fmt.Errorf("%d variables, the model has %d", len(vars), len(want))
	}
	var err error
	small := func(v value) uint8 {
		if v.kind != 'i' || v.i < 0 || v.i > 255 {
			if err == nil {
				err = fmt.Errorf("%v is not a small natural", v)
			}
			return 0
		}
		return uint8(v.i)
	}
	boolean := func(v value) bool {
		if v.kind != 'b' && err == nil {
			err = fmt.Errorf("%v is not a boolean", v)
		}
		return v.b
	}
	field := func(v value, k string) value {
		if v.kind != 'r' {
			if err == nil {
				err = fmt.Errorf("%v is not a record", v)
			}
			return value{}
		}
		f, ok := v.rec[k]
		if !ok && err == nil {
			err = fmt.Errorf("record has no field %s", k)
		}
		return f
	}
	enum := func(v value, names []string) uint8 {
		i := slices.Index(names, v.s)
		if v.kind != 's' || i < 0 {
			if err == nil {
				err = fmt.Errorf("%v is not one of %v", v, names)
			}
			return 0
		}
		return uint8(i)
	}
	seq := func(v value) []value {
		if v.kind != 'q' && !(v.kind == 'r' && len(v.rec) == 0) && err == nil {
			err = fmt.Errorf("%v is not a sequence", v)
		}
		return v.seq
	}
	s := State{
		Msgs: small(vars["msgs"]), Taken: small(vars["taken"]),
		Lease:         Lease{Holder: small(field(vars["lease"], "holder")), Expired: boolean(field(vars["lease"], "expired"))},
		LiveAbandoned: boolean(vars["liveAbandoned"]),
		NextHolder:    small(vars["nextHolder"]),
	}
	for _, r := range seq(vars["runs"]) {
		s.Runs = append(s.Runs, Run{Holder: small(field(r, "holder")), Prompt: small(field(r, "prompt")), State: RunState(enum(field(r, "state"), runStateNames[:]))})
	}
	for _, q := range seq(vars["reqs"]) {
		s.Reqs = append(s.Reqs, Req{Run: small(field(q, "run")), State: ReqState(enum(field(q, "state"), reqStateNames[:])), Answer: small(field(q, "answer"))})
	}
	for _, c := range seq(vars["consumed"]) {
		s.Consumed = append(s.Consumed, small(c))
	}
	if len(s.Consumed) != cfg.MaxMsgs && err == nil {
		err = fmt.Errorf("consumed has %d elements, MaxMsgs is %d", len(s.Consumed), cfg.MaxMsgs)
	}
	for _, name := range cfg.Procs {
		s.Procs = append(s.Procs, Proc{
			PC:   PC(enum(field(vars["pc"], name), pcNames[:])),
			Hold: small(field(vars["hold"], name)),
			Plan: Plan{
				Kind: PlanKind(enum(field(field(vars["plan"], name), "kind"), planKindNames[:])),
				Msg:  small(field(field(vars["plan"], name), "msg")),
				Req:  small(field(field(vars["plan"], name), "req")),
			},
			Run: small(field(vars["run"], name)),
		})
	}
	for _, k := range []string{"pc", "hold", "plan", "run"} {
		if v := vars[k]; v.kind == 'r' && len(v.rec) != len(cfg.Procs) && err == nil {
			err = fmt.Errorf("%s has %d processes, the cfg %d", k, len(v.rec), len(cfg.Procs))
		}
	}
	return s, err
}

// DumpTLC runs TLC (java on the PATH, with the tla2tools jar) on a copy of
// the cfg's directory's spec in a temporary directory under dir, with one
// worker and -dump, and returns the dump file's path. TLC's own output is
// returned with an error when TLC fails for a reason other than the cfg's
// declared violation.
func DumpTLC(ctx context.Context, jar, cfgPath, dir string) (string, TLCOutcome, error) {
	return runTLC(ctx, jar, cfgPath, dir, dumpStates)
}

// What a run of TLC dumps.
type dumpKind int

const (
	dumpNone   dumpKind = iota
	dumpStates          // -dump FILE: the distinct states
	dumpGraph           // -dump dot,actionlabels FILE.dot: every state and transition, on the cfg's safety part (safetyCfg)
)

// RunTLC runs TLC as DumpTLC does, without the dump: what a benchmark of
// TLC against Explore times.
func RunTLC(ctx context.Context, jar, cfgPath, dir string) (TLCOutcome, error) {
	_, out, err := runTLC(ctx, jar, cfgPath, dir, dumpNone)
	return out, err
}

// TLCOutcome is what TLC's output says of a run.
type TLCOutcome struct {
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

// ParseTLCOutput reads the figures and the error trace from TLC's output.
func ParseTLCOutput(out string) TLCOutcome {
	var o TLCOutcome
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case !strings.HasPrefix(line, "Progress") && strings.Contains(line, " states generated, ") && strings.Contains(line, " distinct states found"):
			fmt.Sscanf(line, "%d states generated, %d distinct states found", &o.Generated, &o.Distinct)
		case strings.HasPrefix(line, "The depth of the complete state graph search is "):
			if o.Violated == "" {
				fmt.Sscanf(strings.TrimPrefix(line, "The depth of the complete state graph search is "), "%d", &o.Depth)
			}
		case strings.HasPrefix(line, "Error: Invariant ") && strings.HasSuffix(line, " is violated."):
			o.Violated = strings.TrimSuffix(strings.TrimPrefix(line, "Error: Invariant "), " is violated.")
		case strings.HasPrefix(line, "Error: Action property ") && strings.HasSuffix(line, " is violated."):
			o.Violated = strings.TrimSuffix(strings.TrimPrefix(line, "Error: Action property "), " is violated.")
		case strings.HasPrefix(line, "State ") && strings.Contains(line, ": <"):
			name := line[strings.Index(line, ": <")+3:]
			if i := strings.Index(name, " line "); i >= 0 {
				name = name[:i]
			}
			name = strings.TrimSuffix(name, ">")
			if name == "Initial predicate" {
				name = "Init"
			}
			o.Trace = append(o.Trace, strings.NewReplacer(`"`, "", " ", "").Replace(name))
		}
	}
	if o.Violated != "" {
		o.Depth = len(o.Trace)
	}
	return o
}

// runTLC runs TLC on a copy of the cfg's spec, dumping what dump says,
// and returns the dump file's path.
func runTLC(ctx context.Context, jar, cfgPath, dir string, dump dumpKind) (string, TLCOutcome, error) {
	tmp, err := os.MkdirTemp(dir, "tlcdump")
	if err != nil {
		return "", TLCOutcome{}, err
	}
	specDir := filepath.Dir(cfgPath)
	tlas, err := filepath.Glob(filepath.Join(specDir, "*.tla"))
	if err != nil || len(tlas) == 0 {
		return "", TLCOutcome{}, fmt.Errorf("no .tla beside %s", cfgPath)
	}
	for _, f := range append(tlas, cfgPath) {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", TLCOutcome{}, err
		}
		if f == cfgPath && dump == dumpGraph {
			b, err = safetyCfg(b, cfgPath)
			if err != nil {
				return "", TLCOutcome{}, err
			}
		}
		if err := os.WriteFile(filepath.Join(tmp, filepath.Base(f)), b, 0o644); err != nil {
			return "", TLCOutcome{}, err
		}
	}
	args := []string{"-XX:+UseParallelGC", "-cp", jar, "tlc2.TLC", "-workers", "1", "-metadir", filepath.Join(tmp, "meta")}
	var file string
	switch dump {
	case dumpStates:
		file = filepath.Join(tmp, "states.dump")
		args = append(args, "-dump", file)
	case dumpGraph:
		file = filepath.Join(tmp, "graph.dot") // TLC adds .dot to a name without it
		args = append(args, "-dump", "dot,actionlabels", file)
	}
	args = append(args, "-config", filepath.Base(cfgPath), Module+".tla")
	cmd := exec.CommandContext(ctx, "java", args...)
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "is violated") {
		return "", TLCOutcome{}, fmt.Errorf("TLC: %v\n%s", err, tail(string(out), 20))
	}
	return file, ParseTLCOutput(string(out)), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// safetyCfg is the cfg's text for a run that dumps the state graph: the
// liveness properties the model does not check (Config.Unchecked) left
// out and LiveSpec read as Spec (its fairness does not change which
// states and transitions there are; TLC's liveness checking, with the
// graph dumped, took 68 s of the liveness cfg's 90).
func safetyCfg(text []byte, path string) ([]byte, error) {
	c, err := ParseConfig(path, string(text))
	if err != nil {
		return nil, err
	}
	drop := c.Unchecked()
	if len(drop) == 0 && c.Specification != livenessSpecification {
		return text, nil
	}
	var out []string
	for _, line := range strings.Split(string(text), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "SPECIFICATION" && f[1] == livenessSpecification:
			line = "SPECIFICATION " + defaultSpecification
		case len(f) == 1 && slices.Contains(drop, f[0]):
			continue
		case len(f) == 2 && (f[0] == "PROPERTY" || f[0] == "PROPERTIES") && slices.Contains(drop, f[1]):
			continue
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\n")), nil
}
