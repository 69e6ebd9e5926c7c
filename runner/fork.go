package runner

import (
	"context"
	"slices"

	"github.com/threadclaim/threadclaim/core"
)

// ForkForTesting returns a Runner configured as r, over ws and clock, with
// agent and newHolder: the runner of a forked execution, whose workspace
// ws is a fork of r's (core.Workspace.ForkForTesting) and claim maps r's
// claims to ws's. It shares r's tracer and metrics; the rounds whose Crash
// r is to try again are carried over.
//
// It exists for simulations that fork an execution at a point they go on
// from in several ways; no deployment reaches it. No agent of r may be
// waiting for an answer (Session.Await).
func (r *Runner) ForkForTesting(ws *core.Workspace, clock Clock, agent Agent, newHolder func() (core.Holder, error), claim func(core.Claim) core.Claim) *Runner {
	cfg := r.cfg
	cfg.Workspace, cfg.Clock, cfg.Agent, cfg.NewHolder = ws, clock, agent, newHolder
	f := &Runner{cfg: cfg, ws: ws, tracer: r.tracer, metrics: r.metrics}
	r.openMu.Lock()
	for _, o := range r.open {
		f.open = append(f.open, openRound{claim: claim(o.claim), next: o.next})
	}
	r.openMu.Unlock()
	return f
}

// ForkForTesting returns a copy of the turn, between two of its steps, on
// r, a fork of the turn's runner (Runner.ForkForTesting) whose claim maps
// the turn's claims: the copy takes the steps the turn would take next,
// and the two share nothing afterwards. ctx is the one the turn's claim
// step was given; the copy's runs derive their contexts from it, cancelled
// if the turn's are.
//
// It exists for simulations that fork an execution; no deployment reaches
// it. Step must not be in flight, and the turn's agent must have returned.
func (t *Turn) ForkForTesting(ctx context.Context, r *Runner, claim func(core.Claim) core.Claim) *Turn {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := &Turn{
		r: r, thread: t.thread, next: t.next,
		claim:   claim(t.claim),
		abandon: append([]core.RunID(nil), t.abandon...),
		plan:    t.plan,
		runErr:  t.runErr, outcome: t.outcome, err: t.err,
		span: t.span, begun: t.begun, consumes: t.consumes, yielded: t.yielded,
		takeover: t.takeover, planned: t.planned, outer: t.outer, mutant: t.mutant,
		lost: t.lost, stopping: t.stopping, releasing: t.releasing, over: t.over, doubt: t.doubt,
	}
	f.plan.Runs = append([]core.RunID(nil), t.plan.Runs...)
	handles := map[*RunHandle]*RunHandle{}
	for _, h := range t.handles {
		c := h.fork(claim)
		handles[h] = c
		f.handles = append(f.handles, c)
	}
	if t.handle != nil {
		if f.handle = handles[t.handle]; f.handle == nil {
			f.handle = t.handle.fork(claim)
		}
	}
	if t.session != nil {
		f.session = t.session.fork(r, claim)
		f.session.turn = f
	}
	if t.base != nil {
		f.base = context.WithoutCancel(ctx)
	}
	if t.runCtx != nil {
		f.runCtx, f.cancel = context.WithCancel(f.base)
		if t.runCtx.Err() != nil {
			f.cancel()
		}
	}
	return f
}

// fork copies the handle, its claim mapped by claim.
func (h *RunHandle) fork(claim func(core.Claim) core.Claim) *RunHandle {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := newRunHandle(claim(h.Claim), h.Prompt)
	c.run, c.err = h.run, h.err
	select {
	case <-h.done:
		close(c.done)
	default:
	}
	return c
}

// fork copies the session of an agent that has returned, on r, its claim
// mapped by claim: the output its run's end is to record goes with it, and
// its steering (the message given last and not recorded yet, which the
// fork's StepSteerRecord records).
func (s *Session) fork(r *Runner, claim func(core.Claim) core.Claim) *Session {
	c := &Session{own: s.own, ws: r.ws, r: r, out: s.output(), ended: make(chan struct{})}
	c.own.Claim = claim(s.own.Claim)
	c.Delivered = c.own
	s.callMu.Lock()
	c.steer = s.steer
	c.steer.asked = slices.Clone(s.steer.asked)
	if s.steer.pending != nil {
		m := *s.steer.pending
		c.steer.pending = &m
	}
	s.callMu.Unlock()
	if s.endedRun() {
		c.endOnce.Do(func() {})
		c.endErr = s.endErr
		close(c.ended)
	}
	return c
}
