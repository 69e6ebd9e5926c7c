package specmodel

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/threadclaim/threadclaim/core"
)

// PC is a process's pc.
type PC uint8

// The values of pc[p].
const (
	Idle PC = iota
	Claimed
	Planned
	Running
	Steered
)

var pcNames = [...]string{core.PCIdle, core.PCClaimed, core.PCPlanned, core.PCRunning, core.PCSteered}

func (p PC) String() string { return pcNames[p] }

// RunState is runs[r].state.
type RunState uint8

// The values of runs[r].state.
const (
	Active RunState = iota
	Ended
	Abandoned
)

var runStateNames = [...]string{string(core.StateActive), string(core.StateEnded), string(core.StateAbandoned)}

func (r RunState) String() string { return runStateNames[r] }

// ReqState is reqs[q].state.
type ReqState uint8

// The values of reqs[q].state.
const (
	Open ReqState = iota
	Answered
)

var reqStateNames = [...]string{string(core.RequestOpen), string(core.RequestAnswered)}

func (r ReqState) String() string { return reqStateNames[r] }

// PlanKind is plan[p].kind.
type PlanKind uint8

// The values of plan[p].kind.
const (
	PlanNone PlanKind = iota
	PlanRun
	PlanReply
	PlanSteer
)

var planKindNames = [...]string{core.PlanKindNone, core.PlanKindRun, core.PlanKindReply, core.PlanKindSteer}

func (k PlanKind) String() string { return planKindNames[k] }

// Lease is the spec's lease: its holder (0 for none) and whether it expired.
type Lease struct {
	Holder  uint8
	Expired bool
}

// Run is one element of runs.
type Run struct {
	Holder uint8
	Prompt uint8
	State  RunState
}

// Req is one element of reqs.
type Req struct {
	Run    uint8
	State  ReqState
	Answer uint8
}

// Pair is an element <<run, msg>> of steered: steering given to a run and
// not recorded.
type Pair struct {
	Run uint8
	Msg uint8
}

// Plan is plan[p].
type Plan struct {
	Kind PlanKind
	Msg  uint8
	Req  uint8
}

// Proc holds one process's variables: pc[p], hold[p], plan[p], run[p].
type Proc struct {
	PC   PC
	Hold uint8
	Plan Plan
	Run  uint8
}

// State is a state of the spec: every variable. Procs is indexed as
// Config.Procs; Consumed[m-1] is consumed[m], Given[m-1] given[m]; Steered
// is the set steered, sorted (by run, then message). Values are small (the
// cfg's bounds are at most 200), so they are bytes.
type State struct {
	Msgs          uint8
	Taken         uint8
	Lease         Lease
	Runs          []Run
	Reqs          []Req
	Consumed      []uint8
	LiveAbandoned bool
	Given         []uint8
	Steered       []Pair
	Procs         []Proc
	NextHolder    uint8
}

// Clone returns a deep copy.
func (s *State) Clone() State {
	c := *s
	// One allocation for the three short slices that every action may
	// change; runs and reqs grow by append, so they get their own.
	c.Runs = append(make([]Run, 0, len(s.Runs)+1), s.Runs...)
	c.Reqs = append(make([]Req, 0, len(s.Reqs)+1), s.Reqs...)
	buf := make([]uint8, len(s.Consumed)+len(s.Given))
	copy(buf, s.Consumed)
	copy(buf[len(s.Consumed):], s.Given)
	c.Consumed = buf[:len(s.Consumed):len(s.Consumed)]
	c.Given = buf[len(s.Consumed):]
	c.Steered = append(make([]Pair, 0, len(s.Steered)+1), s.Steered...)
	c.Procs = append([]Proc(nil), s.Procs...)
	return c
}

// cloneInto copies s into d, reusing d's slices.
func (s *State) cloneInto(d *State) {
	runs, reqs, cons, procs := d.Runs[:0], d.Reqs[:0], d.Consumed[:0], d.Procs[:0]
	given, steered := d.Given[:0], d.Steered[:0]
	*d = *s
	d.Runs = append(runs, s.Runs...)
	d.Reqs = append(reqs, s.Reqs...)
	d.Consumed = append(cons, s.Consumed...)
	d.Given = append(given, s.Given...)
	d.Steered = append(steered, s.Steered...)
	d.Procs = append(procs, s.Procs...)
}

// AppendKey appends the state's canonical encoding to b: one byte per
// value, the sequences prefixed by their length. Two states are equal, as
// TLC compares them, exactly when their keys are; the key is what the
// explorer hashes.
func (s *State) AppendKey(b []byte) []byte {
	b = append(b, s.Msgs, s.Taken, s.Lease.Holder, bit(s.Lease.Expired), uint8(len(s.Runs)))
	for _, r := range s.Runs {
		b = append(b, r.Holder, r.Prompt, uint8(r.State))
	}
	b = append(b, uint8(len(s.Reqs)))
	for _, q := range s.Reqs {
		b = append(b, q.Run, uint8(q.State), q.Answer)
	}
	b = append(b, s.Consumed...)
	b = append(b, bit(s.LiveAbandoned))
	b = append(b, s.Given...)
	b = append(b, uint8(len(s.Steered)))
	for _, x := range s.Steered {
		b = append(b, x.Run, x.Msg)
	}
	for _, p := range s.Procs {
		b = append(b, uint8(p.PC), p.Hold, uint8(p.Plan.Kind), p.Plan.Msg, p.Plan.Req, p.Run)
	}
	return append(b, s.NextHolder)
}

// Key returns the canonical encoding as a string.
func (s *State) Key() string { return string(s.AppendKey(nil)) }

// Equal reports whether s and t are the same state.
func (s *State) Equal(t *State) bool { return s.Key() == t.Key() }

func bit(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func tlaBool(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

// String renders the state compactly on one line, for messages.
func (s *State) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "msgs=%d taken=%d lease=", s.Msgs, s.Taken)
	if s.Lease.Holder == 0 {
		b.WriteString("none")
	} else {
		fmt.Fprintf(&b, "h%d", s.Lease.Holder)
		if s.Lease.Expired {
			b.WriteString("(expired)")
		}
	}
	b.WriteString(" runs=[")
	for i, r := range s.Runs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:h%d/m%d/%s", i+1, r.Holder, r.Prompt, r.State)
	}
	b.WriteString("] reqs=[")
	for i, q := range s.Reqs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:r%d/%s", i+1, q.Run, q.State)
		if q.State == Answered {
			fmt.Fprintf(&b, "/m%d", q.Answer)
		}
	}
	fmt.Fprintf(&b, "] consumed=%v", s.Consumed)
	if s.LiveAbandoned {
		b.WriteString(" liveAbandoned")
	}
	fmt.Fprintf(&b, " given=%v", s.Given)
	if len(s.Steered) > 0 {
		b.WriteString(" steered={")
		for i, x := range s.Steered {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "r%d/m%d", x.Run, x.Msg)
		}
		b.WriteString("}")
	}
	for i, p := range s.Procs {
		fmt.Fprintf(&b, " p%d:%s", i+1, p.PC)
		if p.Hold != 0 {
			fmt.Fprintf(&b, "/h%d", p.Hold)
		}
		if p.Plan.Kind != PlanNone {
			fmt.Fprintf(&b, "/plan=%s(m%d", p.Plan.Kind, p.Plan.Msg)
			if p.Plan.Kind == PlanReply {
				fmt.Fprintf(&b, ",q%d", p.Plan.Req)
			}
			b.WriteString(")")
		}
		if p.Run != 0 {
			fmt.Fprintf(&b, "/run=%d", p.Run)
		}
	}
	fmt.Fprintf(&b, " nextHolder=%d", s.NextHolder)
	return b.String()
}

// TLA renders the state as TLC prints one: a conjunction of `var = value`,
// one variable a line, in the module's order of VARIABLES. procs names the
// processes (Config.Procs).
func (s *State) TLA(procs []string) string {
	var b strings.Builder
	line := func(name, v string) { fmt.Fprintf(&b, "/\\ %s = %s\n", name, v) }
	line("msgs", strconv.Itoa(int(s.Msgs)))
	line("taken", strconv.Itoa(int(s.Taken)))
	line("lease", fmt.Sprintf("[holder |-> %d, expired |-> %s]", s.Lease.Holder, tlaBool(s.Lease.Expired)))
	var parts []string
	for _, r := range s.Runs {
		parts = append(parts, fmt.Sprintf("[holder |-> %d, prompt |-> %d, state |-> %q]", r.Holder, r.Prompt, r.State.String()))
	}
	line("runs", "<<"+strings.Join(parts, ", ")+">>")
	parts = parts[:0]
	for _, q := range s.Reqs {
		parts = append(parts, fmt.Sprintf("[run |-> %d, state |-> %q, answer |-> %d]", q.Run, q.State.String(), q.Answer))
	}
	line("reqs", "<<"+strings.Join(parts, ", ")+">>")
	parts = parts[:0]
	for _, n := range s.Consumed {
		parts = append(parts, strconv.Itoa(int(n)))
	}
	line("consumed", "<<"+strings.Join(parts, ", ")+">>")
	line("liveAbandoned", tlaBool(s.LiveAbandoned))
	parts = parts[:0]
	for _, n := range s.Given {
		parts = append(parts, strconv.Itoa(int(n)))
	}
	line("given", "<<"+strings.Join(parts, ", ")+">>")
	parts = parts[:0]
	for _, x := range s.Steered {
		parts = append(parts, fmt.Sprintf("<<%d, %d>>", x.Run, x.Msg))
	}
	line("steered", "{"+strings.Join(parts, ", ")+"}")
	fn := func(f func(p Proc) string) string {
		var ps []string
		for i, p := range s.Procs {
			ps = append(ps, fmt.Sprintf("%q :> %s", procs[i], f(p)))
		}
		return "(" + strings.Join(ps, " @@ ") + ")"
	}
	line("pc", fn(func(p Proc) string { return strconv.Quote(p.PC.String()) }))
	line("hold", fn(func(p Proc) string { return strconv.Itoa(int(p.Hold)) }))
	line("plan", fn(func(p Proc) string {
		return fmt.Sprintf("[kind |-> %q, msg |-> %d, req |-> %d]", p.Plan.Kind.String(), p.Plan.Msg, p.Plan.Req)
	}))
	line("run", fn(func(p Proc) string { return strconv.Itoa(int(p.Run)) }))
	line("nextHolder", strconv.Itoa(int(s.NextHolder)))
	return b.String()
}
