// Package explore turns a trace — a Go execution's trace lines, or a TLC
// counterexample (-dumpTrace json) — into the steps a spec reviewer reads:
// one step per line (or per TLC state), each with the spec's state after
// it, the variables it changed, the lapses the checker inferred, and for a
// rejected line the guard that failed in the spec's words. WriteHTML draws
// it as a self-contained page (lanes per process, the state of any line
// selected, the action's TLA+ text); package itf exports the same states.
//
// For a Go trace the state is a fold of the lines over the spec's
// variables, one thread at a time, up to the line the Go trace checker
// rejects (package tracecheck decides; this package only applies). When
// package specmodel lands, its state and its named conjuncts can replace
// the fold.
package explore

import (
	"fmt"
	"sort"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/itf"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Vars are the spec's variables (spec/ThreadClaimLapse.tla), in its
// order: the store's, then the processes'.
var Vars = []string{"msgs", "taken", "lease", "runs", "reqs", "consumed", "liveAbandoned", "pc", "hold", "plan", "run", "nextHolder"}

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
}

// Thread is one thread's steps (a TLC counterexample has one).
type Thread struct {
	Name    string
	Lanes   []string // the processes (and the poster), then LapseLane when a Lapse appears
	Holders []string // "h1 = <holder> (proc)", for Go traces
	Steps   []Step
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
	t := Trace{Title: file, Source: SourceGo, File: file, Verdict: "accepted by the Go trace checker"}
	if v != nil {
		t.Verdict = fmt.Sprintf("rejected at line %d: %s %s", v.Line, v.Action, v.Rule)
	}
	for _, th := range tracecheck.Order(lines) {
		t.Threads = append(t.Threads, goThread(th, v))
	}
	return t
}

func goThread(th tracecheck.ThreadLines, v *tracecheck.Violation) Thread {
	view := BuildView(th, v)
	out := Thread{Name: string(th.Thread), Lanes: view.Lanes, Holders: view.Holders}
	f := newFold(th)
	state := f.values()
	out.Steps = append(out.Steps, Step{Action: "Init", Lane: -1, Text: "Init", Class: "plain", State: state})
	stopped := false
	for i, l := range th.Lines {
		c := view.Cells[i]
		step := Step{Line: l.N, Tick: l.Ev.Tick, Action: string(l.Ev.Action), Proc: l.Ev.Proc, Lane: c.Lane, Text: c.Text, Class: c.Class}
		if l.Ev.Action == core.ActionPost {
			step.Proc = ""
		}
		rejected := v != nil && v.Event.Thread == th.Thread && v.Line == l.N
		if rejected {
			step.Rejected = rejection(v)
		}
		if stopped {
			out.Steps = append(out.Steps, step)
			continue
		}
		if f.lapseBefore(l.Ev) {
			f.lease.expired = true
			after := f.values()
			out.Steps = append(out.Steps, Step{Action: string(core.ActionLapse), Lane: len(view.Lanes), Text: "Lapse (inferred)",
				Class: "lapse", Inferred: true, State: after, Changed: changed(state, after)})
			state = after
		}
		if rejected && v.Kind != tracecheck.ErrInvariant {
			// The spec has no state after a line it does not explain.
			stopped = true
			out.Steps = append(out.Steps, step)
			continue
		}
		f.apply(l.Ev)
		after := f.values()
		step.State, step.Changed = after, changed(state, after)
		state = after
		stopped = rejected
		out.Steps = append(out.Steps, step)
	}
	for _, s := range out.Steps {
		if s.Inferred {
			out.Lanes = append(out.Lanes, LapseLane)
			break
		}
	}
	return out
}

func rejection(v *tracecheck.Violation) *Rejection {
	kind := map[error]string{tracecheck.ErrGuard: "guard", tracecheck.ErrLineValue: "value",
		tracecheck.ErrOrder: "order", tracecheck.ErrInvariant: "invariant"}[v.Kind]
	return &Rejection{Kind: kind, Rule: v.Rule, Failed: v.Failed, Detail: v.Detail, State: v.State}
}

// fold is the spec's state of one thread, built from its lines.
type fold struct {
	msgs, taken int64
	lease       struct {
		holder  int
		expired bool
	}
	runs []struct {
		holder int
		prompt int64
		state  string
	}
	reqs []struct {
		run    int64
		state  string
		answer int64
	}
	consumed      []int64
	liveAbandoned bool
	procs         []string
	pc            map[string]string
	hold          map[string]int
	plan          map[string][3]int64 // kind (0 none, 1 run, 2 reply), msg, req
	run           map[string]int64
	holders       map[core.Holder]int
}

var planKinds = [...]string{"none", core.PlanKindRun, core.PlanKindReply}

func newFold(th tracecheck.ThreadLines) *fold {
	f := &fold{pc: map[string]string{}, hold: map[string]int{}, plan: map[string][3]int64{}, run: map[string]int64{},
		holders: map[core.Holder]int{}}
	seen := map[string]bool{}
	var msgs int64
	for _, l := range th.Lines {
		if l.Ev.Action == core.ActionPost {
			msgs = max(msgs, int64(l.Ev.Msg))
			continue
		}
		if !seen[l.Ev.Proc] {
			seen[l.Ev.Proc] = true
			f.procs = append(f.procs, l.Ev.Proc)
			f.pc[l.Ev.Proc] = "idle"
		}
	}
	sort.Strings(f.procs)
	f.consumed = make([]int64, msgs)
	return f
}

// lapseBefore says whether the checker infers a Lapse before ev: a Claim
// of a lease someone holds.
func (f *fold) lapseBefore(ev *core.TraceEvent) bool {
	return ev.Action == core.ActionClaim && f.lease.holder != 0 && !f.lease.expired
}

func (f *fold) hasLease(p string) bool { return f.hold[p] != 0 && f.lease.holder == f.hold[p] }

// apply takes the line's action, as the spec defines it.
func (f *fold) apply(ev *core.TraceEvent) {
	p := ev.Proc
	consume := func(m int64) {
		f.taken = m
		if m >= 1 && m <= int64(len(f.consumed)) {
			f.consumed[m-1]++
		}
	}
	idle := func() { f.pc[p], f.hold[p], f.plan[p] = "idle", 0, [3]int64{} }
	switch ev.Action {
	case core.ActionPost:
		f.msgs++
	case core.ActionClaim:
		h := len(f.holders) + 1
		f.holders[ev.Holder] = h
		f.lease.holder, f.lease.expired = h, false
		f.hold[p], f.pc[p] = h, "claimed"
	case core.ActionRenew:
		f.lease.expired = false
	case core.ActionRelease:
		if f.hasLease(p) {
			f.lease.holder, f.lease.expired = 0, false
		}
		f.pc[p], f.hold[p] = "idle", 0
	case core.ActionAbandon:
		if r := int64(ev.Run); r >= 1 && r <= int64(len(f.runs)) {
			f.runs[r-1].state = "abandoned"
			f.liveAbandoned = f.liveAbandoned || f.lease.holder == f.runs[r-1].holder
		}
	case core.ActionAbandonFenced:
		f.pc[p], f.hold[p] = "idle", 0
	case core.ActionPlan:
		kind := int64(1)
		if ev.Kind == core.PlanKindReply {
			kind = 2
		}
		f.plan[p] = [3]int64{kind, int64(ev.Msg), int64(ev.Req)}
		f.pc[p] = "planned"
	case core.ActionRunStart:
		m := f.plan[p][1]
		f.runs = append(f.runs, struct {
			holder int
			prompt int64
			state  string
		}{f.hold[p], m, "active"})
		consume(m)
		f.run[p] = int64(len(f.runs))
		f.pc[p], f.plan[p] = "running", [3]int64{}
	case core.ActionReply:
		pl := f.plan[p]
		if q := pl[2]; q >= 1 && q <= int64(len(f.reqs)) {
			f.reqs[q-1].state, f.reqs[q-1].answer = "answered", pl[1]
		}
		consume(pl[1])
		f.pc[p], f.plan[p] = "claimed", [3]int64{}
	case core.ActionStartFenced, core.ActionReplyFenced:
		idle()
	case core.ActionAsk:
		f.reqs = append(f.reqs, struct {
			run    int64
			state  string
			answer int64
		}{f.run[p], "open", 0})
	case core.ActionRunEnd:
		if r := f.run[p]; r >= 1 && r <= int64(len(f.runs)) {
			f.runs[r-1].state = "ended"
		}
		f.pc[p], f.run[p] = "claimed", 0
	case core.ActionEndRefused:
		idle()
		f.run[p] = 0
	case core.ActionCrash:
		idle()
		f.run[p] = 0
	}
}

// values returns the state as the spec's variables.
func (f *fold) values() map[string]itf.Value {
	i := itf.Int
	rec := func(names string, vals ...itf.Value) itf.Value { return itf.Rec(strings.Split(names, " "), vals) }
	var runs, reqs, consumed []itf.Value
	for _, r := range f.runs {
		runs = append(runs, rec("holder prompt state", i(int64(r.holder)), i(r.prompt), itf.Str(r.state)))
	}
	for _, q := range f.reqs {
		reqs = append(reqs, rec("run state answer", i(q.run), itf.Str(q.state), i(q.answer)))
	}
	for _, n := range f.consumed {
		consumed = append(consumed, i(n))
	}
	perProc := func(val func(p string) itf.Value) itf.Value {
		keys := make([]itf.Value, len(f.procs))
		vals := make([]itf.Value, len(f.procs))
		for j, p := range f.procs {
			keys[j], vals[j] = itf.Str(p), val(p)
		}
		return itf.Map(keys, vals)
	}
	return map[string]itf.Value{
		"msgs":          i(f.msgs),
		"taken":         i(f.taken),
		"lease":         rec("holder expired", i(int64(f.lease.holder)), itf.Bool(f.lease.expired)),
		"runs":          itf.Seq(runs...),
		"reqs":          itf.Seq(reqs...),
		"consumed":      itf.Seq(consumed...),
		"liveAbandoned": itf.Bool(f.liveAbandoned),
		"pc":            perProc(func(p string) itf.Value { return itf.Str(f.pc[p]) }),
		"hold":          perProc(func(p string) itf.Value { return i(int64(f.hold[p])) }),
		"plan": perProc(func(p string) itf.Value {
			pl := f.plan[p]
			return rec("kind msg req", itf.Str(planKinds[pl[0]]), i(pl[1]), i(pl[2]))
		}),
		"run":        perProc(func(p string) itf.Value { return i(f.run[p]) }),
		"nextHolder": i(int64(len(f.holders) + 1)),
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
