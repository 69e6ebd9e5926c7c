package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
	StepAgent    Step = "Agent" // the agent runs; its questions are Ask actions
	StepRunEnd        = Step(core.ActionRunEnd)
	StepRelease       = Step(core.ActionRelease)
	StepOver     Step = "" // the turn is over
)

// Steps returns the steps a turn can take, in order (not StepOver).
func Steps() []Step {
	return []Step{StepClaim, StepPlan, StepAbandon, StepRunStart, StepReply, StepAgent, StepRunEnd, StepRelease}
}

// Turn is one claim on one thread, taken one step at a time: claim, abandon
// what earlier claims left, plan, start a run (fenced) or answer a request
// (fenced), run the agent, record the run's end (not fenced), plan again
// while messages remain, release. Runner.Work drives a turn to its end and
// renews its claim on a timer; a simulation may drive Step and Renew itself
// to interleave many processes' turns. Step must not be called
// concurrently with itself; Renew may be called at any time.
type Turn struct {
	r      *Runner
	thread core.ThreadID

	next    Step
	claim   core.Claim
	abandon []core.RunID
	plan    core.Plan
	handle  *RunHandle
	runErr  error
	outcome Outcome
	err     error
	span    trace.Span
	mutant  mutant // a deliberate defect a test switched on; none in a deployment

	mu       sync.Mutex // guards lost, stopping, over and cancel
	lost     bool
	stopping bool
	over     bool
	runCtx   context.Context
	cancel   context.CancelFunc
}

// NewTurn returns a turn on the thread that has not claimed it yet.
func (r *Runner) NewTurn(thread core.ThreadID) *Turn {
	return &Turn{r: r, thread: thread, next: StepClaim}
}

// Next returns the step Step will take, StepOver once the turn is over.
func (t *Turn) Next() Step { return t.next }

// Claim returns the turn's claim, the zero Claim before it claims.
func (t *Turn) Claim() core.Claim { return t.claim }

// Handle returns the handle of the turn's latest planned run, or nil.
func (t *Turn) Handle() *RunHandle { return t.handle }

// Outcome returns how the turn ended and the error behind it, if any.
func (t *Turn) Outcome() (Outcome, error) { return t.outcome, t.err }

// Renew extends the claim. When the claim is gone it cancels the running
// agent's context and returns an error for which errors.Is(err,
// core.ErrThreadBusy) holds; the turn then ends once its current run's end
// is recorded. Before the claim and after the turn it does nothing.
func (t *Turn) Renew(ctx context.Context) error {
	t.mu.Lock()
	claimed := t.claim != (core.Claim{}) && !t.lost && !t.over && t.cancel != nil
	t.mu.Unlock()
	if !claimed {
		return nil
	}
	err := t.r.ws.Renew(ctx, t.claim, t.r.cfg.ClaimTTL)
	if errors.Is(err, core.ErrThreadBusy) {
		t.lose()
	}
	return err
}

func (t *Turn) lose() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lost = true
	if t.cancel != nil {
		t.cancel()
	}
}

// stop asks the turn to end gracefully: the agent's context is
// cancelled, and the turn releases its claim instead of planning again.
func (t *Turn) stop() {
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
	c, err := t.r.ws.Claim(ctx, t.thread, holder, t.r.cfg.ClaimTTL)
	if errors.Is(err, core.ErrThreadBusy) {
		t.r.metrics.turns.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", string(OutcomeBusy))))
		t.outcome, t.next = OutcomeBusy, StepOver
		return
	}
	if errors.Is(err, core.ErrCommitUnknown) {
		// The claim may have committed. Its holder is unique, so the
		// lease tells: if it is ours, the round is given up as after any
		// write whose outcome was unknown (traced as Crash); if not,
		// nothing was claimed.
		if l, lerr := t.r.ws.Lease(ctx, t.thread); lerr == nil && l.Holder == holder {
			t.mu.Lock()
			t.claim = core.Claim{Thread: t.thread, Holder: holder}
			t.mu.Unlock()
			t.crash(ctx, err)
			return
		}
	}
	if err != nil {
		t.end(ctx, OutcomeError, err)
		return
	}
	_, t.span = t.r.tracer.Start(ctx, "threadclaim.turn", trace.WithAttributes(
		attribute.String("thread", string(t.thread)),
		attribute.String("process", t.r.ws.Process()),
	))
	t.mu.Lock()
	t.claim = c
	t.runCtx, t.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if t.stopping {
		t.cancel()
	}
	t.mu.Unlock()
	t.next = StepPlan
}

func (t *Turn) stepPlan(ctx context.Context) {
	if t.isLost() || t.isStopping() {
		t.next = StepRelease
		return
	}
	p, err := t.r.ws.Plan(ctx, t.claim)
	if err != nil {
		t.crash(ctx, err)
		return
	}
	t.plan = p
	switch p.Kind {
	case core.PlanAbandon:
		t.abandon, t.next = p.Runs, StepAbandon
	case core.PlanRun:
		t.handle = newRunHandle(t.claim, p.Message)
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
	err := t.r.ws.Abandon(ctx, t.claim, run)
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
	id, err := t.r.ws.RunStart(ctx, t.claim, t.plan.Message)
	if t.mutant.retryCommitUnknown && errors.Is(err, core.ErrCommitUnknown) {
		id, err = t.r.ws.RunStart(ctx, t.claim, t.plan.Message)
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
	t.handle.started(id)
	t.r.metrics.started.Add(ctx, 1)
	t.consumed(ctx, t.plan.Message)
	t.event("run_started", attribute.Int64("run", int64(id)), attribute.Int64("prompt", int64(t.plan.Message)))
	t.next = StepAgent
}

func (t *Turn) stepReply(ctx context.Context) {
	err := t.r.ws.Reply(ctx, t.claim, t.plan.Request, t.plan.Message)
	if t.mutant.retryCommitUnknown && errors.Is(err, core.ErrCommitUnknown) {
		err = t.r.ws.Reply(ctx, t.claim, t.plan.Request, t.plan.Message)
	}
	switch {
	case errors.Is(err, core.ErrThreadBusy):
		t.refused(ctx, "answer", err)
		return
	case err != nil:
		t.crash(ctx, err)
		return
	}
	t.consumed(ctx, t.plan.Message)
	t.event("answered", attribute.Int64("request", int64(t.plan.Request)), attribute.Int64("answer", int64(t.plan.Message)))
	t.next = StepPlan
}

// consumed records the consumption latency of the message.
func (t *Turn) consumed(ctx context.Context, seq core.Seq) {
	th, err := t.r.ws.Thread(ctx, t.thread)
	if err != nil || int(seq) > len(th.Messages) {
		return
	}
	posted := th.Messages[seq-1].PostedAt
	t.r.metrics.latency.Record(ctx, t.r.cfg.Clock.Now().Sub(posted).Seconds())
}

func (t *Turn) stepAgent() {
	s := &Session{ws: t.r.ws, Delivered: Delivered{Claim: t.claim, Run: t.handle.Run(), Taken: t.plan.Message}}
	th, err := t.r.ws.Thread(t.runCtx, t.thread)
	if err == nil && int(t.plan.Message) <= len(th.Messages) {
		s.Delivered.Prompt = th.Messages[t.plan.Message-1]
	}
	t.runErr = t.r.cfg.Agent.Run(t.runCtx, s)
	t.next = StepRunEnd
}

func (t *Turn) stepRunEnd(ctx context.Context) {
	err := t.r.ws.RunEnd(ctx, t.claim, t.handle.Run())
	switch {
	case errors.Is(err, core.ErrRunAbandoned):
		t.handle.finish(err)
		t.end(ctx, OutcomeLost, err)
		return
	case err != nil:
		t.handle.finish(err)
		t.crash(ctx, err)
		return
	}
	t.r.metrics.ended.Add(ctx, 1)
	t.handle.finish(t.runErr)
	t.event("run_ended", attribute.Int64("run", int64(t.handle.Run())))
	t.next = StepPlan
}

func (t *Turn) stepRelease(ctx context.Context) {
	err := t.r.ws.Release(ctx, t.claim)
	switch {
	case err != nil:
		t.crash(ctx, err)
	case t.isLost():
		t.end(ctx, OutcomeLost, fmt.Errorf("renew claim on thread %q: %w", t.thread, core.ErrThreadBusy))
	case t.isStopping():
		t.end(ctx, OutcomeStopped, nil)
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
func (t *Turn) crash(ctx context.Context, err error) {
	_ = t.r.ws.Crash(context.WithoutCancel(ctx), t.claim)
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
	if t.span == nil {
		return
	}
	t.span.SetAttributes(attribute.String("outcome", string(o)))
	if o.Failed() {
		t.span.SetStatus(codes.Error, fmt.Sprintf("%s: %v", o, err))
	}
	t.span.End()
}

func (t *Turn) event(name string, attrs ...attribute.KeyValue) {
	if t.span != nil {
		t.span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}
