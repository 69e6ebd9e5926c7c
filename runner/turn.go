package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/threadclaim/threadclaim/core"
)

// Outcome is how a turn ended.
type Outcome string

// The outcomes of a turn.
const (
	// OutcomeBusy: another holder had the thread; the turn claimed nothing.
	OutcomeBusy Outcome = "busy"
	// OutcomeDone: every message was consumed and the claim released.
	OutcomeDone Outcome = "done"
	// OutcomeFenced: a fenced write was refused because another claim has
	// the thread. It wrote nothing; the thread is the new holder's. A
	// failed turn.
	OutcomeFenced Outcome = "fenced"
	// OutcomeLost: a renewal found the claim gone, or the run was
	// abandoned by a later claim. A failed turn.
	OutcomeLost Outcome = "lost"
	// OutcomeError: storage failed, or could not say whether a write
	// committed. The round was given up, the write not retried under the
	// same holder. A failed turn.
	OutcomeError Outcome = "error"
	// OutcomeStopped: the runner was stopped; the turn recorded its run's
	// end and released its claim.
	OutcomeStopped Outcome = "stopped"
	// OutcomeYielded: the turn reached MaxTurnMessages or MaxTurnDuration
	// and released the thread without planning again; work may be left
	// for a later turn.
	OutcomeYielded Outcome = "yielded"
)

// Failed reports whether the outcome is a failed turn.
func (o Outcome) Failed() bool { return o == OutcomeFenced || o == OutcomeLost || o == OutcomeError }

// Step names what a turn does next. Apart from StepAgent they are the
// specification's actions.
type Step string

// The steps of a turn, in the order a turn takes them.
const (
	StepClaim         = Step(core.ActionClaim)
	StepPlan          = Step(core.ActionPlan)
	StepAbandon       = Step(core.ActionAbandon)
	StepRunStart      = Step(core.ActionRunStart)
	StepReply         = Step(core.ActionReply)
	StepAgent    Step = "Agent" // the agent runs; its questions are Ask actions, its steering Steer (each recorded by the run's next write)
	// StepSteerRecord records the steering the agent was given last, once
	// it returned (SteerRecord, or SteerRefused when the run was
	// abandoned meanwhile).
	StepSteerRecord      = Step(core.ActionSteerRecord)
	StepRunEnd           = Step(core.ActionRunEnd)
	StepRelease          = Step(core.ActionRelease)
	StepOver        Step = "" // the turn is over
)

// Steps returns the steps a turn can take, in order (not StepOver).
func Steps() []Step {
	return []Step{StepClaim, StepPlan, StepAbandon, StepRunStart, StepReply, StepAgent, StepSteerRecord, StepRunEnd, StepRelease}
}

// Turn is one claim on one thread, taken one step at a time: claim, abandon
// what earlier claims left, plan, start a run (fenced) or answer a request
// (fenced), run the agent, record the run's end (not fenced), plan again
// while messages remain, release. Runner.TakeTurn drives a turn to its end and
// renews its claim on a timer; a simulation may drive Step and Renew itself
// to interleave many processes' turns (NewTurn, Step, Next and the Step
// constants exist for that: a program that embeds the runner uses Run or
// TakeTurn). Step must not be called concurrently with itself (a Step
// begun while another is in flight panics, saying so); Renew may be
// called at any time.
type Turn struct {
	r      *Runner
	thread core.ThreadID

	stepping atomic.Bool // a Step is in flight

	next     Step
	claim    core.Claim
	abandon  []core.RunID
	plan     core.Plan
	handle   *RunHandle
	handles  []*RunHandle
	session  *Session
	runErr   error
	outcome  Outcome
	err      error
	span     trace.Span
	begun    time.Time
	consumes int
	yielded  bool
	// takeover: the turn took a thread whose lease had expired in one of
	// Run's takeover slots; it plans once (see Config.TakeoverTurns).
	takeover bool
	planned  bool
	outer    context.Context // TakeTurn's context: a detached agent stops with it

	agentCancel context.CancelFunc // the agent's context, once Await kept it
	base        context.Context    // the turn's context without cancellation: runs' contexts derive from it
	mutant      mutant             // a deliberate defect a test switched on; none in a deployment

	// renewing is held by a renewal for its whole round trip, so that
	// crash can wait for one in flight: a Renew committed after the Crash
	// line would renew a claim its process has given up.
	renewing  sync.Mutex
	mu        sync.Mutex // guards lost, stopping, over, releasing, doubt and cancel
	lost      bool
	stopping  bool
	releasing bool // the turn is releasing its claim: no renewal starts
	over      bool
	// doubt is the error of a call of the round whose commit is unknown:
	// only the round's Crash may follow it (round).
	doubt  error
	runCtx context.Context
	cancel context.CancelFunc
}

// NewTurn returns a turn on the thread that has not claimed it yet.
func (r *Runner) NewTurn(thread core.ThreadID) *Turn {
	return &Turn{r: r, thread: thread, next: StepClaim}
}

// Next returns the step Step will take, StepOver once the turn is over.
func (t *Turn) Next() Step { return t.next }

// Claim returns the turn's claim, the zero Claim before it claims.
func (t *Turn) Claim() core.Claim { return t.claim }

// Outcome returns how the turn ended and the error behind it, if any.
func (t *Turn) Outcome() (Outcome, error) { return t.outcome, t.err }

// Renew extends the claim. When the claim is gone it cancels the running
// agent's context and returns an error for which errors.Is(err,
// core.ErrThreadBusy) holds; the turn then ends once its current run's end
// is recorded. Before the claim and after the turn it does nothing.
func (t *Turn) Renew(ctx context.Context) error {
	t.renewing.Lock()
	defer t.renewing.Unlock()
	t.mu.Lock()
	claimed := t.claim != (core.Claim{}) && !t.lost && !t.over && !t.releasing && t.doubt == nil && t.runCtx != nil
	t.mu.Unlock()
	if !claimed {
		return nil
	}
	err := t.r.ws.Renew(ctx, t.claim, t.r.cfg.ClaimTTL)
	switch {
	case errors.Is(err, core.ErrThreadBusy):
		t.lose()
	case errors.Is(err, core.ErrCommitUnknown):
		// Only the round's Crash may follow: the run stops, and the
		// turn's next step crashes (round).
		t.noteDoubt(err)
		t.cancelAgent()
	case errors.Is(err, core.ErrRoundOver), errors.Is(err, core.ErrOutOfOrder):
		// The turn's own step ended the round (or left it to Crash)
		// meanwhile: nothing to renew.
		return nil
	}
	return err
}

// round makes one call of the turn's round to storage, a step's or the
// agent's (through its Session). Once a call of the round had a commit
// whose outcome is unknown, the round allows only its Crash: round then
// makes no call, and returns that call's error for the turn to crash on.
// Without it, a step that followed an Ask or a renewal in doubt would be
// refused as out of order, an error only a defect explains. A renewal in
// flight beside the call may put the round in doubt before it returns:
// a call refused as out of order waits for it to end (renewing), and
// takes its doubt.
func (t *Turn) round(call func() error) error {
	if doubt := t.inDoubt(); doubt != nil {
		return doubt
	}
	err := call()
	if errors.Is(err, core.ErrOutOfOrder) {
		t.awaitRenewal()
		if doubt := t.inDoubt(); doubt != nil {
			return doubt
		}
	}
	t.noteDoubt(err)
	return err
}

// awaitRenewal returns once no renewal is in flight (renewing): one that
// was has returned, its outcome noted.
func (t *Turn) awaitRenewal() {
	t.renewing.Lock()
	t.renewing.Unlock() //nolint:staticcheck // a barrier: the renewal in flight has returned
}

// inDoubt returns the error of the round's call in doubt, nil when none.
func (t *Turn) inDoubt() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.doubt
}

// noteDoubt keeps err as the round's call in doubt when it says the
// call's commit is unknown and none was kept before.
func (t *Turn) noteDoubt(err error) {
	if !errors.Is(err, core.ErrCommitUnknown) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.doubt == nil {
		t.doubt = err
	}
}

func (t *Turn) lose() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lost = true
	if t.cancel != nil {
		t.cancel()
	}
}

// Stop asks the turn to end gracefully: the running agent's context is
// cancelled, and the turn releases its claim at its next plan instead of
// planning again, even when its thread still has work. TakeTurn calls it when
// its context ends; a scheduler that drives turns step by step calls it to
// end a turn early (the spec lets a claimed process Release at any time).
func (t *Turn) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopping = true
	if t.cancel != nil {
		t.cancel()
	}
}

func (t *Turn) isStopping() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopping
}

func (t *Turn) isLost() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lost
}

// Step takes the turn's next step and returns true once the turn is over.
func (t *Turn) Step(ctx context.Context) bool {
	if !t.stepping.CompareAndSwap(false, true) {
		panic("runner: Turn.Step called while another Step of the turn is in flight: a turn's steps go one at a time")
	}
	defer t.stepping.Store(false)
	switch t.next {
	case StepClaim:
		t.stepClaim(ctx)
	case StepPlan:
		t.stepPlan(ctx)
	case StepAbandon:
		t.stepAbandon(ctx)
	case StepRunStart:
		t.stepRunStart(ctx)
	case StepReply:
		t.stepReply(ctx)
	case StepAgent:
		t.stepAgent()
	case StepSteerRecord:
		t.stepSteerRecord(ctx)
	case StepRunEnd:
		t.stepRunEnd(ctx)
	case StepRelease:
		t.stepRelease(ctx)
	}
	return t.next == StepOver
}

func (t *Turn) stepClaim(ctx context.Context) {
	holder, err := t.r.cfg.NewHolder()
	if err != nil {
		t.end(ctx, OutcomeError, err)
		return
	}
	// The plan comes with the claim unless plans are separate or the
	// turn is stopping already (it would release at once).
	withPlan := !t.r.cfg.SeparatePlans && !t.isStopping()
	var (
		c   core.Claim
		p   core.Plan
		run core.RunID
	)
	if withPlan {
		// A run the plan makes may start with the claim
		// (core.Workspace.ClaimThenStart), saving RunStart's round trip.
		c, p, run, err = t.r.ws.ClaimThenStart(ctx, t.thread, holder, t.r.cfg.ClaimTTL)
	} else {
		c, err = t.r.ws.Claim(ctx, t.thread, holder, t.r.cfg.ClaimTTL)
	}
	if errors.Is(err, core.ErrThreadBusy) {
		t.r.metrics.turns.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", string(OutcomeBusy))))
		t.outcome, t.err, t.next = OutcomeBusy, err, StepOver
		t.report()
		return
	}
	if errors.Is(err, core.ErrCommitUnknown) {
		// The claim may have committed: the round is given up as after
		// any write whose outcome was unknown. Crash decides from the
		// lease whether there was a round to trace.
		t.mu.Lock()
		t.claim = c
		t.mu.Unlock()
		t.crash(ctx, err)
		return
	}
	if err != nil {
		t.end(ctx, OutcomeError, err)
		return
	}
	if _, span := t.r.tracer.Start(ctx, "threadclaim.turn", trace.WithAttributes(
		attribute.String("thread", string(t.thread)),
		attribute.String("process", t.r.ws.Process()),
	)); span.IsRecording() {
		t.span = span // nil otherwise: no events, attributes or end to make
	}
	t.begun = t.r.cfg.Clock.Now()
	t.mu.Lock()
	t.claim = c
	t.base = context.WithoutCancel(ctx)
	t.runCtx, t.cancel = context.WithCancel(t.base)
	if t.stopping {
		t.cancel()
	}
	t.mu.Unlock()
	t.next = StepPlan
	if withPlan {
		t.follow(p)
		if run != 0 {
			t.started(ctx, run)
		}
	}
}

func (t *Turn) stepPlan(ctx context.Context) {
	if t.isLost() || t.isStopping() {
		t.next = StepRelease
		return
	}
	if t.yieldDue() {
		t.yielded, t.next = true, StepRelease
		return
	}
	var p core.Plan
	err := t.round(func() (err error) { p, err = t.r.ws.Plan(ctx, t.claim); return err })
	if err != nil {
		t.crash(ctx, err)
		return
	}
	t.follow(p)
}

// yieldDue reports whether the turn has reached a bound: a takeover turn
// has planned once, or the turn has consumed MaxTurnMessages or gone on
// for MaxTurnDuration.
func (t *Turn) yieldDue() bool {
	return (t.takeover && t.planned) ||
		(t.r.cfg.MaxTurnMessages > 0 && t.consumes >= t.r.cfg.MaxTurnMessages) ||
		t.r.cfg.Clock.Now().Sub(t.begun) >= t.r.cfg.MaxTurnDuration
}

// follow takes the turn on to the write plan p names.
func (t *Turn) follow(p core.Plan) {
	t.plan, t.planned = p, true
	switch p.Kind {
	case core.PlanAbandon:
		t.abandon, t.next = p.Runs, StepAbandon
	case core.PlanRun:
		t.handle = newRunHandle(t.claim, p.Message)
		t.handles = append(t.handles, t.handle)
		if t.r.cfg.OnRun != nil {
			t.r.cfg.OnRun(t.handle)
		}
		t.next = StepRunStart
	case core.PlanReply:
		t.next = StepReply
	default:
		t.next = StepRelease
	}
	t.event("plan", attribute.String("kind", p.Kind.String()), attribute.Int64("message", int64(p.Message)))
}

func (t *Turn) stepAbandon(ctx context.Context) {
	run := t.abandon[0]
	t.abandon = t.abandon[1:]
	err := t.round(func() error { return t.r.ws.Abandon(ctx, t.claim, run) })
	switch {
	case errors.Is(err, core.ErrThreadBusy):
		t.refused(ctx, "abandon", err)
		return
	case errors.Is(err, core.ErrRunNotActive), errors.Is(err, core.ErrRunAbandoned):
		// The run ended, or was abandoned, since the plan read it: its
		// holder's end is not fenced. Nothing to abandon; plan again.
		t.abandon = nil
	case err != nil:
		t.crash(ctx, err)
		return
	default:
		t.r.metrics.abandoned.Add(ctx, 1)
		t.event("abandon", attribute.Int64("run", int64(run)))
	}
	if len(t.abandon) == 0 {
		t.next = StepPlan
	}
}

func (t *Turn) stepRunStart(ctx context.Context) {
	var id core.RunID
	start := func() (err error) { id, err = t.r.ws.RunStart(ctx, t.claim, t.plan.Message); return err }
	err := t.round(start)
	if t.mutant.retryCommitUnknown && errors.Is(err, core.ErrCommitUnknown) {
		err = start() // the mutant: past round, which would not call again
	}
	switch {
	case errors.Is(err, core.ErrThreadBusy):
		t.handle.finish(err)
		t.refused(ctx, "run_started", err)
		return
	case err != nil:
		t.handle.finish(err)
		t.crash(ctx, err)
		return
	}
	t.started(ctx, id)
}

// started takes the turn on from its planned run's start, recorded as
// run id: the agent runs next.
func (t *Turn) started(ctx context.Context, id core.RunID) {
	t.handle.started(id)
	t.r.metrics.started.Add(ctx, 1)
	t.consumed(ctx, t.plan.Posted)
	t.event("run_started", attribute.Int64("run", int64(id)), attribute.Int64("prompt", int64(t.plan.Message)))
	t.next = StepAgent
}

func (t *Turn) stepReply(ctx context.Context) {
	reply := func() error { return t.r.ws.Reply(ctx, t.claim, t.plan.Request, t.plan.Message) }
	err := t.round(reply)
	if t.mutant.retryCommitUnknown && errors.Is(err, core.ErrCommitUnknown) {
		err = reply() // the mutant: past round, which would not call again
	}
	switch {
	case errors.Is(err, core.ErrThreadBusy):
		t.refused(ctx, "answer", err)
		return
	case err != nil:
		t.crash(ctx, err)
		return
	}
	t.consumed(ctx, t.plan.Posted)
	t.r.answered(t.thread, t.plan.Request)
	t.event("answered", attribute.Int64("request", int64(t.plan.Request)), attribute.Int64("answer", int64(t.plan.Message)))
	t.next = StepPlan
}

// consumed counts the message against MaxTurnMessages and records its
// consumption latency, from the post as the plan read it.
func (t *Turn) consumed(ctx context.Context, m core.Message) {
	t.consumes++
	t.r.metrics.latency.Record(ctx, t.r.cfg.Clock.Now().Sub(m.PostedAt).Seconds())
}

// stepAgent runs the agent until it returns, or until it waits for an
// answer (Session.Await), which records the run's end itself: the turn
// then goes on (to reply to the request, among others) while the agent
// waits, and the run's handle finishes when the agent returns.
func (t *Turn) stepAgent() {
	d := Delivered{Claim: t.claim, Run: t.handle.RunID(), Prompt: t.plan.Posted, Taken: t.plan.Message}
	s := &Session{
		ws:        t.r.ws,
		r:         t.r,
		Delivered: d,
		own:       d,
		ended:     make(chan struct{}),
		keep:      t.keepAgent,
		turn:      t,
	}
	t.session = s
	done := make(chan error, 1)
	go func() { done <- t.runAgent(s) }()
	select {
	case t.runErr = <-done:
		if !s.endedRun() {
			// The steering given last, if any, is recorded by a step of
			// its own, before the run's end.
			t.next = StepRunEnd
			pending, failed := s.closeAgent()
			if pending {
				t.next = StepSteerRecord
				return
			}
			t.consumes += s.steeringRecorded()
			if failed != nil {
				// The agent's Ask or Steer made the steering's record,
				// and it was refused (the round is over: OutcomeLost)
				// or failed: the run's end goes as Await's would.
				t.runEnded(context.Background(), failed)
			}
			return
		}
		t.afterAwait(s)
		t.handle.finish(t.runErr)
		if t.agentCancel != nil {
			t.agentCancel()
		}
	case <-s.ended:
		t.afterAwait(s)
		t.detach(done)
	}
}

// runAgent runs the agent and returns its error. An agent that panics
// fails its run as one that returned an error would, with an error
// wrapping errAgentPanicked (the value and the stack; logged at Error):
// the run's end is recorded as ever, and the runner's other turns, and
// its process, go on.
func (t *Turn) runAgent(s *Session) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v\n%s", errAgentPanicked, p, debug.Stack())
			t.r.cfg.Logger.Error("agent panicked", slog.String("thread", string(t.thread)),
				slog.Int64("run", int64(s.own.Run)), slog.Any("err", err))
		}
	}()
	return t.r.cfg.Agent.Run(t.runCtx, s)
}

// afterAwait takes the turn on from the run's end that Session.Await
// recorded.
func (t *Turn) afterAwait(s *Session) {
	t.consumes += s.steeringRecorded()
	err := s.endErr
	switch {
	case errors.Is(err, core.ErrRunAbandoned):
		t.handle.finish(err)
		t.end(context.Background(), OutcomeLost, err)
	case err != nil:
		t.handle.finish(err)
		t.crash(context.Background(), err)
	default:
		t.r.metrics.ended.Add(context.Background(), 1)
		t.event("run_ended", attribute.Int64("run", int64(t.handle.RunID())))
		// The waiting agent kept its context: the turn's next runs get a
		// fresh one, cancelled as ever when the claim is lost.
		t.mu.Lock()
		t.runCtx, t.cancel = context.WithCancel(t.base)
		if t.stopping || t.lost {
			t.cancel()
		}
		t.mu.Unlock()
		t.next = StepPlan
	}
}

// keepAgent takes the agent's context out of the turn's hands: from now
// on losing the claim or ending the turn does not cancel it (Await calls
// it before recording the run's end).
func (t *Turn) keepAgent() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.agentCancel, t.cancel = t.cancel, nil
}

// detach lets the agent, which waits for an answer, outlive its run and
// its turn: its context is no longer cancelled when the claim is lost or
// the turn ends, only when the runner stops; its handle finishes when it
// returns.
func (t *Turn) detach(done <-chan error) {
	t.mu.Lock()
	cancel := t.agentCancel
	t.mu.Unlock()
	if cancel == nil {
		cancel = func() {}
	}
	h := t.handle
	var stopped <-chan struct{}
	if t.outer != nil {
		stopped = t.outer.Done()
	}
	t.r.detached.Add(1)
	go func() {
		defer t.r.detached.Done()
		defer cancel()
		select {
		case err := <-done:
			h.finish(err)
		case <-stopped:
			cancel()
			h.finish(<-done)
		}
	}()
}

// stepSteerRecord records the steering the agent was given last, before
// the run's end; a refused record ends the turn as a refused end does.
func (t *Turn) stepSteerRecord(ctx context.Context) {
	err := t.session.closeRun(ctx)
	t.consumes += t.session.steeringRecorded()
	if err != nil {
		t.runEnded(ctx, err)
		return
	}
	t.next = StepRunEnd
}

func (t *Turn) stepRunEnd(ctx context.Context) {
	if !t.r.cfg.SeparatePlans && !t.isLost() && !t.isStopping() && !t.yieldDue() {
		t.runEndThenStart(ctx)
		return
	}
	if t.runEnded(ctx, t.round(func() error { return t.r.ws.RunEnd(ctx, t.claim, t.handle.RunID(), t.session.output()) })) {
		t.next = StepPlan
	}
}

// runEnded takes the turn on from its run's end, which err (nil: it was
// recorded) says became of, and reports whether it was recorded: a run a
// later claim abandoned ends the turn as lost, any other error crashes it.
func (t *Turn) runEnded(ctx context.Context, err error) bool {
	switch {
	case errors.Is(err, core.ErrRunAbandoned):
		t.handle.finish(err)
		t.end(ctx, OutcomeLost, err)
		return false
	case err != nil:
		t.handle.finish(err)
		t.crash(ctx, err)
		return false
	}
	t.r.metrics.ended.Add(ctx, 1)
	t.handle.finish(t.runErr)
	t.event("run_ended", attribute.Int64("run", int64(t.handle.RunID())))
	return true
}

// startBacklog is how many messages must wait after a run's prompt for
// the turn to record its start with the end of the run before
// (core.Workspace.RunEndThenStart). Started at once, a backlog drains
// half as fast again; but a runner that keeps up with its posters so
// ends its turns sooner, and takes more of them, each a claim and a
// release: started at once from a backlog of one, the runners consumed a
// tenth fewer messages a second while posters posted on the same two
// cores; from three, as many as apart, with a third of the tail
// (issue 25; store/postgres/BENCH.md, "A run's end and the next start").
const startBacklog = 3

// runEndThenStart records the run's end, plans the next write and, when
// that is a run with a backlog behind it (startBacklog), records its
// start, or, when nothing is left, releases the claim, in one transaction
// (core.Workspace.RunEndThenStart): the turn would plan next anyway (it is
// not lost, stopping or due to yield), and start the run it plans or
// release, so the steps are one. A start the fence refused there, or with
// a shorter backlog, is StepRunStart's, which records a refusal. No
// renewal runs during the call, as during a Release: one that reached
// storage after it would find the lease gone.
func (t *Turn) runEndThenStart(ctx context.Context) {
	var (
		p   core.Plan
		run core.RunID
	)
	t.stopRenewals()
	err := t.round(func() (err error) {
		p, run, err = t.r.ws.RunEndThenStart(ctx, t.claim, t.handle.RunID(), t.session.output(), startBacklog, true)
		return err
	})
	if !t.runEnded(ctx, err) {
		return
	}
	t.follow(p)
	if p.Kind == core.PlanNothing {
		t.released(ctx, nil) // RunEndThenStart released the claim
		return
	}
	t.mu.Lock()
	t.releasing = false
	t.mu.Unlock()
	if run != 0 {
		t.started(ctx, run)
	}
}

// stopRenewals waits out a renewal in flight and lets none start: a
// renewal that reached storage after the Release would find the lease
// gone and call a claim lost that was given up.
func (t *Turn) stopRenewals() {
	t.renewing.Lock()
	t.mu.Lock()
	t.releasing = true
	t.mu.Unlock()
	t.renewing.Unlock()
}

func (t *Turn) stepRelease(ctx context.Context) {
	// No renewal starts from here on, and one in flight returns first: a
	// renewal that reached storage after the Release would find the lease
	// gone and call a claim lost that was given up.
	t.stopRenewals()
	t.released(ctx, t.round(func() error { return t.r.ws.Release(ctx, t.claim) }))
}

// released ends the turn after its Release, which err (nil: recorded)
// says became of.
func (t *Turn) released(ctx context.Context, err error) {
	switch {
	case err != nil:
		t.crash(ctx, err)
	case t.isLost():
		t.end(ctx, OutcomeLost, fmt.Errorf("renew claim on thread %q: %w", t.thread, core.ErrThreadBusy))
	case t.isStopping():
		t.end(ctx, OutcomeStopped, nil)
	case t.yielded:
		t.end(ctx, OutcomeYielded, nil)
	default:
		t.end(ctx, OutcomeDone, nil)
	}
}

// refused ends a turn whose fenced write was refused: another claim has the
// thread, and it plans the next write.
func (t *Turn) refused(ctx context.Context, write string, err error) {
	t.r.metrics.refusals.Add(ctx, 1, metric.WithAttributes(attribute.String("write", write)))
	t.event("fenced", attribute.String("write", write))
	t.end(ctx, OutcomeFenced, err)
}

// crash gives the round up after an error it cannot classify. Whether the
// write committed may be unknown, so it is never retried under this holder.
// When storage does not answer the Crash after a write whose commit is
// unknown, the round stays open: the runner records it, and Run tries its
// Crash again at a later look (retryCrashes), not here, so that a turn
// never waits for storage to come back.
func (t *Turn) crash(ctx context.Context, err error) {
	// No renewal starts once the turn is over; wait out one in flight.
	t.mu.Lock()
	t.over = true
	t.mu.Unlock()
	t.awaitRenewal()
	if cerr := t.r.ws.Crash(context.WithoutCancel(ctx), t.claim); !roundEnded(cerr) {
		t.r.leftOpen(t.claim)
	}
	t.end(ctx, OutcomeError, err)
}

func (t *Turn) end(ctx context.Context, o Outcome, err error) {
	t.outcome, t.err, t.next = o, err, StepOver
	t.mu.Lock()
	t.over = true
	if t.cancel != nil {
		t.cancel()
	}
	t.mu.Unlock()
	t.r.metrics.turns.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", string(o))))
	t.report()
	if t.span == nil {
		return
	}
	t.span.SetAttributes(attribute.String("outcome", string(o)))
	if o.Failed() {
		t.span.SetStatus(codes.Error, fmt.Sprintf("%s: %v", o, err))
	}
	t.span.End()
}

// TurnReport is what one turn did, given to Config.OnTurn.
type TurnReport struct {
	Thread  core.ThreadID
	Holder  core.Holder // "" when the turn claimed nothing
	Outcome Outcome
	Err     error // behind a failed or busy turn
	// Consumed counts the messages the turn consumed: prompts of runs it
	// started, answers of replies it wrote, and steering its runs'
	// records consumed.
	Consumed int
	// Runs are the handles of the runs the turn planned, in order.
	Runs []*RunHandle
	// Began is when the turn's claim was taken, by the runner's clock
	// (zero when it claimed nothing); Ended when it was over.
	Began, Ended time.Time
}

// Report returns the turn's report; complete once the turn is over.
func (t *Turn) Report() TurnReport {
	return TurnReport{Thread: t.thread, Holder: t.claim.Holder, Outcome: t.outcome, Err: t.err,
		Consumed: t.consumes, Runs: append([]*RunHandle(nil), t.handles...), Began: t.begun, Ended: t.r.cfg.Clock.Now()}
}

// report logs the turn's end and hands its report to OnTurn.
func (t *Turn) report() {
	rep := t.Report()
	level := slog.LevelDebug
	if rep.Outcome.Failed() {
		level = slog.LevelWarn
	}
	t.r.cfg.Logger.Log(context.Background(), level, "turn over",
		slog.String("thread", string(rep.Thread)), slog.String("holder", string(rep.Holder)),
		slog.String("outcome", string(rep.Outcome)), slog.Int("consumed", rep.Consumed),
		slog.Any("err", rep.Err))
	if t.r.cfg.OnTurn != nil {
		t.r.cfg.OnTurn(rep)
	}
}

func (t *Turn) event(name string, attrs ...attribute.KeyValue) {
	if t.span != nil {
		// A copy, so that attrs does not escape: the callers' arguments
		// stay on the stack when nothing records (the default no-op
		// tracer, or a span sampled out).
		t.span.AddEvent(name, trace.WithAttributes(append([]attribute.KeyValue(nil), attrs...)...))
	}
}
