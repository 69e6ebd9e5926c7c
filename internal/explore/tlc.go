package explore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/itf"
	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// ErrTLC: a file is not a TLC counterexample as -dumpTrace json writes it.
var ErrTLC = errors.New("not a TLC counterexample")

// tlcDump is TLC's -dumpTrace json output: the states in order, and for
// each step the action's name and parameters between two states.
type tlcDump struct {
	Counterexample *struct {
		State  [][2]json.RawMessage `json:"state"`
		Action [][3]json.RawMessage `json:"action"`
	} `json:"counterexample"`
	Vars []string `json:"vars"`
}

type tlcAction struct {
	Name    string         `json:"name"`
	Context map[string]any `json:"context"`
	Loc     map[string]any `json:"location"`
	Params  []string       `json:"parameters"`
}

// IsTLC reports whether data looks like a TLC counterexample (a JSON
// object with a "counterexample" field), not an ndjson trace.
func IsTLC(data []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(data, &probe) != nil {
		return false
	}
	_, ok := probe["counterexample"]
	return ok
}

// ReadTLC reads a TLC counterexample (-dumpTrace json FILE) of
// spec/ThreadClaimLapse.tla. The last state is checked for the
// invariants the unfenced cfgs break, and marked with those it violates.
func ReadTLC(r io.Reader, name string) (Trace, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Trace{}, err
	}
	var d tlcDump
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return Trace{}, fmt.Errorf("%w: %s: %v", ErrTLC, name, err)
	}
	if d.Counterexample == nil || len(d.Counterexample.State) == 0 {
		return Trace{}, fmt.Errorf("%w: %s: no counterexample states", ErrTLC, name)
	}
	for _, v := range Vars {
		if !contains(d.Vars, v) {
			return Trace{}, fmt.Errorf("%w: %s: no variable %s: not a trace of spec/ThreadClaimLapse.tla", ErrTLC, name, v)
		}
	}
	t := Trace{Title: name, Source: SourceTLC, File: name}
	th := Thread{Name: "model"}
	var states []map[string]itf.Value
	for i, raw := range d.Counterexample.State {
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw[1]))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil {
			return Trace{}, fmt.Errorf("%w: %s: state %d: %v", ErrTLC, name, i+1, err)
		}
		st := map[string]itf.Value{}
		for _, v := range Vars {
			x, ok := obj[v]
			if !ok {
				return Trace{}, fmt.Errorf("%w: %s: state %d has no %s", ErrTLC, name, i+1, v)
			}
			val, err := tlcValue(x, isProcVar(v))
			if err != nil {
				return Trace{}, fmt.Errorf("%w: %s: state %d: %s: %v", ErrTLC, name, i+1, v, err)
			}
			if v == "steered" {
				val = pairSet(val)
			}
			st[v] = val
		}
		states = append(states, st)
	}
	procs := []string{}
	if pc, ok := states[0]["pc"]; ok {
		for _, k := range pc.Keys {
			procs = append(procs, k.Str)
		}
	}
	th.Lanes = append(procs, "(env)")
	lane := func(p string) int {
		for i, q := range procs {
			if q == p {
				return i
			}
		}
		return len(procs)
	}
	th.Steps = append(th.Steps, Step{Line: 1, Action: "Init", Lane: -1, Text: "Init", Class: "plain", State: states[0]})
	for i, raw := range d.Counterexample.Action {
		var a tlcAction
		if err := json.Unmarshal(raw[1], &a); err != nil {
			return Trace{}, fmt.Errorf("%w: %s: action %d: %v", ErrTLC, name, i+1, err)
		}
		if i+1 >= len(states) {
			return Trace{}, fmt.Errorf("%w: %s: more actions than states", ErrTLC, name)
		}
		p, _ := a.Context["p"].(string)
		before, after := states[i], states[i+1]
		s := Step{Line: i + 2, Action: a.Name, Proc: p, Lane: lane(p), State: after, Changed: changed(before, after)}
		s.Text, s.Class = tlcCell(s, a, before, after)
		th.Steps = append(th.Steps, s)
	}
	last := &th.Steps[len(th.Steps)-1]
	if broken := violated(last.State); len(broken) > 0 {
		last.Rejected = &Rejection{Kind: "invariant", Rule: broken[0], Failed: broken,
			Detail: "the counterexample's last state violates it"}
		t.Verdict = fmt.Sprintf("invariant %s violated in state %d", broken[0], last.Line)
	} else {
		t.Verdict = fmt.Sprintf("%d states; no invariant this view knows is violated in the last", len(states))
	}
	t.Threads = []Thread{th}
	t.Constants, t.ConstantsFrom = tlcConstants(th, procs), "read from the states: TLC's counterexample does not name its cfg"
	return t, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tlcCell says what the step did, for its lane: the run or request it
// made, the message it consumed, the holder it claimed with.
func tlcCell(s Step, a tlcAction, before, after map[string]itf.Value) (string, string) {
	num := func(v itf.Value, path ...string) int64 {
		for _, p := range path {
			v, _ = v.Field(p)
		}
		return v.Int
	}
	info, _ := core.Info(core.Action(a.Name))
	text, class := a.Name, "plain"
	switch {
	case info.Consumes:
		class = "consume"
	case info.Refuses != "" || a.Name == string(core.ActionCrash):
		class = "refuse"
	}
	switch core.Action(a.Name) {
	case core.ActionPost:
		text = fmt.Sprintf("Post m%d", after["msgs"].Int)
	case core.ActionClaim:
		text = fmt.Sprintf("Claim h%d", num(after["hold"], s.Proc))
	case core.ActionLapse:
		text, class = fmt.Sprintf("Lapse h%d", num(before["lease"], "holder")), "lapse"
	case core.ActionPlan:
		pl, _ := after["plan"].Field(s.Proc)
		kind, _ := pl.Field("kind")
		text = fmt.Sprintf("Plan %s m%d", kind.Str, num(pl, "msg"))
	case core.ActionRunStart:
		text = fmt.Sprintf("RunStart r%d ← m%d", num(after["run"], s.Proc), after["taken"].Int)
	case core.ActionReply:
		pl, _ := before["plan"].Field(s.Proc)
		text = fmt.Sprintf("Reply q%d ← m%d", num(pl, "req"), num(pl, "msg"))
	case core.ActionSteer:
		pl, _ := after["plan"].Field(s.Proc)
		text = fmt.Sprintf("Steer r%d given m%d", num(after["run"], s.Proc), num(pl, "msg")) // given to the run's agent, not consumed: as CellText
	case core.ActionSteerRecord:
		pl, _ := before["plan"].Field(s.Proc)
		text = fmt.Sprintf("SteerRecord r%d ← m%d", num(before["run"], s.Proc), num(pl, "msg"))
	case core.ActionAbandon:
		if r, ok := a.Context["r"].(float64); ok {
			text = fmt.Sprintf("Abandon r%d", int(r))
		}
	}
	return text, class
}

// pairSet turns TLC's JSON of the set steered (an array of arrays) into a
// set of tuples, as Values writes it.
func pairSet(v itf.Value) itf.Value {
	elems := make([]itf.Value, len(v.Elems))
	for i, e := range v.Elems {
		elems[i] = itf.Tup(e.Elems...)
	}
	return itf.Set(elems...)
}

// violated lists the invariants of spec/ThreadClaimLapse.tla that a state
// breaks: I1_ConsumedAtMostOnce, I3_OneActiveRun, NoLiveAbandon,
// SteeringException, and GivenAtMostOnce (which the reachability cfg
// negates).
func violated(st map[string]itf.Value) []string {
	var out []string
	for _, n := range st["consumed"].Elems {
		if n.Int > 1 {
			out = append(out, core.InvConsumedAtMostOnce)
			break
		}
	}
	active := 0
	for _, r := range st["runs"].Elems {
		if s, _ := r.Field("state"); s.Str == "active" {
			active++
		}
	}
	if active > 1 {
		out = append(out, core.InvOneActiveRun)
	}
	if st["liveAbandoned"].Bool {
		out = append(out, core.InvNoLiveAbandon)
	}
	if !steeringException(st) {
		out = append(out, core.InvSteeringException)
	}
	for _, n := range st["given"].Elems {
		if n.Int > 1 {
			out = append(out, specmodel.InvGivenAtMostOnce)
			break
		}
	}
	return out
}

// steeringException is the spec's SteeringException in a state's values.
func steeringException(st map[string]itf.Value) bool {
	consumed, runs := st["consumed"].Elems, st["runs"].Elems
	for m, g := range st["given"].Elems {
		n := int64(0)
		if m < len(consumed) {
			n = consumed[m].Int
		}
		for _, x := range st["steered"].Elems {
			if len(x.Elems) == 2 && x.Elems[1].Int == int64(m+1) {
				n++
			}
		}
		if g.Int != n {
			return false
		}
	}
	for _, x := range st["steered"].Elems {
		if len(x.Elems) != 2 || x.Elems[0].Int < 1 || x.Elems[0].Int > int64(len(runs)) {
			return false
		}
		state, _ := runs[x.Elems[0].Int-1].Field("state")
		switch state.Str {
		case string(core.StateEnded):
			return false
		case string(core.StateActive):
			if x.Elems[1].Int != st["taken"].Int+1 {
				return false
			}
		}
	}
	return true
}

// tlcValue converts TLC's JSON of a value: numbers, strings, booleans;
// arrays are sequences (TLC writes a function of 1..n, a sequence, as an
// array); objects are records, or functions of the process when fn (pc,
// hold, plan, run); objects of TLC's own set form are not expected here.
func tlcValue(x any, fn bool) (itf.Value, error) {
	switch v := x.(type) {
	case json.Number:
		n, err := v.Int64()
		if err != nil {
			return itf.Value{}, fmt.Errorf("%s is not an integer", v)
		}
		return itf.Int(n), nil
	case string:
		return itf.Str(v), nil
	case bool:
		return itf.Bool(v), nil
	case []any:
		elems := make([]itf.Value, len(v))
		for i, e := range v {
			val, err := tlcValue(e, false)
			if err != nil {
				return itf.Value{}, err
			}
			elems[i] = val
		}
		return itf.Seq(elems...), nil
	case map[string]any:
		names := make([]string, 0, len(v))
		for k := range v {
			names = append(names, k)
		}
		sort.Strings(names)
		if !fn {
			names = recordOrder(names)
		}
		vals := make([]itf.Value, len(names))
		for i, k := range names {
			val, err := tlcValue(v[k], false)
			if err != nil {
				return itf.Value{}, err
			}
			vals[i] = val
		}
		if fn {
			keys := make([]itf.Value, len(names))
			for i, k := range names {
				keys[i] = itf.Str(k)
			}
			return itf.Map(keys, vals), nil
		}
		return itf.Rec(names, vals), nil
	}
	return itf.Value{}, fmt.Errorf("unexpected %T", x)
}

// recordOrder puts a record's fields in the order the spec writes them
// (and the Go fold gives), so that the same state prints the same way from
// both sources.
func recordOrder(names []string) []string {
	order := strings.Split("holder prompt run kind msg req state answer expired", " ")
	rank := func(n string) int {
		for i, o := range order {
			if o == n {
				return i
			}
		}
		return len(order)
	}
	sort.SliceStable(names, func(i, j int) bool { return rank(names[i]) < rank(names[j]) })
	return names
}

// Constant is one of the spec's constants as a page shows it: its name,
// its value in TLA+, and why the value is known when it was read from the
// states rather than a cfg.
type Constant struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Why   string `json:"why,omitempty"`
}

// fences are the spec's fence constants and the actions they guard.
var fences = []struct{ constant, action string }{
	{"FenceStart", string(core.ActionRunStart)},
	{"FenceReply", string(core.ActionReply)},
	{"FenceAbandon", string(core.ActionAbandon)},
}

// tlcConstants reads from a counterexample's states what they show of the
// constants: Procs (pc's domain), and each fence that a step proves off —
// its action taken by a process that did not hold the lease (HasLease(p)
// false in the state before), which the fence's conjunct forbids. A fence
// no step proves off is "unknown": the states cannot tell it on.
func tlcConstants(th Thread, procs []string) []Constant {
	quoted := make([]string, len(procs))
	for i, p := range procs {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	out := []Constant{{Name: "Procs", Value: "{" + strings.Join(quoted, ", ") + "}"}}
	for _, f := range fences {
		c := Constant{Name: f.constant, Value: "unknown", Why: "no " + f.action + " without the lease in these states"}
		for i := 1; i < len(th.Steps); i++ {
			s, before := th.Steps[i], th.Steps[i-1].State
			if s.Action != f.action || s.Proc == "" || hasLease(before, s.Proc) {
				continue
			}
			c.Value, c.Why = "FALSE", fmt.Sprintf("state %d: %s by %s without the lease", s.Line, f.action, s.Proc)
			break
		}
		out = append(out, c)
	}
	return out
}

// hasLease is the spec's HasLease(p): hold[p] # 0 /\ lease.holder = hold[p].
func hasLease(st map[string]itf.Value, p string) bool {
	h, _ := st["hold"].Field(p)
	l, _ := st["lease"].Field("holder")
	return h.Int != 0 && l.Int == h.Int
}

// CfgConstants are the constants of a cfg as specmodel.ParseConfig reads
// them, in the spec's order.
func CfgConstants(c specmodel.Config) []Constant {
	quoted := make([]string, len(c.Procs))
	for i, p := range c.Procs {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	b := func(on bool) string {
		if on {
			return "TRUE"
		}
		return "FALSE"
	}
	return []Constant{
		{Name: "Procs", Value: "{" + strings.Join(quoted, ", ") + "}"},
		{Name: "MaxMsgs", Value: fmt.Sprint(c.MaxMsgs)},
		{Name: "MaxClaims", Value: fmt.Sprint(c.MaxClaims)},
		{Name: "MaxAsks", Value: fmt.Sprint(c.MaxAsks)},
		{Name: "FenceStart", Value: b(c.Fences.Start)},
		{Name: "FenceReply", Value: b(c.Fences.Reply)},
		{Name: "FenceAbandon", Value: b(c.Fences.Abandon)},
		{Name: "FenceSteer", Value: b(c.FenceSteer)},
		{Name: "RefuseSteerAbandoned", Value: b(c.RefuseSteerAbandoned)},
		{Name: "ClaimTakesLive", Value: b(c.ClaimTakesLive)},
	}
}

// UseCfg sets t's constants to a cfg's (CfgConstants'), read from path.
// A fence the cfg turns on that a step of the counterexample proves off is
// marked: the counterexample is not one of that cfg.
func UseCfg(t *Trace, path string, cfg []Constant) {
	seen := map[string]Constant{}
	for _, c := range t.Constants {
		seen[c.Name] = c
	}
	out := make([]Constant, len(cfg))
	for i, c := range cfg {
		if s, ok := seen[c.Name]; ok && s.Value == "FALSE" && c.Value != "FALSE" {
			c.Why = "but " + s.Why + ": not a counterexample of this cfg?"
		}
		out[i] = c
	}
	t.Constants, t.ConstantsFrom = out, path
}
