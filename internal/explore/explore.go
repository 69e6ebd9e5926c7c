// Package explore turns a trace — a Go execution's trace lines, or a TLC
// counterexample (-dumpTrace json) — into the steps a spec reviewer reads:
// one step per line (or per TLC state), each with the spec's state after
// it, the variables it changed, the lapses the checker inferred, and for a
// rejected line the guard that failed in the spec's words. WriteHTML draws
// it as a self-contained page (lanes per process, the state of any line
// selected, the action's TLA+ text); package itf exports the same states.
//
// For a Go trace the state is the spec model's (package specmodel): each
// thread's lines are followed through it from Init, a Lapse inferred
// before a Claim that needs one, up to the line the Go trace checker
// rejects.
package explore

import (
	"fmt"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/itf"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Vars are the spec's variables (spec/ThreadClaimLapse.tla), in its
// order: the store's, then the processes'.
var Vars = []string{"msgs", "taken", "lease", "runs", "reqs", "consumed", "liveAbandoned", "given", "steered", "pc", "hold", "plan", "run", "nextHolder"}

// ProcVars are the variables that are functions of the process.
var ProcVars = []string{"pc", "hold", "plan", "run"}

// LapseLane is the lane of the Lapse steps, which no process takes.
const LapseLane = "(time)"

// Sources of a Trace.
const (
	SourceGo  = "Go trace"
	SourceTLC = "TLC counterexample"
)

// Trace is a trace ready to explore: one or more threads' steps.
type Trace struct {
	Title   string
	Source  string // SourceGo or SourceTLC
	File    string
	Verdict string // "accepted", or what failed
	Threads []Thread
	// Porcupine is the path of the execution's porcupine visualisation,
	// "" when there is none.
	Porcupine string
	// SpecFrom says where the page's TLA+ text came from (LoadSpec's from).
	SpecFrom string
	// Constants are a TLC counterexample's constants, as far as they are
	// known (ReadTLC reads them from the states; UseCfg from a cfg), and
	// ConstantsFrom says from where.
	Constants     []Constant
	ConstantsFrom string
	// Paged, when the page holds a part of the trace's lines, says which
	// and how to get the rest; "" when it holds them all.
	Paged string
}

// Thread is one thread's steps (a TLC counterexample has one).
type Thread struct {
	Name    string
	Lanes   []string // the processes (and the poster), then LapseLane when a Lapse appears
	Holders []string // "h1 = <holder> (proc)", for Go traces
	Steps   []Step
	procs   []string // the spec model's processes, in its order (Go traces)
}

// Step is one line of a Go trace (or an inferred Lapse, or Init), or one
// state of a TLC counterexample.
type Step struct {
	Line     int    // the trace line's number; for TLC the state's index; 0 for Init and inferred steps
	Tick     uint64 // Go: the line's tick
	Action   string // the spec's action; "Init" for the first state
	Proc     string // the process that took it, "" for Post, Lapse and Init
	Lane     int    // the lane it is drawn in; -1 for Init
	Text     string // what the lane's cell says
	Class    string // consume, refuse, lapse, plain
	Inferred bool   // a Lapse the checker inferred: never written
	// State is the spec's state after the step, one value per Vars; nil
	// after a rejected line (the spec has no state there).
	State   map[string]itf.Value
	Changed []string // the variables the step changed ("pc[p1]" for a process's)
	// spec is the spec model's state that State was made from (Go
	// traces): what CheckITF checks a written state against.
	spec *specmodel.State
	// Rejected is set on the line no spec action explains, or after
	// which an invariant fails.
	Rejected *Rejection
}

// Rejection is why a line is not a step of the spec.
type Rejection struct {
	Kind   string   // guard, value, order, invariant
	Rule   string   // the failing conjunct in the spec's words, or the invariant, or the line's field
	Failed []string // every failing conjunct or invariant, Rule first
	Detail string
	State  string // the checker's dump of the state it judged in
}

// Label names the step as the spec would: Claim(p1), Post, Lapse.
func (s Step) Label() string {
	if s.Proc == "" {
		return s.Action
	}
	return fmt.Sprintf("%s(%s)", s.Action, s.Proc)
}

// changed lists the variables whose values differ between two states,
// a process variable per process ("pc[p1]").
func changed(before, after map[string]itf.Value) []string {
	if before == nil || after == nil {
		return nil
	}
	var out []string
	for _, name := range Vars {
		a, b := before[name], after[name]
		if isProcVar(name) && a.Kind == itf.KindMap && b.Kind == itf.KindMap {
			for i, k := range b.Keys {
				old, _ := a.Field(k.Str)
				if old.TLA() != b.Elems[i].TLA() {
					out = append(out, fmt.Sprintf("%s[%s]", name, k.Str))
				}
			}
			continue
		}
		if a.TLA() != b.TLA() {
			out = append(out, name)
		}
	}
	return out
}

func isProcVar(name string) bool {
	for _, v := range ProcVars {
		if v == name {
			return true
		}
	}
	return false
}

// FromGo builds the explorer's trace of a Go trace: lines as Read gives
// them, v the Go trace checker's violation (nil when it accepted them).
func FromGo(file string, lines []core.TraceEvent, v *tracecheck.Violation) Trace {
	t := Trace{Title: file, Source: SourceGo, File: file, Verdict: GoVerdict(v)}
	for _, th := range tracecheck.Order(lines) {
		t.Threads = append(t.Threads, goThread(th, v))
	}
	return t
}

// GoVerdict is a Go trace's verdict on the page: v is the Go trace
// checker's violation, nil when it accepted the trace.
func GoVerdict(v *tracecheck.Violation) string {
	if v == nil {
		return "accepted by the Go trace checker"
	}
	return fmt.Sprintf("rejected at line %d: %s %s", v.Line, v.Action, v.Rule)
}

func goThread(th tracecheck.ThreadLines, v *tracecheck.Violation) Thread {
	fl := NewFollower(threadInfo(th), v)
	var steps []Step
	for _, l := range th.Lines {
		_, st := fl.Line(l.N, l.Ev, true)
		steps = append(steps, st...)
	}
	return Thread{Name: string(th.Thread), Lanes: fl.Lanes(), Holders: fl.Holders, Steps: steps, procs: fl.f.m.Config().Procs}
}

// threadInfo is a thread's ThreadInfo from its lines.
func threadInfo(th tracecheck.ThreadLines) *ThreadInfo {
	info := &ThreadInfo{}
	for _, l := range th.Lines {
		info.Add(l.N, l.Ev)
	}
	return info
}

func rejection(v *tracecheck.Violation) *Rejection {
	kind := map[error]string{tracecheck.ErrGuard: "guard", tracecheck.ErrLineValue: "value",
		tracecheck.ErrOrder: "order", tracecheck.ErrInvariant: "invariant"}[v.Kind]
	return &Rejection{Kind: kind, Rule: v.Rule, Failed: v.Failed, Detail: v.Detail, State: v.State}
}

// follow walks one thread's lines through the spec model (specmodel),
// with the fences on (and the steering record's guard the Go code's), as the Go trace checker judges them: a model whose
// bounds are the thread's own (its messages, claims and asks), its
// processes the thread's.
type follow struct {
	m     *specmodel.Model
	s     specmodel.State
	procs map[string]int
}

// maxBound is the largest bound specmodel holds (its values are bytes).
const maxBound = 200

// step is the model's step for a line.
func (f *follow) step(ev *core.TraceEvent) specmodel.Step {
	st := specmodel.Step{Action: ev.Action, P: -1}
	if ev.Action != core.ActionPost {
		st.P = f.procs[ev.Proc]
	}
	if ev.Action == core.ActionAbandon {
		st.R = int(ev.Run)
	}
	return st
}

// lapseBefore says whether the checker infers a Lapse before ev: a Claim
// of a lease someone holds.
func (f *follow) lapseBefore(ev *core.TraceEvent) bool {
	return ev.Action == core.ActionClaim && f.s.Lease.Holder != 0 && !f.s.Lease.Expired
}

// do takes the step; false when the model refuses it (or has no such
// step: an abandoned run past the model's bound).
func (f *follow) do(st specmodel.Step) bool {
	if st.Action == core.ActionAbandon && (st.R < 1 || st.R > f.m.Config().MaxRuns()) {
		return false
	}
	out := f.m.Do(&f.s, st)
	if out.Enabled {
		f.s = out.Next
	}
	return out.Enabled
}

// spec returns a copy of the model's state.
func (f *follow) spec() *specmodel.State {
	s := f.s.Clone()
	return &s
}

// values returns the model's state as the spec's variables.
func (f *follow) values() map[string]itf.Value { return Values(f.m.Config().Procs, &f.s) }

// Values returns a spec state as the spec's variables, as TLC writes them.
func Values(procs []string, s *specmodel.State) map[string]itf.Value {
	i := func(n uint8) itf.Value { return itf.Int(int64(n)) }
	rec := func(names string, vals ...itf.Value) itf.Value { return itf.Rec(strings.Split(names, " "), vals) }
	var runs, reqs, consumed, given, steered []itf.Value
	for _, r := range s.Runs {
		runs = append(runs, rec("holder prompt state", i(r.Holder), i(r.Prompt), itf.Str(r.State.String())))
	}
	for _, q := range s.Reqs {
		reqs = append(reqs, rec("run state answer", i(q.Run), itf.Str(q.State.String()), i(q.Answer)))
	}
	for _, n := range s.Consumed {
		consumed = append(consumed, i(n))
	}
	for _, n := range s.Given {
		given = append(given, i(n))
	}
	for _, x := range s.Steered {
		steered = append(steered, itf.Tup(i(x.Run), i(x.Msg)))
	}
	perProc := func(val func(p specmodel.Proc) itf.Value) itf.Value {
		keys := make([]itf.Value, len(procs))
		vals := make([]itf.Value, len(procs))
		for j, p := range procs {
			keys[j], vals[j] = itf.Str(p), val(s.Procs[j])
		}
		return itf.Map(keys, vals)
	}
	return map[string]itf.Value{
		"msgs":          i(s.Msgs),
		"taken":         i(s.Taken),
		"lease":         rec("holder expired", i(s.Lease.Holder), itf.Bool(s.Lease.Expired)),
		"runs":          itf.Seq(runs...),
		"reqs":          itf.Seq(reqs...),
		"consumed":      itf.Seq(consumed...),
		"liveAbandoned": itf.Bool(s.LiveAbandoned),
		"given":         itf.Seq(given...),
		"steered":       itf.Set(steered...),
		"pc":            perProc(func(p specmodel.Proc) itf.Value { return itf.Str(p.PC.String()) }),
		"hold":          perProc(func(p specmodel.Proc) itf.Value { return i(p.Hold) }),
		"plan": perProc(func(p specmodel.Proc) itf.Value {
			return rec("kind msg req", itf.Str(p.Plan.Kind.String()), i(p.Plan.Msg), i(p.Plan.Req))
		}),
		"run":        perProc(func(p specmodel.Proc) itf.Value { return i(p.Run) }),
		"nextHolder": i(s.NextHolder),
	}
}

// ITF returns the thread's states (the spec's states: Init, each line's,
// inferred Lapses; not past a rejected line) as an ITF trace.
func (t Trace) ITF(thread int) itf.Trace {
	th := t.Threads[thread]
	out := itf.Trace{
		Meta: map[string]any{
			"format":             "ITF",
			"format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
			"source":             t.File,
			"description":        fmt.Sprintf("%s, thread %s, as states of spec/ThreadClaimLapse.tla; written by tracecheck export", t.Source, th.Name),
		},
		Vars: Vars,
	}
	for _, s := range th.Steps {
		if s.State == nil {
			break
		}
		meta := map[string]any{"action": s.Label()}
		if s.Line > 0 {
			meta["line"] = s.Line
		}
		if s.Inferred {
			meta["inferred"] = true
		}
		out.States = append(out.States, itf.State{Meta: meta, Values: s.State})
	}
	return out
}
