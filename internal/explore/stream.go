package explore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/itf"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// ThreadInfo is what a pass over a Go trace's lines learns of one thread
// (Add, line by line) for a Follower to draw and follow it in a second
// pass without holding its lines: its lanes, the spec model's bounds, how
// many lines it has and its last.
type ThreadInfo struct {
	Name  string
	Lanes []string // the processes (and the poster) in the order they first appear
	Lines int      // the thread's lines
	Last  int      // the number of its last line

	procs                 []string // the processes of its lines other than Post
	maxMsgs, claims, asks int
}

// Add counts line n of the thread.
func (ti *ThreadInfo) Add(n int, ev *core.TraceEvent) {
	if ti.Lines == 0 {
		ti.Name = strings.Clone(string(ev.Thread))
	}
	ti.Lines++
	ti.Last = n
	if ti.lane(ev.Proc) < 0 {
		ti.Lanes = append(ti.Lanes, strings.Clone(ev.Proc))
	}
	switch ev.Action {
	case core.ActionPost:
		ti.maxMsgs = max(ti.maxMsgs, int(ev.Msg))
		return
	case core.ActionClaim:
		ti.claims++
	case core.ActionAsk:
		ti.asks++
	}
	if !slices.Contains(ti.procs, ev.Proc) {
		ti.procs = append(ti.procs, strings.Clone(ev.Proc))
	}
}

// lane is proc's lane, -1 for none (a thread has a few).
func (ti *ThreadInfo) lane(proc string) int { return slices.Index(ti.Lanes, proc) }

// Follower draws one thread's lines and follows them through the spec
// model as they come, one at a time in the thread's order (the lines
// themselves are not kept): the text's cells and the explorer's steps of
// the lines asked for, each with the spec's state after it. Its memory is
// the model's state and the thread's holders, not its lines.
type Follower struct {
	info    *ThreadInfo
	v       *tracecheck.Violation
	holder  map[core.Holder]string
	Holders []string // "h1 = <holder> (proc)", the claims so far
	lease   core.Holder
	f       *follow
	first   bool // no line taken yet
	stopped bool // the spec has no state past here
	// Lapsed says a step returned was an inferred Lapse: the thread's
	// lanes need LapseLane.
	Lapsed bool
	// Stateless leaves the steps Line returns without their states (a
	// timeline in text needs none): only the model's own state is kept.
	Stateless bool
}

// NewFollower starts following the thread info describes; v is the Go
// trace checker's violation, nil when it accepted the trace.
func NewFollower(info *ThreadInfo, v *tracecheck.Violation) *Follower {
	procs := slices.Sorted(slices.Values(info.procs))
	// The steering record as the Go code guards it: refused once its run
	// is abandoned, not fenced. A longer thread than the model's bytes
	// hold is followed up to the bound: the steps past it have no state.
	cfg := specmodel.Config{Fences: core.AllFences(), RefuseSteerAbandoned: true, Procs: procs,
		MaxMsgs: min(info.maxMsgs, maxBound), MaxClaims: min(info.claims, maxBound), MaxAsks: min(info.asks, maxBound)}
	f := &follow{m: specmodel.New(cfg), procs: map[string]int{}}
	for i, p := range cfg.Procs {
		f.procs[p] = i
	}
	f.s = f.m.Init()
	return &Follower{info: info, v: v, holder: map[core.Holder]string{}, f: f, first: true}
}

// Lanes are the thread's lanes, with LapseLane when a step returned was
// an inferred Lapse.
func (fl *Follower) Lanes() []string {
	if fl.Lapsed {
		return append(append([]string{}, fl.info.Lanes...), LapseLane)
	}
	return fl.info.Lanes
}

// name is a holder's name on the timeline (h1, h2, ... in claim order).
func (fl *Follower) name(h core.Holder) string {
	if h == "" {
		return "none"
	}
	if n, ok := fl.holder[h]; ok {
		return n
	}
	return "?" + string(h)
}

// cell draws line n, naming a claim's holder.
func (fl *Follower) cell(n int, ev *core.TraceEvent) Cell {
	c := Cell{N: n, Tick: ev.Tick, Lane: fl.info.lane(ev.Proc), Class: "plain"}
	info, _ := core.Info(ev.Action)
	switch {
	case ev.Action == core.ActionClaim:
		h := fmt.Sprintf("h%d", len(fl.holder)+1)
		fl.holder[core.Holder(strings.Clone(string(ev.Holder)))] = h
		fl.Holders = append(fl.Holders, fmt.Sprintf("%s = %s (%s)", h, ev.Holder, ev.Proc))
		c.Text = "Claim " + h
		if fl.lease != "" {
			c.Text = fmt.Sprintf("Claim %s ⚡ %s lapsed", h, fl.name(fl.lease))
			c.Class = "lapse"
		}
	default:
		c.Text = CellText(*ev, info, fl.name)
		switch {
		case info.Consumes:
			c.Class = "consume"
		case info.Refuses != "" || ev.Action == core.ActionCrash:
			c.Class = "refuse"
		}
	}
	if info.WritesLease && info.Line != core.LineNone && !ev.Read || info.Fenced && !ev.Read {
		fl.lease = core.Holder(strings.Clone(string(ev.Lease)))
	}
	if fl.v != nil && fl.v.Event.Thread == ev.Thread && fl.v.Line == n {
		c.Bad = fl.v.Rule
	}
	return c
}

// Line takes the thread's next line, numbered n. With keep it returns
// the line's cell and its steps: Init before the thread's first line, an
// inferred Lapse before a Claim that needs one, and the line's own, each
// with the spec's state after it (none past a line the spec does not
// explain). Without keep it only follows the line: the states of the
// lines not kept are never built.
func (fl *Follower) Line(n int, ev *core.TraceEvent, keep bool) (Cell, []Step) {
	c, steps := fl.line(n, ev, keep)
	if !keep {
		return c, nil
	}
	return c, steps
}

func (fl *Follower) line(n int, ev *core.TraceEvent, keep bool) (Cell, []Step) {
	c := fl.cell(n, ev)
	var steps []Step
	var state map[string]itf.Value
	states := keep && !fl.Stateless
	if states {
		state = fl.f.values()
	}
	if keep && fl.first {
		steps = append(steps, Step{Action: "Init", Lane: -1, Text: "Init", Class: "plain", State: state, spec: fl.spec(states)})
	}
	fl.first = false
	step := Step{Line: n, Tick: ev.Tick, Action: string(ev.Action), Proc: ev.Proc, Lane: c.Lane, Text: c.Text, Class: c.Class}
	if ev.Action == core.ActionPost {
		step.Proc = ""
	}
	rejected := fl.v != nil && fl.v.Event.Thread == ev.Thread && fl.v.Line == n
	if rejected {
		step.Rejected = rejection(fl.v)
	}
	if fl.stopped {
		return c, append(steps, step)
	}
	if fl.f.lapseBefore(ev) {
		if !fl.f.do(specmodel.Step{Action: core.ActionLapse, P: -1}) {
			fl.stopped = true
			return c, append(steps, step)
		}
		if keep {
			var after map[string]itf.Value
			if states {
				after = fl.f.values()
			}
			steps = append(steps, Step{Action: string(core.ActionLapse), Lane: len(fl.info.Lanes), Text: "Lapse (inferred)",
				Class: "lapse", Inferred: true, State: after, Changed: changed(state, after), spec: fl.spec(states)})
			state = after
			fl.Lapsed = true
		}
	}
	if rejected && fl.v.Kind != tracecheck.ErrInvariant || !fl.f.do(fl.f.step(ev)) {
		// The spec has no state after a line it does not explain.
		fl.stopped = true
		return c, append(steps, step)
	}
	if states {
		after := fl.f.values()
		step.State, step.Changed, step.spec = after, changed(state, after), fl.spec(true)
	}
	fl.stopped = rejected
	return c, append(steps, step)
}

// spec is a copy of the model's state for a step that keeps its state
// (what CheckITF checks a written state against), nil for one that does
// not.
func (fl *Follower) spec(states bool) *specmodel.State {
	if !states {
		return nil
	}
	return fl.f.spec()
}
