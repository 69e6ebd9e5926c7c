package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// phase is where a claim's round is, as the specification's pc[p] for the
// process that made the claim: claimed, planned or running while the round
// is open, over once a Release, a refusal or a Crash ended it.
type phase uint8

const (
	phaseClaimed phase = iota + 1
	phasePlanned
	phaseRunning
	phaseSteered
	phaseOver
)

func (p phase) String() string {
	switch p {
	case phaseClaimed:
		return PCClaimed
	case phasePlanned:
		return PCPlanned
	case phaseRunning:
		return PCRunning
	case phaseSteered:
		return PCSteered
	case phaseOver:
		return "over"
	}
	return "phase(?)"
}

// DoubtOutcome is what became of a write whose commit outcome its process
// was not told (ErrCommitUnknown).
type DoubtOutcome string

// The outcomes of a write in doubt.
const (
	// DoubtPending: the write returned ErrCommitUnknown; the round's Crash
	// will resolve it.
	DoubtPending DoubtOutcome = "pending"
	// DoubtCommitted: storage's trace log has the write's line.
	DoubtCommitted DoubtOutcome = "committed"
	// DoubtNotCommitted: storage's trace log has no line of the write.
	DoubtNotCommitted DoubtOutcome = "not-committed"
	// DoubtUndecided: storage keeps no trace lines to ask
	// (TraceLogReader): the Crash decided from the lease (a Claim) or
	// ended the round as if the write had not committed.
	DoubtUndecided DoubtOutcome = "undecided"
)

// Doubt is a write whose commit outcome its process was not told, as
// WithDoubts reports it: once when the write returns ErrCommitUnknown
// (DoubtPending), and once when the round's Crash resolves it.
type Doubt struct {
	Proc   string   `json:"proc"`
	Thread ThreadID `json:"thread"`
	Holder Holder   `json:"holder"`
	Action Action   `json:"action"`
	// Tick is the thread's version the write would have had, and has if
	// it committed: where storage's trace log keeps its line. It is 0 for
	// a Claim whose storage decides the version in the round trip that
	// commits it, when that round trip's reply was lost: nobody knows it.
	Tick    uint64       `json:"tick"`
	Outcome DoubtOutcome `json:"outcome"`
	// Crashed says the round's end was traced as a Crash line. It is
	// false when the write itself ended the round (a Release that
	// committed, or a RunEnd whose transaction released: RunEndThenStart),
	// when there was no round (a Claim that did not commit),
	// and when nothing is traced.
	Crashed bool `json:"crashed"`
}

// round is one claim's progress through the specification's process
// states, kept by the Workspace that made the claim. Every call on the
// claim checks it before touching storage, so that a call the
// specification does not allow at this point of the round (a RunStart
// without a Plan, a Reply for a plan that is not the current one, a
// Release during a run, any call after the round ended) is refused with
// nothing written and nothing traced.
type round struct {
	ws     *Workspace
	thread ThreadID
	holder Holder

	mu    sync.Mutex
	phase phase
	// plan is the current plan (phasePlanned): kind, message, request.
	plan Plan
	// run is the round's run (phaseRunning, phaseSteered).
	run RunID
	// steer is the message given to the run as steering and not yet
	// recorded (phaseSteered): plan[p].msg of the spec's "steer" plan.
	steer Seq
	// doubt: a write's commit outcome is unknown; only Crash may follow.
	// doubtLine is that write's line (the first such write's), which
	// storage's trace log has exactly when it committed.
	doubt     bool
	doubtLine *TraceEvent
	// doubtPlan is the Plan line between the write in doubt and a second
	// write of the same transaction (RunEndThenStart's RunStart): a Crash
	// that learns the transaction committed traces it, as the process's
	// own line of it (storage's log keeps it too, for a process killed
	// before it could: a merge takes it once).
	doubtPlan *TraceEvent
	// doubtReleased: the transaction of the write in doubt also gave the
	// lease up (RunEndThenStart's Release): committed, its Release ended
	// the round, and a Crash must not follow it.
	doubtReleased bool
	// claimDoubt: the Claim itself may or may not have committed.
	claimDoubt bool
	// crashing: a Crash is tracing the round's end; crashFailed: a Crash
	// could not read after a write in doubt, so the round waits for one
	// that can.
	crashing, crashFailed bool
	// ending counts the Crash calls that have begun and not returned: from
	// the moment one begins, no other call of the round may begin (see
	// Workspace.Crash).
	ending int
	// tick and taken are the last version this round's traced lines saw,
	// and the taken cursor at it: where Crash places its line without a
	// read.
	tick  uint64
	taken Seq
	// asked is the last request this round's Asks opened: storage that
	// has fewer requests lost one of them (Ask).
	asked RequestID
	// calls counts calls on the round in flight; idle is closed when it
	// drops to zero (Crash waits for it, so that no line of the round
	// follows its Crash).
	calls int
	idle  chan struct{}
	// sole counts the calls in flight other than Renew and Crash: at most
	// one. Two of them at once could trace their lines in an order the
	// round's phase did not allow (a Plan read after a Release that ended
	// the round, an Ask after a Steer), so a second is refused. A Renew
	// runs beside any call (its line is a write only while the lease is
	// the claim's), and Crash waits for the calls in flight.
	sole int
}

// allowed says whether a call of the action may start from phase p: the
// spec's guard on pc[p], from the action table. A Claim starts a round
// rather than going on with one; a refusal is not called, but traced by
// the call of the write it refuses.
func allowed(a Action, p phase) bool {
	info, _ := Info(a)
	switch {
	case !info.ByProcess || info.Refuses != "" || a == ActionClaim:
		return false
	case info.PC == "":
		return p != phaseOver // pc[p] # "idle"
	}
	return p.String() == info.PC
}

// enter checks that the claim is this workspace's and that the action may
// follow in its round (and check, when given, under the round's lock), and
// counts the call in flight; the call must end with leave.
func (w *Workspace) enter(c Claim, a Action, check func(r *round) error) (*round, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	r := c.r
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: claim on thread %q was not made by Workspace.Claim", ErrInvalidArgument, c.Thread)
	case r.ws != w:
		return nil, fmt.Errorf("%w: claim on thread %q belongs to another workspace (process %q)", ErrInvalidArgument, c.Thread, r.ws.proc)
	case r.thread != c.Thread || r.holder != c.Holder:
		return nil, fmt.Errorf("%w: claim's thread or holder was changed", ErrInvalidArgument)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ph := r.phase
	if ph == phaseOver && w.mutants.RoundOverAccepted {
		ph = phaseClaimed // the mutant
	}
	switch {
	case ph == phaseOver:
		return nil, fmt.Errorf("%s on thread %q: %w", a, c.Thread, ErrRoundOver)
	case (r.crashing || r.ending > 0) && a != ActionCrash:
		// The round's Crash is being traced, at a version that a write of
		// the round (a renewal) must not pass, or waits for the calls in
		// flight before it reads that version: a renewal that began in
		// between would run beside the read.
		return nil, fmt.Errorf("%s on thread %q: %w: the round's Crash is in progress", a, c.Thread, ErrRoundOver)
	case r.doubt && a != ActionCrash && !w.mutants.DoubtIgnored:
		return nil, fmt.Errorf("%s on thread %q: %w: a write's commit is unknown, only Crash may follow", a, c.Thread, ErrOutOfOrder)
	case !allowed(a, ph):
		return nil, fmt.Errorf("%s on thread %q: %w: the round is %s", a, c.Thread, ErrOutOfOrder, ph)
	}
	if w.mutants.PlanNotChecked && (a == ActionRunStart || a == ActionReply) {
		check = nil // the mutant
	}
	if check != nil {
		if err := check(r); err != nil {
			return nil, err
		}
	}
	if a != ActionRenew && a != ActionCrash {
		if r.sole > 0 {
			return nil, fmt.Errorf("%s on thread %q: %w: another call of the round is in flight (a claim's calls go one at a time; only Renew runs beside another)", a, c.Thread, ErrOutOfOrder)
		}
		r.sole++
	}
	if r.calls == 0 {
		r.idle = make(chan struct{})
	}
	r.calls++
	return r, nil
}

// leave ends a call entered with enter: it records the line the call
// traced (its tick and taken cursor, and the phase it leads to) and a
// commit outcome that is unknown.
//
// more are the lines of later actions the call traced from the same
// transaction (RunEndThenStart's Plan and RunStart, or Release), which the round
// follows after line, as one call: no Crash comes between them.
func (r *round) leave(line *TraceEvent, traced bool, err error, plan *Plan, more ...*TraceEvent) {
	r.mu.Lock()
	r.sole--
	r.leaveLocked(line, traced, err, plan, more...)
}

// leaveRenew is leave for a Renew, which runs beside the round's other
// calls (sole does not count it).
func (r *round) leaveRenew(line *TraceEvent, traced bool, err error) {
	r.mu.Lock()
	r.leaveLocked(line, traced, err, nil)
}

// leaveLocked is leave's work, with r.mu held; it unlocks r.mu.
func (r *round) leaveLocked(line *TraceEvent, traced bool, err error, plan *Plan, more ...*TraceEvent) {
	if traced && plan != nil {
		r.plan = *plan
	}
	doubted := errors.Is(err, ErrCommitUnknown) && r.doubtWrite(line)
	if errors.Is(err, ErrCommitUnknown) {
		r.doubt = true
	}
	if traced {
		r.saw(line)
		for _, l := range more {
			r.saw(l)
		}
	}
	r.calls--
	if r.calls == 0 {
		close(r.idle)
	}
	r.mu.Unlock()
	if doubted {
		r.ws.doubted(r, DoubtPending, false)
	}
}

// saw takes the round on past a line it traced (nil: none): the last tick
// and taken cursor it saw, and, while the round is not over, the phase
// the line leads to. r.mu is held.
func (r *round) saw(line *TraceEvent) {
	if line == nil {
		return
	}
	if line.Tick >= r.tick {
		r.tick, r.taken = line.Tick, line.Taken
	}
	if r.phase != phaseOver {
		r.follow(line)
	}
}

// doubtWrite keeps line as the round's write in doubt, unless one is kept
// already or line is a read's (a read wrote nothing to be in doubt about).
// It reports whether it kept it. r.mu is held.
func (r *round) doubtWrite(line *TraceEvent) bool {
	if r.doubtLine != nil || line == nil || line.Read {
		return false
	}
	l := *line
	r.doubtLine = &l
	return true
}

// follow moves the round along the traced action, as the specification
// moves pc[p] (the action table's NextPC), run[p] and plan[p].
func (r *round) follow(line *TraceEvent) {
	switch line.Action {
	case ActionRunStart:
		r.run, r.plan = line.Run, Plan{}
	case ActionReply:
		r.plan = Plan{}
	case ActionRunEnd:
		r.run = 0
	case ActionSteer:
		r.steer = line.Msg
	case ActionSteerRecord:
		r.steer = 0
	}
	info, _ := Info(line.Action)
	switch info.NextPC {
	case "":
	case PCIdle:
		r.end()
	case PCClaimed:
		r.phase = phaseClaimed
	case PCPlanned:
		r.phase = phasePlanned
	case PCRunning:
		r.phase = phaseRunning
	case PCSteered:
		r.phase = phaseSteered
	}
}

// end marks the round over and forgets it in its workspace. r.mu is held.
func (r *round) end() {
	r.phase = phaseOver
	r.ws.mu.Lock()
	if r.ws.rounds[r.thread] == r {
		delete(r.ws.rounds, r.thread)
	}
	r.ws.mu.Unlock()
}

// wait waits until no call of the round is in flight, or ctx ends.
func (r *round) wait(ctx context.Context) error {
	r.mu.Lock()
	if r.calls == 0 {
		r.mu.Unlock()
		return nil
	}
	idle := r.idle
	r.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("crash on thread %q: waiting for the round's calls in flight: %w", r.thread, ctx.Err())
	}
}
