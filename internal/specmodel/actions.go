package specmodel

import (
	"fmt"
	"slices"

	"github.com/threadclaim/threadclaim/core"
)

// Step is one instance of an action of Next: the action and its
// parameters. P is the process's index in Config.Procs (-1 for Post and
// Lapse); R is Abandon's run (0 for the others).
type Step struct {
	Action core.Action
	P      int
	R      int
}

// Outcome is what an action does in a state: enabled with its successor,
// or not, naming the first conjunct of the action's definition that is
// false there, in the spec's words (such as `Fenced => HasLease(p)`).
type Outcome struct {
	Enabled bool
	Next    State  // the successor, when Enabled
	Failed  string // the first false conjunct, when not Enabled
}

func refused(conjunct string) Outcome { return Outcome{Failed: conjunct} }

// Model is the spec's state machine for one cfg's constants.
type Model struct {
	cfg   Config
	steps []Step
	// the fences' conjuncts, named as the cfg's constants are
	cStart, cReply, cStartOn, cReplyOn string
	takeover                           bool // check NoLiveTakeover
	// scratch, when set, is where actions build successors, reusing its
	// slices: Explore's private copy of the model uses it, so that a
	// successor costs no allocation until it is found new.
	scratch *State
}

func (m *Model) clone(s *State) State {
	if m.scratch == nil {
		return s.Clone()
	}
	s.cloneInto(m.scratch)
	return *m.scratch
}

// New returns the model of cfg.
func New(cfg Config) *Model {
	m := &Model{cfg: cfg, cStart: cFenceStart, cReply: cFenceReply, cStartOn: cFenceStartOn, cReplyOn: cFenceReplyOn,
		takeover: cfg.checks(core.PropNoLiveTakeover)}
	if cfg.OneFenced {
		m.cStart, m.cReply, m.cStartOn, m.cReplyOn = cFenced, cFenced, cFencedOn, cFencedOn
	}
	// Next's order: the actions of no process, then each process's
	// (ProcNext), each in the action table's order.
	table := core.ActionTable()
	for _, info := range table {
		if !info.ByProcess {
			m.steps = append(m.steps, Step{info.Action, -1, 0})
		}
	}
	for p := range cfg.Procs {
		for _, info := range table {
			switch {
			case !info.ByProcess:
			case info.Action == core.ActionAbandon: // \E r \in 1..MaxRuns
				for r := 1; r <= cfg.MaxRuns(); r++ {
					m.steps = append(m.steps, Step{core.ActionAbandon, p, r})
				}
			default:
				m.steps = append(m.steps, Step{info.Action, p, 0})
			}
		}
	}
	return m
}

// Config returns the model's constants.
func (m *Model) Config() Config { return m.cfg }

// Steps returns every action instance of Next, in the order the spec's
// Next lists them: Post, Lapse, then each process's actions (Abandon once
// per run 1..MaxRuns).
func (m *Model) Steps() []Step { return m.steps }

// Describe renders the step as the spec writes it: Post, Claim(p1),
// Abandon(p1, 2).
func (m *Model) Describe(st Step) string {
	switch {
	case st.P < 0:
		return string(st.Action)
	case st.Action == core.ActionAbandon:
		return fmt.Sprintf("%s(%s, %d)", st.Action, m.cfg.Procs[st.P], st.R)
	default:
		return fmt.Sprintf("%s(%s)", st.Action, m.cfg.Procs[st.P])
	}
}

// Init returns the initial state.
func (m *Model) Init() State {
	return State{
		Consumed:   make([]uint8, m.cfg.MaxMsgs),
		Given:      make([]uint8, m.cfg.MaxMsgs),
		Procs:      make([]Proc, len(m.cfg.Procs)),
		NextHolder: 1,
	}
}

// Do takes the step in s. It panics on a step no action has (an unknown
// action name or a process out of range): that is a caller's bug.
func (m *Model) Do(s *State, st Step) Outcome {
	if st.P >= len(m.cfg.Procs) || (st.P < 0 && st.Action != core.ActionPost && st.Action != core.ActionLapse) {
		panic(fmt.Sprintf("specmodel: no step %s with process %d", st.Action, st.P))
	}
	switch st.Action {
	case core.ActionPost:
		return m.Post(s)
	case core.ActionLapse:
		return m.Lapse(s)
	case core.ActionClaim:
		return m.Claim(s, st.P)
	case core.ActionRenew:
		return m.Renew(s, st.P)
	case core.ActionRelease:
		return m.Release(s, st.P)
	case core.ActionAbandon:
		return m.Abandon(s, st.P, st.R)
	case core.ActionAbandonFenced:
		return m.AbandonFenced(s, st.P)
	case core.ActionPlan:
		return m.Plan(s, st.P)
	case core.ActionRunStart:
		return m.RunStart(s, st.P)
	case core.ActionStartFenced:
		return m.StartFenced(s, st.P)
	case core.ActionReply:
		return m.Reply(s, st.P)
	case core.ActionReplyFenced:
		return m.ReplyFenced(s, st.P)
	case core.ActionAsk:
		return m.Ask(s, st.P)
	case core.ActionRunEnd:
		return m.RunEnd(s, st.P)
	case core.ActionEndRefused:
		return m.EndRefused(s, st.P)
	case core.ActionSteer:
		return m.Steer(s, st.P)
	case core.ActionSteerRecord:
		return m.SteerRecord(s, st.P)
	case core.ActionSteerRefused:
		return m.SteerRefused(s, st.P)
	case core.ActionCrash:
		return m.Crash(s, st.P)
	}
	panic(fmt.Sprintf("specmodel: unknown action %q", st.Action))
}

// TraceLine is the trace line (tracecheck/doc.go's format) that the Go
// code writes for the step taken in state s, whose version (the count of
// writes so far) is version. For a step the spec does not enable in s, it
// is the line Go would write if it took the step anyway, from the values
// in s (such as the next run's id, the process's planned message): a trace
// checker must refuse it. Lapse has no line; TraceLine panics on it.
func (m *Model) TraceLine(s *State, st Step, version uint64) core.TraceEvent {
	if st.Action == core.ActionLapse {
		panic("specmodel: Lapse is never traced")
	}
	ev := core.TraceEvent{Action: st.Action, Thread: TraceThread, Taken: core.Seq(s.Taken)}
	if IsWrite(s, st) {
		ev.Tick = version + 1
	} else {
		ev.Tick, ev.Read = version, true
	}
	if st.P < 0 {
		ev.Proc = "poster"
	} else {
		ev.Proc = m.cfg.Procs[st.P]
		ev.Holder = HolderName(s.Procs[st.P].Hold)
	}
	var pr Proc
	if st.P >= 0 {
		pr = s.Procs[st.P]
	}
	lease := HolderName(s.Lease.Holder)
	planMsg := pr.Plan.Msg
	if planMsg == 0 {
		planMsg = s.Taken + 1
	}
	switch st.Action {
	case core.ActionPost:
		ev.Msg = core.Seq(s.Msgs + 1)
	case core.ActionClaim:
		ev.Holder = HolderName(s.NextHolder)
		ev.Lease = ev.Holder
	case core.ActionRenew:
		ev.Lease = ev.Holder // core writes the renewed lease's holder, p's
	case core.ActionRelease:
		ev.Lease = lease
		if HasLease(s, st.P) {
			ev.Lease = ""
		}
	case core.ActionAbandon:
		ev.Run = core.RunID(st.R)
		ev.Lease = lease
	case core.ActionAbandonFenced:
		ev.Lease = lease
		for i, r := range s.Runs {
			if r.State == Active && r.Holder != pr.Hold {
				ev.Run = core.RunID(i + 1)
				break
			}
		}
	case core.ActionPlan:
		ev.Msg = core.Seq(s.Taken + 1)
		ev.Kind = core.PlanKindRun
		if q := OldestOpen(s); q != 0 {
			ev.Kind, ev.Req = core.PlanKindReply, core.RequestID(q)
		}
	case core.ActionRunStart:
		ev.Msg, ev.Run, ev.Taken, ev.Lease = core.Seq(planMsg), core.RunID(len(s.Runs)+1), core.Seq(planMsg), lease
	case core.ActionStartFenced:
		ev.Msg, ev.Lease = core.Seq(planMsg), lease
	case core.ActionReply:
		ev.Msg, ev.Req, ev.Taken, ev.Lease = core.Seq(planMsg), core.RequestID(pr.Plan.Req), core.Seq(planMsg), lease
		if ev.Req == 0 {
			ev.Req = core.RequestID(OldestOpen(s))
		}
	case core.ActionReplyFenced:
		ev.Msg, ev.Req, ev.Lease = core.Seq(planMsg), core.RequestID(pr.Plan.Req), lease
	case core.ActionAsk:
		ev.Run, ev.Req = core.RunID(pr.Run), core.RequestID(len(s.Reqs)+1)
	case core.ActionRunEnd, core.ActionEndRefused:
		ev.Run = core.RunID(pr.Run)
	case core.ActionSteer:
		ev.Msg, ev.Run = core.Seq(s.Taken+1), core.RunID(pr.Run)
	case core.ActionSteerRecord:
		ev.Msg, ev.Run, ev.Taken = core.Seq(planMsg), core.RunID(pr.Run), core.Seq(planMsg)
	case core.ActionSteerRefused:
		ev.Msg, ev.Run = core.Seq(planMsg), core.RunID(pr.Run)
	}
	return ev
}

// HasLease is the spec's HasLease(p).
func HasLease(s *State, p int) bool {
	return s.Procs[p].Hold != 0 && s.Lease.Holder == s.Procs[p].Hold
}

// The conjuncts, as the spec writes them.
const (
	cPCIdle       = `pc[p] = "idle"`
	cPCNotIdle    = `pc[p] # "idle"`
	cPCClaimed    = `pc[p] = "claimed"`
	cPCPlanned    = `pc[p] = "planned"`
	cPCRunning    = `pc[p] = "running"`
	cPCSteered    = `pc[p] = "steered"`
	cHasLease     = `HasLease(p)`
	cNotHasLease  = `~HasLease(p)`
	cFenced       = `Fenced => HasLease(p)`
	cFencedOn     = `Fenced`
	cFenceStart   = `FenceStart => HasLease(p)`
	cFenceStartOn = `FenceStart`
	cFenceReply   = `FenceReply => HasLease(p)`
	cFenceReplyOn = `FenceReply`
	cFenceAbandon = `FenceAbandon => HasLease(p)`
	cFenceAbandOn = `FenceAbandon`
	cPlanRun      = `plan[p].kind = "run"`
	cPlanReply    = `plan[p].kind = "reply"`
	cRunActive    = `runs[run[p]].state = "active"`
	cRunAbandoned = `runs[run[p]].state = "abandoned"`
	cReqOpen      = `reqs[plan[p].req].state = "open"`
	cMsgsBound    = `msgs < MaxMsgs`
	cClaimsBound  = `nextHolder <= MaxClaims`
	cLeaseFree    = `~ClaimTakesLive => (lease.holder = 0 \/ lease.expired)`
	cLeaseHeld    = `lease.holder # 0`
	cLeaseLive    = `~lease.expired`
	cRunID        = `r \in RunIds`
	cRIsActive    = `runs[r].state = "active"`
	cRNotOwn      = `runs[r].holder # hold[p]`
	cNoActiveRuns = `ActiveRuns = {}`
	cUnconsumed   = `taken < msgs`
	cAsksBound    = `Len(reqs) < MaxAsks`
	cNoOpenReqs   = `OpenReqs = {}`
	cRecordActive = `RefuseSteerAbandoned => runs[run[p]].state = "active"`
	cFenceSteer   = `FenceSteer => HasLease(p)`
	// SteerRefused's disjunction, and its first disjunct alone: with
	// FenceSteer FALSE (the Go code's) the second cannot hold, and the
	// trace checker names the first.
	cRecordRefuse   = `\/ RefuseSteerAbandoned /\ runs[run[p]].state # "active" \/ FenceSteer /\ ~HasLease(p)`
	cRecordRefused1 = `RefuseSteerAbandoned /\ runs[run[p]].state # "active"`
)

var noPlan = Plan{}

// Post: someone posts a message.
func (m *Model) Post(s *State) Outcome {
	if !(int(s.Msgs) < m.cfg.MaxMsgs) {
		return refused(cMsgsBound)
	}
	n := m.clone(s)
	n.Msgs++
	return Outcome{Enabled: true, Next: n}
}

// Lapse: the lease expires; its holder is not told.
func (m *Model) Lapse(s *State) Outcome {
	switch {
	case s.Lease.Holder == 0:
		return refused(cLeaseHeld)
	case s.Lease.Expired:
		return refused(cLeaseLive)
	}
	n := m.clone(s)
	n.Lease.Expired = true
	return Outcome{Enabled: true, Next: n}
}

// Claim(p): p takes a free or expired lease under a fresh holder (any
// lease with ClaimTakesLive).
func (m *Model) Claim(s *State, p int) Outcome {
	switch {
	case s.Procs[p].PC != Idle:
		return refused(cPCIdle)
	case !(int(s.NextHolder) <= m.cfg.MaxClaims):
		return refused(cClaimsBound)
	case !m.cfg.ClaimTakesLive && !(s.Lease.Holder == 0 || s.Lease.Expired):
		return refused(cLeaseFree)
	}
	n := m.clone(s)
	n.Lease = Lease{Holder: s.NextHolder}
	n.Procs[p].Hold = s.NextHolder
	n.Procs[p].PC = Claimed
	n.NextHolder++
	return Outcome{Enabled: true, Next: n}
}

// Renew(p): p's renewal timer extends its lease.
func (m *Model) Renew(s *State, p int) Outcome {
	switch {
	case s.Procs[p].PC == Idle:
		return refused(cPCNotIdle)
	case !HasLease(s, p):
		return refused(cHasLease)
	}
	n := m.clone(s)
	n.Lease.Expired = false
	return Outcome{Enabled: true, Next: n}
}

// Release(p): p ends its claim; the lease is cleared only if still p's.
func (m *Model) Release(s *State, p int) Outcome {
	if s.Procs[p].PC != Claimed {
		return refused(cPCClaimed)
	}
	n := m.clone(s)
	if HasLease(s, p) {
		n.Lease = Lease{}
	}
	n.Procs[p].PC = Idle
	n.Procs[p].Hold = 0
	return Outcome{Enabled: true, Next: n}
}

// Abandon(p, r): p abandons an active run that an earlier claim started.
func (m *Model) Abandon(s *State, p, r int) Outcome {
	switch {
	case s.Procs[p].PC != Claimed:
		return refused(cPCClaimed)
	case r < 1 || r > len(s.Runs):
		return refused(cRunID)
	case s.Runs[r-1].State != Active:
		return refused(cRIsActive)
	case s.Runs[r-1].Holder == s.Procs[p].Hold:
		return refused(cRNotOwn)
	case m.cfg.Fences.Abandon && !HasLease(s, p):
		return refused(cFenceAbandon)
	}
	n := m.clone(s)
	n.Runs[r-1].State = Abandoned
	n.LiveAbandoned = s.LiveAbandoned || s.Lease.Holder == s.Runs[r-1].Holder
	return Outcome{Enabled: true, Next: n}
}

// AbandonFenced(p): the fence refuses p's abandon; p's round is over.
func (m *Model) AbandonFenced(s *State, p int) Outcome {
	switch {
	case s.Procs[p].PC != Claimed:
		return refused(cPCClaimed)
	case !m.cfg.Fences.Abandon:
		return refused(cFenceAbandOn)
	case HasLease(s, p):
		return refused(cNotHasLease)
	}
	n := m.clone(s)
	n.Procs[p].PC = Idle
	n.Procs[p].Hold = 0
	return Outcome{Enabled: true, Next: n}
}

// ActiveRuns reports whether some run is active (ActiveRuns # {}), and how
// many are.
func ActiveRuns(s *State) int {
	k := 0
	for _, r := range s.Runs {
		if r.State == Active {
			k++
		}
	}
	return k
}

// OldestOpen returns Min(OpenReqs), 0 when no request is open.
func OldestOpen(s *State) int {
	for i, q := range s.Reqs {
		if q.State == Open {
			return i + 1
		}
	}
	return 0
}

// Plan(p): p reads the thread and decides its next write.
func (m *Model) Plan(s *State, p int) Outcome {
	switch {
	case s.Procs[p].PC != Claimed:
		return refused(cPCClaimed)
	case ActiveRuns(s) != 0:
		return refused(cNoActiveRuns)
	case !(s.Taken < s.Msgs):
		return refused(cUnconsumed)
	}
	n := m.clone(s)
	if q := OldestOpen(s); q != 0 {
		n.Procs[p].Plan = Plan{Kind: PlanReply, Msg: s.Taken + 1, Req: uint8(q)}
	} else {
		n.Procs[p].Plan = Plan{Kind: PlanRun, Msg: s.Taken + 1}
	}
	n.Procs[p].PC = Planned
	return Outcome{Enabled: true, Next: n}
}

// RunStart(p): p records the start of the planned run; its prompt is
// consumed.
func (m *Model) RunStart(s *State, p int) Outcome {
	pr := s.Procs[p]
	switch {
	case pr.PC != Planned:
		return refused(cPCPlanned)
	case pr.Plan.Kind != PlanRun:
		return refused(cPlanRun)
	case m.cfg.Fences.Start && !HasLease(s, p):
		return refused(m.cStart)
	}
	n := m.clone(s)
	n.Runs = append(n.Runs, Run{Holder: pr.Hold, Prompt: pr.Plan.Msg, State: Active})
	n.Taken = pr.Plan.Msg
	n.Consumed[pr.Plan.Msg-1]++
	n.Given[pr.Plan.Msg-1]++
	n.Procs[p].Run = uint8(len(s.Runs) + 1)
	n.Procs[p].PC = Running
	n.Procs[p].Plan = noPlan
	return Outcome{Enabled: true, Next: n}
}

// StartFenced(p): the fence refuses p's start; p's round is over.
func (m *Model) StartFenced(s *State, p int) Outcome {
	return m.fenced(s, p, PlanRun, cPlanRun, m.cStartOn, m.cfg.Fences.Start)
}

// ReplyFenced(p): the fence refuses p's answer; p's round is over.
func (m *Model) ReplyFenced(s *State, p int) Outcome {
	return m.fenced(s, p, PlanReply, cPlanReply, m.cReplyOn, m.cfg.Fences.Reply)
}

func (m *Model) fenced(s *State, p int, kind PlanKind, kindConjunct, onConjunct string, on bool) Outcome {
	switch {
	case s.Procs[p].PC != Planned:
		return refused(cPCPlanned)
	case s.Procs[p].Plan.Kind != kind:
		return refused(kindConjunct)
	case !on:
		return refused(onConjunct)
	case HasLease(s, p):
		return refused(cNotHasLease)
	}
	n := m.clone(s)
	n.Procs[p].PC = Idle
	n.Procs[p].Hold = 0
	n.Procs[p].Plan = noPlan
	return Outcome{Enabled: true, Next: n}
}

// Reply(p): p answers the planned request with the planned message, which
// is consumed.
func (m *Model) Reply(s *State, p int) Outcome {
	pr := s.Procs[p]
	switch {
	case pr.PC != Planned:
		return refused(cPCPlanned)
	case pr.Plan.Kind != PlanReply:
		return refused(cPlanReply)
	case m.cfg.Fences.Reply && !HasLease(s, p):
		return refused(m.cReply)
	case s.Reqs[pr.Plan.Req-1].State != Open:
		return refused(cReqOpen)
	}
	n := m.clone(s)
	n.Reqs[pr.Plan.Req-1].State = Answered
	n.Reqs[pr.Plan.Req-1].Answer = pr.Plan.Msg
	n.Taken = pr.Plan.Msg
	n.Consumed[pr.Plan.Msg-1]++
	n.Given[pr.Plan.Msg-1]++
	n.Procs[p].PC = Claimed
	n.Procs[p].Plan = noPlan
	return Outcome{Enabled: true, Next: n}
}

// Ask(p): p's running run opens a request.
func (m *Model) Ask(s *State, p int) Outcome {
	pr := s.Procs[p]
	switch {
	case pr.PC != Running:
		return refused(cPCRunning)
	case s.Runs[pr.Run-1].State != Active:
		return refused(cRunActive)
	case !(len(s.Reqs) < m.cfg.MaxAsks):
		return refused(cAsksBound)
	}
	n := m.clone(s)
	n.Reqs = append(n.Reqs, Req{Run: pr.Run, State: Open})
	return Outcome{Enabled: true, Next: n}
}

// RunEnd(p): p records the end of its run.
func (m *Model) RunEnd(s *State, p int) Outcome {
	pr := s.Procs[p]
	switch {
	case pr.PC != Running:
		return refused(cPCRunning)
	case s.Runs[pr.Run-1].State != Active:
		return refused(cRunActive)
	}
	n := m.clone(s)
	n.Runs[pr.Run-1].State = Ended
	n.Procs[p].PC = Claimed
	n.Procs[p].Run = 0
	return Outcome{Enabled: true, Next: n}
}

// EndRefused(p): storage refuses the end of p's run, which was abandoned.
func (m *Model) EndRefused(s *State, p int) Outcome {
	pr := s.Procs[p]
	switch {
	case pr.PC != Running:
		return refused(cPCRunning)
	case s.Runs[pr.Run-1].State != Abandoned:
		return refused(cRunAbandoned)
	}
	n := m.clone(s)
	n.Procs[p].PC = Idle
	n.Procs[p].Hold = 0
	n.Procs[p].Run = 0
	return Outcome{Enabled: true, Next: n}
}

// Steer(p): p's active run is given the next unconsumed message as
// steering, while no request is open. A read.
func (m *Model) Steer(s *State, p int) Outcome {
	pr := s.Procs[p]
	switch {
	case pr.PC != Running:
		return refused(cPCRunning)
	case s.Runs[pr.Run-1].State != Active:
		return refused(cRunActive)
	case OldestOpen(s) != 0:
		return refused(cNoOpenReqs)
	case !(s.Taken < s.Msgs):
		return refused(cUnconsumed)
	}
	n := m.clone(s)
	msg := s.Taken + 1
	n.Given[msg-1]++
	n.Steered = addPair(n.Steered, Pair{Run: pr.Run, Msg: msg})
	n.Procs[p].Plan = Plan{Kind: PlanSteer, Msg: msg}
	n.Procs[p].PC = Steered
	return Outcome{Enabled: true, Next: n}
}

// SteerRecord(p): p records the steering its run was given; the message
// is consumed. Not fenced (unless FenceSteer); refused once the run is
// abandoned (unless ~RefuseSteerAbandoned).
func (m *Model) SteerRecord(s *State, p int) Outcome {
	pr := s.Procs[p]
	switch {
	case pr.PC != Steered:
		return refused(cPCSteered)
	case m.cfg.RefuseSteerAbandoned && s.Runs[pr.Run-1].State != Active:
		return refused(cRecordActive)
	case m.cfg.FenceSteer && !HasLease(s, p):
		return refused(cFenceSteer)
	}
	n := m.clone(s)
	n.Taken = pr.Plan.Msg
	n.Consumed[pr.Plan.Msg-1]++
	n.Steered = removePair(n.Steered, Pair{Run: pr.Run, Msg: pr.Plan.Msg})
	n.Procs[p].PC = Running
	n.Procs[p].Plan = noPlan
	return Outcome{Enabled: true, Next: n}
}

// SteerRefused(p): storage refuses the record (p's run was abandoned, or
// with FenceSteer the lease is not p's); p's round is over.
func (m *Model) SteerRefused(s *State, p int) Outcome {
	pr := s.Procs[p]
	switch {
	case pr.PC != Steered:
		return refused(cPCSteered)
	case !(m.cfg.RefuseSteerAbandoned && s.Runs[pr.Run-1].State != Active ||
		m.cfg.FenceSteer && !HasLease(s, p)):
		if !m.cfg.FenceSteer {
			return refused(cRecordRefused1)
		}
		return refused(cRecordRefuse)
	}
	n := m.clone(s)
	n.Procs[p] = Proc{}
	return Outcome{Enabled: true, Next: n}
}

// addPair is steered \cup {x}, kept sorted.
func addPair(set []Pair, x Pair) []Pair {
	i, found := slices.BinarySearchFunc(set, x, comparePairs)
	if found {
		return set
	}
	return slices.Insert(set, i, x)
}

// removePair is steered \ {x}.
func removePair(set []Pair, x Pair) []Pair {
	if i, found := slices.BinarySearchFunc(set, x, comparePairs); found {
		return slices.Delete(set, i, i+1)
	}
	return set
}

func comparePairs(a, b Pair) int {
	if a.Run != b.Run {
		return int(a.Run) - int(b.Run)
	}
	return int(a.Msg) - int(b.Msg)
}

func sortPairs(set []Pair) { slices.SortFunc(set, comparePairs) }

// Crash(p): p dies; its lease and run stay as they are in storage.
func (m *Model) Crash(s *State, p int) Outcome {
	if s.Procs[p].PC == Idle {
		return refused(cPCNotIdle)
	}
	n := m.clone(s)
	n.Procs[p] = Proc{}
	return Outcome{Enabled: true, Next: n}
}
