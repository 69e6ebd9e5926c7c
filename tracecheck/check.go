package tracecheck

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/threadclaim/threadclaim/core"
)

// The kinds of Violation; errors.Is(err, ErrGuard) and the others tell them
// apart.
var (
	// ErrGuard: the line names an action whose guard does not hold in the
	// spec's state: no spec action explains it.
	ErrGuard = errors.New("guard does not hold")
	// ErrLineValue: the action's guard holds, but a value on the line
	// (msg, req, run, taken, lease, holder, kind, read) is not the one the
	// action gives in the spec's state.
	ErrLineValue = errors.New("line disagrees with the spec's state")
	// ErrOrder: the line's tick does not follow: a write's tick must be
	// the previous write's plus one, a read's the current version.
	ErrOrder = errors.New("line out of order")
	// ErrInvariant: the action was taken and an invariant no longer holds.
	ErrInvariant = errors.New("invariant violated")
)

// The invariants the checker evaluates after every line, named as in
// spec/ThreadClaimLapse.tla.
const (
	InvConsumedAtMostOnce = "I1_ConsumedAtMostOnce"
	InvOneActiveRun       = "I3_OneActiveRun"
	InvNoLiveAbandon      = "NoLiveAbandon"
)

// Violation is the first line of a thread that no action of the spec
// explains, or after which an invariant fails.
type Violation struct {
	File   string          // the trace's name, as given by WithFile
	Line   int             // the line's 1-based number in the file
	Event  core.TraceEvent // the line
	Action core.Action     // the action tried: the line's
	// Lapse is true when a Lapse was inferred just before the line: the
	// Claim took a lease another holder had not released.
	Lapse bool
	// Kind is ErrGuard, ErrLineValue, ErrOrder or ErrInvariant; Unwrap
	// returns it.
	Kind error
	// Rule is what failed, in the spec's words: a guard's conjunct (such
	// as `Fenced => HasLease(p)`), an invariant's name (such as
	// I1_ConsumedAtMostOnce), "tick", or the line's field ("line.taken").
	Rule string
	// Failed lists every guard conjunct, or every invariant, that fails
	// on this line, Rule first.
	Failed []string
	Detail string // what the line says against what the spec's state gives
	// State is a compact dump of the spec's state of the thread: before
	// the line for a guard, value or order failure; after it for an
	// invariant.
	State string
}

func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: %s", v.File, v.Line, v.Action)
	if v.Event.Proc != "" {
		fmt.Fprintf(&b, " by %s", v.Event.Proc)
	}
	switch v.Kind {
	case ErrGuard:
		fmt.Fprintf(&b, ": guard %s fails", v.Rule)
	case ErrInvariant:
		fmt.Fprintf(&b, ": invariant %s violated", v.Rule)
	case ErrOrder:
		fmt.Fprintf(&b, ": out of order (%s)", v.Rule)
	default:
		fmt.Fprintf(&b, ": %s disagrees with the spec", v.Rule)
	}
	if len(v.Failed) > 1 {
		fmt.Fprintf(&b, " (also %s)", strings.Join(v.Failed[1:], ", "))
	}
	if v.Detail != "" {
		fmt.Fprintf(&b, ": %s", v.Detail)
	}
	if v.Lapse {
		b.WriteString(" [after an inferred Lapse]")
	}
	fmt.Fprintf(&b, "\n\tline:  %s\n\tstate: %s", strings.TrimSuffix(string(appendLine(nil, &v.Event)), "\n"), v.State)
	return b.String()
}

// Unwrap returns the violation's kind.
func (v *Violation) Unwrap() error { return v.Kind }

// Spec holds the specification's constants that the checker follows.
type Spec struct {
	Fenced       bool // RunStart and Reply require HasLease(p)
	FenceAbandon bool // Abandon requires HasLease(p)
}

// Stats counts what a check saw.
type Stats struct {
	Lines           int                 // lines checked (the failing one included)
	PerAction       map[core.Action]int // lines per action
	LapsesInferred  int                 // Lapse steps inferred before a Claim
	LiveLapses      int                 // of those, lapses under a holder some process still worked under
	InvariantChecks int                 // invariant evaluations: three per line applied
	Threads         int                 // threads seen
}

// Option configures a Checker.
type Option func(*Checker)

// WithFile names the trace in violations. Default "trace".
func WithFile(name string) Option { return func(c *Checker) { c.file = name } }

// WithSpec sets the spec's constants. Default Fenced and FenceAbandon both
// TRUE, as in spec/ThreadClaimLapse.cfg; the unfenced cfgs switch them off.
func WithSpec(s Spec) Option { return func(c *Checker) { c.spec = s } }

// Checker follows the spec's actions line by line. Each thread is followed
// on its own, from the spec's Init: the lines of one thread must be given
// in trace order (Order's, or the order storage committed them in), from
// its first line; threads may interleave. It is not safe for concurrent use.
type Checker struct {
	file      string
	spec      Spec
	threads   map[core.ThreadID]*threadState
	last      *threadState
	perAction [numActions]int
	stats     Stats
	failed    []string // scratch for guard conjuncts
	first     *Violation
}

// NewChecker returns a Checker with no thread seen yet.
func NewChecker(opts ...Option) *Checker {
	c := &Checker{file: "trace", spec: Spec{Fenced: true, FenceAbandon: true}, threads: map[core.ThreadID]*threadState{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Check checks a whole trace, each thread's lines in the order given (the
// order rule: Check never reorders; Sort first lines recorded as
// concurrent processes called their Tracer). It returns the Stats and, at
// the first line no spec action explains, a *Violation; the check stops
// there. Line numbers are positions in lines plus one, as Read gives.
func Check(lines []core.TraceEvent, opts ...Option) (Stats, error) {
	c := NewChecker(opts...)
	for i := range lines {
		if err := c.Step(i+1, &lines[i]); err != nil {
			break
		}
	}
	return c.Stats(), c.Err()
}

// CheckReader reads a trace from r with a Reader, naming it name, and
// checks each line as it is read: memory does not grow with the trace's
// length. It returns the Reader's *LineError for input that is not a
// well-formed trace (an empty one included), and otherwise what Check
// returns.
func CheckReader(r io.Reader, name string, opts ...Option) (Stats, error) {
	c := NewChecker(append([]Option{WithFile(name)}, opts...)...)
	rd := NewReader(r, name)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return c.Stats(), nil
		}
		if err != nil {
			return c.Stats(), err
		}
		if err := c.Step(rd.Line(), ev); err != nil {
			return c.Stats(), err
		}
	}
}

// CheckFile checks the trace in the file at path (CheckReader). A path
// that cannot be read (missing, a directory) is a *LineError at line 0.
func CheckFile(path string, opts ...Option) (Stats, error) {
	f, err := openTrace(path)
	if err != nil {
		return Stats{}, err
	}
	defer f.Close()
	return CheckReader(f, path, opts...)
}

// Stats returns what the checker has seen so far.
func (c *Checker) Stats() Stats {
	s := c.stats
	s.PerAction = map[core.Action]int{}
	for a, i := range actionIndex {
		if n := c.perAction[i]; n > 0 {
			s.PerAction[a] = n
		}
	}
	s.Threads = len(c.threads)
	return s
}

// Err returns the violation at the lowest line number among the threads'
// first violations so far, or nil.
func (c *Checker) Err() error {
	if c.first == nil {
		return nil
	}
	return c.first
}

// Step checks the line numbered n (1-based) and, if the spec explains it,
// takes it. It returns a *Violation when it does not; that thread is then
// stopped, and Step returns the same violation for its later lines.
func (c *Checker) Step(n int, ev *core.TraceEvent) error {
	t := c.last
	if t == nil || t.id != ev.Thread {
		t = c.threads[ev.Thread]
		if t == nil {
			t = newThreadState(ev.Thread)
			c.threads[ev.Thread] = t
		}
		c.last = t
	}
	if t.violation != nil {
		return t.violation
	}
	c.stats.Lines++
	if i, ok := actionIndex[ev.Action]; ok {
		c.perAction[i]++
	}
	if v := c.step(t, n, ev); v != nil {
		v.File, v.Line, v.Event, v.Action = c.file, n, *ev, ev.Action
		t.violation = v
		if c.first == nil || v.Line < c.first.Line {
			c.first = v
		}
		return v
	}
	return nil
}

const numActions = 16

var actionIndex = map[core.Action]int{
	core.ActionPost: 0, core.ActionClaim: 1, core.ActionRenew: 2, core.ActionLapse: 3, core.ActionRelease: 4,
	core.ActionAbandon: 5, core.ActionAbandonFenced: 6, core.ActionPlan: 7, core.ActionRunStart: 8,
	core.ActionStartFenced: 9, core.ActionReply: 10, core.ActionReplyFenced: 11, core.ActionAsk: 12,
	core.ActionRunEnd: 13, core.ActionEndRefused: 14, core.ActionCrash: 15,
}

// Process counters, as the spec's pc.
const (
	pcIdle uint8 = iota
	pcClaimed
	pcPlanned
	pcRunning
)

var pcNames = [...]string{"idle", "claimed", "planned", "running"}

// Plan kinds, as the spec's plan[p].kind.
const (
	planNone uint8 = iota
	planRun
	planReply
)

var planNames = [...]string{"none", "run", "reply"}

// Run states, as the spec's runs[r].state.
const (
	runActive uint8 = iota
	runEnded
	runAbandoned
)

var runStateNames = [...]string{"active", "ended", "abandoned"}

type specRun struct {
	holder int
	prompt int64
	state  uint8
}

type specReq struct {
	run      int64
	answered bool
	answer   int64
}

type specProc struct {
	name     string
	pc       uint8
	hold     int
	planKind uint8
	planMsg  int64
	planReq  int64
	run      int64
}

// threadState is the spec's state of one thread, plus what maps the
// trace's values onto it. Everything grows by at most one element a line.
type threadState struct {
	id      core.ThreadID
	version uint64 // the tick of the last write

	msgs, taken int64
	// lease.holder: an abstract holder, 0 for none. lease.expired is not
	// kept: a Lapse is possible whenever the lease has a holder, and the
	// checker places one just before the Claim that needs it.
	lease        int
	runs         []specRun
	active       int // Cardinality(ActiveRuns)
	reqs         []specReq
	firstOpen    int     // no request below this index is open
	consumed     []int32 // consumed[m], m from 1; index 0 unused
	overConsumed int     // messages with consumed[m] > 1
	liveAband    bool    // liveAbandoned

	holders map[core.Holder]int
	names   []core.Holder // names[h] is abstract holder h's string; names[0] = ""
	procs   map[string]*specProc
	order   []*specProc // procs by first appearance, for dumps
	lastP   *specProc

	lapses    int
	lastLapse int // line of the Claim the last inferred Lapse came before

	violation *Violation
}

func newThreadState(id core.ThreadID) *threadState {
	return &threadState{
		id: id, holders: map[core.Holder]int{}, names: []core.Holder{""},
		procs: map[string]*specProc{}, consumed: []int32{0},
	}
}

func (t *threadState) proc(name string) *specProc {
	if p := t.lastP; p != nil && p.name == name {
		return p
	}
	p := t.procs[name]
	if p == nil {
		p = &specProc{name: name}
		t.procs[name] = p
		t.order = append(t.order, p)
	}
	t.lastP = p
	return p
}

// hasLease is the spec's HasLease(p).
func (t *threadState) hasLease(p *specProc) bool { return p.hold != 0 && t.lease == p.hold }

// oldestOpen returns Min(OpenReqs), or 0 when no request is open.
func (t *threadState) oldestOpen() int64 {
	for t.firstOpen < len(t.reqs) && t.reqs[t.firstOpen].answered {
		t.firstOpen++
	}
	if t.firstOpen < len(t.reqs) {
		return int64(t.firstOpen + 1)
	}
	return 0
}

// isRead says whether an action's line is a read: it carries the version
// it saw. Release is both (see Step).
func isRead(a core.Action) bool {
	switch a {
	case core.ActionPlan, core.ActionStartFenced, core.ActionReplyFenced,
		core.ActionAbandonFenced, core.ActionEndRefused, core.ActionCrash:
		return true
	}
	return false
}

// guard collects the conjuncts of a guard that fail.
func (c *Checker) guard(ok bool, conjunct string) {
	if !ok {
		c.failed = append(c.failed, conjunct)
	}
}

func (c *Checker) guardViolation(t *threadState, detail string) *Violation {
	return &Violation{Kind: ErrGuard, Rule: c.failed[0], Failed: slices.Clone(c.failed), Detail: detail, State: t.dump()}
}

func valueViolation(t *threadState, field string, got, want any) *Violation {
	return &Violation{Kind: ErrLineValue, Rule: field, Failed: []string{field},
		Detail: fmt.Sprintf("line has %v, the spec gives %v", got, want), State: t.dump()}
}

func (c *Checker) step(t *threadState, n int, ev *core.TraceEvent) *Violation {
	a := ev.Action
	if _, ok := actionIndex[a]; !ok || a == core.ActionLapse {
		return &Violation{Kind: ErrLineValue, Rule: "action", Failed: []string{"action"},
			Detail: fmt.Sprintf("%q is not an action a trace logs", a), State: t.dump()}
	}
	// read: a Release is a write or a read by whether the lease was p's;
	// its guard below checks which.
	if a != core.ActionRelease && ev.Read != isRead(a) {
		return valueViolation(t, "line.read", ev.Read, isRead(a))
	}
	if want := t.version + 1; !ev.Read && ev.Tick != want {
		return &Violation{Kind: ErrOrder, Rule: "tick", Failed: []string{"tick"},
			Detail: fmt.Sprintf("a write's tick must be the previous write's plus one: line has %d, expected %d", ev.Tick, want), State: t.dump()}
	}
	if ev.Read && ev.Tick != t.version {
		return &Violation{Kind: ErrOrder, Rule: "tick", Failed: []string{"tick"},
			Detail: fmt.Sprintf("a read's tick must be the current version: line has %d, expected %d", ev.Tick, t.version), State: t.dump()}
	}
	c.failed = c.failed[:0]
	lapse := false
	var p *specProc
	if a == core.ActionPost {
		if ev.Holder != "" {
			return valueViolation(t, "line.holder", strconv.Quote(string(ev.Holder)), `"" (a Post has no holder)`)
		}
	} else {
		if ev.Proc == "" {
			return valueViolation(t, "line.proc", `""`, "a process name")
		}
		p = t.proc(ev.Proc)
	}

	switch a {
	case core.ActionPost:
		// No guard: MaxMsgs bounds the model only.
		if v := t.checkCommon(ev, t.msgs+1, -1, -1); v != nil {
			return v
		}
		t.msgs++
		t.consumed = append(t.consumed, 0)

	case core.ActionClaim:
		c.guard(p.pc == pcIdle, `pc[p] = "idle"`)
		_, reused := t.holders[ev.Holder]
		c.guard(ev.Holder != "" && !reused, `hold'[p] = nextHolder (a fresh holder)`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, fmt.Sprintf("holder %q, %s", ev.Holder, p.describe(t)))
		}
		// lease.holder = 0 \/ lease.expired: a Lapse may always come
		// first, so the checker infers one where it is needed.
		if t.lease != 0 {
			lapse = true
			t.lapses++
			t.lastLapse = n
			c.stats.LapsesInferred++
			for _, q := range t.order {
				if q.hold == t.lease {
					c.stats.LiveLapses++
					break
				}
			}
		}
		if ev.Lease != ev.Holder {
			v := valueViolation(t, "line.lease", strconv.Quote(string(ev.Lease)), strconv.Quote(string(ev.Holder))+" (the new holder)")
			v.Lapse = lapse
			return v
		}
		if ev.Taken != core.Seq(t.taken) {
			v := valueViolation(t, "line.taken", ev.Taken, t.taken)
			v.Lapse = lapse
			return v
		}
		h := len(t.names)
		t.names = append(t.names, ev.Holder)
		t.holders[ev.Holder] = h
		t.lease = h
		p.hold, p.pc = h, pcClaimed

	case core.ActionRenew:
		c.guard(p.pc != pcIdle, `pc[p] # "idle"`)
		c.guard(t.hasLease(p), `HasLease(p)`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, t.leaseDetail(p))
		}
		if v := t.checkProc(ev, p, true, t.hold(p)); v != nil {
			return v
		}

	case core.ActionRelease:
		c.guard(p.pc == pcClaimed, `pc[p] = "claimed"`)
		// A Release writes (clears the lease) exactly when the lease is
		// p's, and is a read otherwise, as core logs it and as the TLC
		// trace spec requires.
		if ev.Read {
			c.guard(!t.hasLease(p), `~HasLease(p) (a Release that writes nothing)`)
		} else {
			c.guard(t.hasLease(p), `HasLease(p) (a Release that clears the lease)`)
		}
		if len(c.failed) > 0 {
			return c.guardViolation(t, t.leaseDetail(p))
		}
		after := t.lease
		if t.hasLease(p) {
			after = 0
		}
		if v := t.checkProc(ev, p, true, t.names[after]); v != nil {
			return v
		}
		if t.hasLease(p) {
			t.lease = 0
		}
		p.pc, p.hold = pcIdle, 0

	case core.ActionAbandon:
		r := int64(ev.Run)
		inRange := r >= 1 && r <= int64(len(t.runs))
		c.guard(p.pc == pcClaimed, `pc[p] = "claimed"`)
		c.guard(inRange, `r \in RunIds`)
		c.guard(inRange && t.runs[r-1].state == runActive, `runs[r].state = "active"`)
		c.guard(inRange && t.runs[r-1].holder != p.hold, `runs[r].holder # hold[p]`)
		c.guard(!c.spec.FenceAbandon || t.hasLease(p), `FenceAbandon => HasLease(p)`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, fmt.Sprintf("run %d; %s", r, t.leaseDetail(p)))
		}
		if v := t.checkProc(ev, p, true, t.names[t.lease]); v != nil {
			return v
		}
		run := &t.runs[r-1]
		run.state = runAbandoned
		t.active--
		if t.lease == run.holder {
			t.liveAband = true
		}

	case core.ActionAbandonFenced:
		c.guard(p.pc == pcClaimed, `pc[p] = "claimed"`)
		c.guard(c.spec.FenceAbandon, `FenceAbandon`)
		c.guard(!t.hasLease(p), `~HasLease(p)`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, t.leaseDetail(p))
		}
		if v := t.checkProc(ev, p, true, t.names[t.lease]); v != nil {
			return v
		}
		p.pc, p.hold = pcIdle, 0

	case core.ActionPlan:
		c.guard(p.pc == pcClaimed, `pc[p] = "claimed"`)
		c.guard(t.active == 0, `ActiveRuns = {}`)
		c.guard(t.taken < t.msgs, `taken < msgs`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, fmt.Sprintf("%s; %d active run(s); taken %d, msgs %d", p.describe(t), t.active, t.taken, t.msgs))
		}
		if v := t.checkProc(ev, p, false, ""); v != nil {
			return v
		}
		kind, req := planRun, int64(0)
		if q := t.oldestOpen(); q != 0 {
			kind, req = planReply, q
		}
		switch {
		case ev.Kind != planNames[kind]:
			return valueViolation(t, "line.kind", strconv.Quote(ev.Kind), strconv.Quote(planNames[kind]))
		case int64(ev.Msg) != t.taken+1:
			return valueViolation(t, "line.msg", ev.Msg, t.taken+1)
		case int64(ev.Req) != req:
			return valueViolation(t, "line.req", ev.Req, req)
		}
		p.pc, p.planKind, p.planMsg, p.planReq = pcPlanned, kind, t.taken+1, req

	case core.ActionRunStart:
		c.guard(p.pc == pcPlanned, `pc[p] = "planned"`)
		c.guard(p.planKind == planRun, `plan[p].kind = "run"`)
		c.guard(!c.spec.Fenced || t.hasLease(p), `Fenced => HasLease(p)`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, t.leaseDetail(p))
		}
		if v := t.checkProc(ev, p, true, t.names[t.lease]); v != nil {
			return v
		}
		switch id := int64(len(t.runs)) + 1; {
		case int64(ev.Msg) != p.planMsg:
			return valueViolation(t, "line.msg", ev.Msg, p.planMsg)
		case int64(ev.Run) != id:
			return valueViolation(t, "line.run", ev.Run, id)
		}
		// The line's taken is the state after: plan[p].msg.
		if int64(ev.Taken) != p.planMsg {
			return valueViolation(t, "line.taken", ev.Taken, p.planMsg)
		}
		t.runs = append(t.runs, specRun{holder: p.hold, prompt: p.planMsg, state: runActive})
		t.active++
		t.taken = p.planMsg
		t.consume(p.planMsg)
		p.run = int64(len(t.runs))
		p.pc, p.planKind, p.planMsg, p.planReq = pcRunning, planNone, 0, 0

	case core.ActionStartFenced:
		c.guard(p.pc == pcPlanned, `pc[p] = "planned"`)
		c.guard(p.planKind == planRun, `plan[p].kind = "run"`)
		c.guard(c.spec.Fenced, `Fenced`)
		c.guard(!t.hasLease(p), `~HasLease(p)`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, t.leaseDetail(p))
		}
		if v := t.checkProc(ev, p, true, t.names[t.lease]); v != nil {
			return v
		}
		p.pc, p.hold, p.planKind, p.planMsg, p.planReq = pcIdle, 0, planNone, 0, 0

	case core.ActionReply:
		q := p.planReq
		c.guard(p.pc == pcPlanned, `pc[p] = "planned"`)
		c.guard(p.planKind == planReply, `plan[p].kind = "reply"`)
		c.guard(!c.spec.Fenced || t.hasLease(p), `Fenced => HasLease(p)`)
		c.guard(q >= 1 && q <= int64(len(t.reqs)) && !t.reqs[q-1].answered, `reqs[plan[p].req].state = "open"`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, fmt.Sprintf("request %d; %s", q, t.leaseDetail(p)))
		}
		if v := t.checkProc(ev, p, true, t.names[t.lease]); v != nil {
			return v
		}
		switch {
		case int64(ev.Msg) != p.planMsg:
			return valueViolation(t, "line.msg", ev.Msg, p.planMsg)
		case int64(ev.Req) != q:
			return valueViolation(t, "line.req", ev.Req, q)
		case int64(ev.Taken) != p.planMsg:
			return valueViolation(t, "line.taken", ev.Taken, p.planMsg)
		}
		t.reqs[q-1].answered, t.reqs[q-1].answer = true, p.planMsg
		t.taken = p.planMsg
		t.consume(p.planMsg)
		p.pc, p.planKind, p.planMsg, p.planReq = pcClaimed, planNone, 0, 0

	case core.ActionReplyFenced:
		c.guard(p.pc == pcPlanned, `pc[p] = "planned"`)
		c.guard(p.planKind == planReply, `plan[p].kind = "reply"`)
		c.guard(c.spec.Fenced, `Fenced`)
		c.guard(!t.hasLease(p), `~HasLease(p)`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, t.leaseDetail(p))
		}
		if v := t.checkProc(ev, p, true, t.names[t.lease]); v != nil {
			return v
		}
		p.pc, p.hold, p.planKind, p.planMsg, p.planReq = pcIdle, 0, planNone, 0, 0

	case core.ActionAsk:
		c.guard(p.pc == pcRunning, `pc[p] = "running"`)
		c.guard(t.runState(p.run) == runActive, `runs[run[p]].state = "active"`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, p.describe(t))
		}
		if v := t.checkProc(ev, p, false, ""); v != nil {
			return v
		}
		switch id := int64(len(t.reqs)) + 1; {
		case int64(ev.Run) != p.run:
			return valueViolation(t, "line.run", ev.Run, p.run)
		case int64(ev.Req) != id:
			return valueViolation(t, "line.req", ev.Req, id)
		}
		t.reqs = append(t.reqs, specReq{run: p.run})

	case core.ActionRunEnd:
		c.guard(p.pc == pcRunning, `pc[p] = "running"`)
		c.guard(t.runState(p.run) == runActive, `runs[run[p]].state = "active"`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, p.describe(t))
		}
		if v := t.checkProc(ev, p, false, ""); v != nil {
			return v
		}
		if int64(ev.Run) != p.run {
			return valueViolation(t, "line.run", ev.Run, p.run)
		}
		t.runs[p.run-1].state = runEnded
		t.active--
		p.pc, p.run = pcClaimed, 0

	case core.ActionEndRefused:
		c.guard(p.pc == pcRunning, `pc[p] = "running"`)
		c.guard(t.runState(p.run) == runAbandoned, `runs[run[p]].state = "abandoned"`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, p.describe(t))
		}
		if v := t.checkProc(ev, p, false, ""); v != nil {
			return v
		}
		if int64(ev.Run) != p.run {
			return valueViolation(t, "line.run", ev.Run, p.run)
		}
		p.pc, p.hold, p.run = pcIdle, 0, 0

	case core.ActionCrash:
		c.guard(p.pc != pcIdle, `pc[p] # "idle"`)
		if len(c.failed) > 0 {
			return c.guardViolation(t, p.describe(t))
		}
		if ev.Holder != "" && ev.Holder != t.hold(p) {
			return valueViolation(t, "line.holder", strconv.Quote(string(ev.Holder)), strconv.Quote(string(t.hold(p)))+` or ""`)
		}
		if ev.Taken != core.Seq(t.taken) {
			return valueViolation(t, "line.taken", ev.Taken, t.taken)
		}
		p.pc, p.hold, p.run, p.planKind, p.planMsg, p.planReq = pcIdle, 0, 0, planNone, 0, 0
	}

	if !ev.Read {
		t.version = ev.Tick
	}
	c.stats.InvariantChecks += 3
	if t.overConsumed > 0 || t.active > 1 || t.liveAband {
		var failed []string
		if t.overConsumed > 0 {
			failed = append(failed, InvConsumedAtMostOnce)
		}
		if t.active > 1 {
			failed = append(failed, InvOneActiveRun)
		}
		if t.liveAband {
			failed = append(failed, InvNoLiveAbandon)
		}
		return &Violation{Kind: ErrInvariant, Rule: failed[0], Failed: failed, Lapse: lapse,
			Detail: t.invariantDetail(), State: t.dump()}
	}
	return nil
}

// checkCommon checks a Post's msg and taken; -1 skips a field.
func (t *threadState) checkCommon(ev *core.TraceEvent, msg, req, run int64) *Violation {
	switch {
	case msg >= 0 && int64(ev.Msg) != msg:
		return valueViolation(t, "line.msg", ev.Msg, msg)
	case req >= 0 && int64(ev.Req) != req:
		return valueViolation(t, "line.req", ev.Req, req)
	case run >= 0 && int64(ev.Run) != run:
		return valueViolation(t, "line.run", ev.Run, run)
	case int64(ev.Taken) != t.taken:
		return valueViolation(t, "line.taken", ev.Taken, t.taken)
	}
	return nil
}

// checkProc checks the holder of a process's line, its lease (when the
// action carries one) and, for actions that leave taken alone, its taken.
func (t *threadState) checkProc(ev *core.TraceEvent, p *specProc, carriesLease bool, lease core.Holder) *Violation {
	if h := t.hold(p); ev.Holder != h {
		return valueViolation(t, "line.holder", strconv.Quote(string(ev.Holder)), strconv.Quote(string(h))+" (hold[p])")
	}
	if carriesLease && ev.Lease != lease {
		return valueViolation(t, "line.lease", strconv.Quote(string(ev.Lease)), strconv.Quote(string(lease)))
	}
	switch ev.Action {
	case core.ActionRunStart, core.ActionReply:
		return nil // taken' is the plan's message; checked by the caller
	}
	if int64(ev.Taken) != t.taken {
		return valueViolation(t, "line.taken", ev.Taken, t.taken)
	}
	return nil
}

func (t *threadState) hold(p *specProc) core.Holder { return t.names[p.hold] }

func (t *threadState) runState(r int64) uint8 {
	if r < 1 || r > int64(len(t.runs)) {
		return 255
	}
	return t.runs[r-1].state
}

func (t *threadState) consume(m int64) {
	t.consumed[m]++
	if t.consumed[m] == 2 {
		t.overConsumed++
	}
}

func (t *threadState) holderName(h int) string {
	if h == 0 {
		return "none"
	}
	return "h" + strconv.Itoa(h)
}

func (t *threadState) leaseDetail(p *specProc) string {
	return fmt.Sprintf("lease.holder is %s, hold[%s] is %s, pc[%s] is %s",
		t.holderName(t.lease), p.name, t.holderName(p.hold), p.name, pcNames[p.pc])
}

func (p *specProc) describe(t *threadState) string {
	return fmt.Sprintf("pc[%s] is %s, hold %s, plan %s, run %d", p.name, pcNames[p.pc], t.holderName(p.hold), p.planString(), p.run)
}

func (p *specProc) planString() string {
	switch p.planKind {
	case planRun:
		return fmt.Sprintf("run/m%d", p.planMsg)
	case planReply:
		return fmt.Sprintf("reply/m%d->q%d", p.planMsg, p.planReq)
	}
	return "none"
}

func (t *threadState) invariantDetail() string {
	var parts []string
	if t.overConsumed > 0 {
		var ms []string
		for m, n := range t.consumed {
			if n > 1 {
				ms = append(ms, fmt.Sprintf("m%d consumed %d times", m, n))
			}
		}
		parts = append(parts, strings.Join(ms, ", "))
	}
	if t.active > 1 {
		var rs []string
		for i, r := range t.runs {
			if r.state == runActive {
				rs = append(rs, fmt.Sprintf("%d", i+1))
			}
		}
		parts = append(parts, fmt.Sprintf("runs %s active", strings.Join(rs, ", ")))
	}
	if t.liveAband {
		parts = append(parts, "a run was abandoned while its own holder had the lease")
	}
	return strings.Join(parts, "; ")
}

// dumpTail is how many of the latest runs and requests a dump shows.
const dumpTail = 6

// dump writes the spec's state of the thread compactly. Holders are
// abstract (h1, h2, ... in order of their Claims), with their strings.
func (t *threadState) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "thread %q version %d: msgs=%d taken=%d lease=%s", t.id, t.version, t.msgs, t.taken, t.holderName(t.lease))
	if t.lease != 0 {
		b.WriteString(" (may have lapsed)")
	}
	if t.lapses > 0 {
		fmt.Fprintf(&b, " lapses-inferred=%d (last before line %d)", t.lapses, t.lastLapse)
	}
	used := map[int]bool{t.lease: true}
	b.WriteString(" runs=[")
	from := max(0, len(t.runs)-dumpTail)
	if from > 0 {
		fmt.Fprintf(&b, "...%d earlier ", from)
	}
	for i := from; i < len(t.runs); i++ {
		r := t.runs[i]
		used[r.holder] = true
		if i > from {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%s/m%d/%s", i+1, t.holderName(r.holder), r.prompt, runStateNames[r.state])
	}
	b.WriteString("] reqs=[")
	from = max(0, len(t.reqs)-dumpTail)
	if from > 0 {
		fmt.Fprintf(&b, "...%d earlier ", from)
	}
	for i := from; i < len(t.reqs); i++ {
		q := t.reqs[i]
		if i > from {
			b.WriteByte(' ')
		}
		if q.answered {
			fmt.Fprintf(&b, "%d:run%d/answered/m%d", i+1, q.run, q.answer)
		} else {
			fmt.Fprintf(&b, "%d:run%d/open", i+1, q.run)
		}
	}
	b.WriteString("]")
	if t.overConsumed > 0 {
		fmt.Fprintf(&b, " consumed>1=%d", t.overConsumed)
	}
	if t.liveAband {
		b.WriteString(" liveAbandoned=TRUE")
	}
	b.WriteString(" procs={")
	for i, p := range t.order {
		used[p.hold] = true
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s %s plan=%s run=%d", p.name, pcNames[p.pc], t.holderName(p.hold), p.planString(), p.run)
	}
	fmt.Fprintf(&b, "} nextHolder=h%d holders={", len(t.names))
	first := true
	for h := 1; h < len(t.names); h++ {
		if !used[h] {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "h%d=%q", h, t.names[h])
	}
	b.WriteString("}")
	return b.String()
}
