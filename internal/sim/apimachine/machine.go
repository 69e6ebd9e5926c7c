// Package apimachine calls core.Workspace's public methods in any order,
// by several processes, in and out of the protocol, and checks after every
// call that the trace so far is one the Go checker accepts. The storage
// tests run it with rapid (simtest.RunMachine); tracecheck tlc hands
// its traces to TLC.
package apimachine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Chooser makes an API machine's choices: rapid's draws in the property
// test, a seeded generator in the mutant test.
type Chooser interface {
	IntN(label string, n int) int
}

// RandChooser draws from a seeded generator.
type RandChooser struct{ R *rand.Rand }

// IntN draws a value in [0, n).
func (c RandChooser) IntN(_ string, n int) int { return c.R.IntN(n) }

// Machine calls core.Workspace's public methods in any order, by several
// processes with skewed clocks, on claims of their own, of other
// processes, ended ones and hand-built ones, with reused holders, and
// checks after every call that the trace so far is one the Go checker
// accepts, and that a call refused as out of the protocol (ErrOutOfOrder,
// ErrRoundOver, ErrInvalidArgument, ErrHolderReused) wrote nothing and
// traced nothing. It is the test that the public API is closed under the
// specification.
type Machine struct {
	ctx     context.Context
	s       core.Storage
	rec     *tracecheck.Recorder
	poster  *core.Workspace
	procs   []*core.Workspace
	stores  []*hookStorage // each process's view of the storage
	clocks  []*coretest.Clock
	threads []core.ThreadID
	claims  []core.Claim
	owners  []int                      // the process that made each claim
	next    map[core.Holder]int        // each claim's protocol-next call
	plans   map[core.Holder]core.Plan  // each claim's latest plan
	runs    map[core.Holder]core.RunID // each claim's latest run
	calls   int
}

// epoch is where the machine's clocks start.
var epoch = time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)

// apiTTL is the machine's claim TTL; clocks move by up to a TTL a step.
const apiTTL = 10 * time.Second

// New returns a machine over s with procs processes, whose
// threads are named after prefix (unique per machine on a shared
// storage). opts are given to every process's Workspace (the mutant test
// passes core.WithMutantsForTesting).
func New(ctx context.Context, s core.Storage, prefix string, procs int, ch Chooser, opts ...core.Option) (*Machine, error) {
	m := &Machine{ctx: ctx, s: s, rec: &tracecheck.Recorder{}, plans: map[core.Holder]core.Plan{}, runs: map[core.Holder]core.RunID{}, next: map[core.Holder]int{}}
	m.poster = core.NewWorkspace(s, coretest.NewClock(epoch), core.WithProcess("poster"), core.WithTracer(m.rec))
	for i := range procs {
		clock := coretest.NewClock(epoch.Add(time.Duration(ch.IntN("skew", 3)) * apiTTL / 2))
		o := append([]core.Option{core.WithProcess(fmt.Sprintf("p%d", i+1)), core.WithTracer(m.rec)}, opts...)
		hs := &hookStorage{Storage: s}
		m.stores = append(m.stores, hs)
		m.procs = append(m.procs, core.NewWorkspace(hs, clock, o...))
		m.clocks = append(m.clocks, clock)
	}
	for i := range 2 {
		id := core.ThreadID(fmt.Sprintf("%s-t%d", prefix, i+1))
		if err := m.poster.CreateThread(ctx, id); err != nil {
			return nil, err
		}
		m.threads = append(m.threads, id)
	}
	return m, nil
}

// protocolRefusal reports whether err refuses a call as out of the
// protocol: such a call must write and trace nothing.
func protocolRefusal(err error) bool {
	return errors.Is(err, core.ErrOutOfOrder) || errors.Is(err, core.ErrRoundOver) ||
		errors.Is(err, core.ErrInvalidArgument) || errors.Is(err, core.ErrHolderReused)
}

// Step makes one call chosen by ch and checks its effect.
func (m *Machine) Step(ch Chooser) error {
	m.calls++
	a := m.chooseArgs(ch)
	before, err := m.versions()
	if err != nil {
		return err
	}
	lines := m.rec.Len()
	what, err, broken := m.call(ch, a)
	if broken != nil {
		return broken
	}
	return m.checkEffect(fmt.Sprintf("call %d: p%d %s on %s (claim %s/%s)", m.calls, a.p+1, what, a.thread, a.claim.Thread, a.claim.Holder), err, before, lines)
}

// stepArgs are a step's chosen call and its arguments.
type stepArgs struct {
	call   int // Step's numbering: Post, Claim, Renew, ... RunEndThenStart
	p      int // the calling process
	ws     *core.Workspace
	thread core.ThreadID
	claim  core.Claim
	plan   core.Plan
	run    core.RunID
}

// chooseArgs picks a step's process, thread, claim, call and arguments.
func (m *Machine) chooseArgs(ch Chooser) stepArgs {
	p := ch.IntN("proc", len(m.procs))
	thread := m.threads[ch.IntN("thread", len(m.threads))]
	claim, owner := m.pickClaim(ch, thread)
	if owner >= 0 && ch.IntN("by-owner", 4) > 0 {
		p = owner // mostly the claim's own process; else another's
	}
	call := ch.IntN("call", 13)
	if n, ok := m.next[claim.Holder]; ok && ch.IntN("protocol", 2) == 0 {
		call = n
	}
	// Arguments are the claim's own plan or run half the time, else small
	// numbers: valid and invalid ones both come up.
	small := func(label string) int { return ch.IntN(label, 4) + 1 }
	plan, run := m.plans[claim.Holder], m.runs[claim.Holder]
	if ch.IntN("own-args", 2) == 0 {
		plan.Message, plan.Request = core.Seq(small("msg")), core.RequestID(small("req"))
		run = core.RunID(small("run"))
	}
	return stepArgs{call: call, p: p, ws: m.procs[p], thread: thread, claim: claim, plan: plan, run: run}
}

// call makes the step's call. err is the call's; broken is a broken
// promise of the call itself (RunEndThenStart's ended and err disagree).
func (m *Machine) call(ch Chooser, a stepArgs) (what string, err, broken error) {
	p, ws, thread, claim, plan, run := a.p, a.ws, a.thread, a.claim, a.plan, a.run
	switch a.call {
	case 0:
		what = "Post"
		_, err = m.poster.Post(m.ctx, thread, "m")
	case 1:
		// Holders from a small pool all processes share: some are
		// reused, by the same process (the Workspace refuses) or by
		// another (storage refuses: ErrHolderReused).
		h := core.Holder(fmt.Sprintf("h%d", ch.IntN("holder", 8)))
		what = fmt.Sprintf("Claim(%s)", h)
		var c core.Claim
		withPlan := ch.IntN("claim-then-plan", 3) == 0
		var pl core.Plan
		if withPlan {
			what = fmt.Sprintf("ClaimThenPlan(%s)", h)
			c, pl, err = ws.ClaimThenPlan(m.ctx, thread, h, apiTTL)
		} else {
			c, err = ws.Claim(m.ctx, thread, h, apiTTL)
		}
		if err == nil || errors.Is(err, core.ErrCommitUnknown) {
			m.claims, m.owners = append(m.claims, c), append(m.owners, p)
			m.next[h] = 5 // Plan
		}
		if withPlan && err == nil {
			m.plans[h] = pl
			m.next[h] = nextAfter(pl)
		}
	case 2:
		what = "Renew"
		err = ws.Renew(m.ctx, claim, apiTTL)
	case 3:
		what = "Release"
		err = ws.Release(m.ctx, claim)
	case 4:
		what = "Abandon"
		if len(plan.Runs) > 0 && ch.IntN("abandon-planned", 4) > 0 {
			run = plan.Runs[0]
		}
		if err = ws.Abandon(m.ctx, claim, run); err == nil {
			m.next[claim.Holder] = 5
		}
	case 5:
		what = "Plan"
		var p core.Plan
		if p, err = ws.Plan(m.ctx, claim); err == nil {
			m.plans[claim.Holder] = p
			m.next[claim.Holder] = nextAfter(p)
		}
	case 6:
		what = "RunStart"
		var r core.RunID
		if r, err = ws.RunStart(m.ctx, claim, plan.Message); err == nil {
			m.runs[claim.Holder] = r
			m.next[claim.Holder] = afterStart(ch)
		}
	case 7:
		what = "Reply"
		if err = ws.Reply(m.ctx, claim, plan.Request, plan.Message); err == nil {
			m.next[claim.Holder] = 5
		}
	case 8:
		what = "Ask"
		if _, err = ws.Ask(m.ctx, claim, run, "q"); err == nil {
			m.next[claim.Holder] = []int{9, 12}[ch.IntN("end", 2)]
		}
	case 9:
		what = "RunEnd"
		if err = ws.RunEnd(m.ctx, claim, run, ""); err == nil {
			m.next[claim.Holder] = 5
		}
	case 10:
		what = "Crash"
		// A quarter of the time the process renews the claim while the
		// Crash is under way (its read done, its line not yet traced), as
		// a renewal timer of its own would: the Renew must be refused.
		renewed, renewErr := false, error(nil)
		if ch.IntN("renew-during-crash", 4) == 0 {
			what = "Crash (a Renew of the claim during it)"
			m.stores[p].hook = func() { renewed, renewErr = true, ws.Renew(m.ctx, claim, apiTTL) }
		}
		err = ws.Crash(m.ctx, claim)
		m.stores[p].hook = nil
		if renewed && renewErr == nil {
			return what, err, fmt.Errorf("call %d: a Renew during the round's Crash was accepted", m.calls)
		}
	case 11:
		what = "Advance"
		m.clocks[p].Advance(time.Duration(ch.IntN("advance", 5)) * apiTTL / 4)
	case 12:
		// RunEndThenStart: with no start (backlog -1), or from a backlog
		// of 0 to 2; in half of them releasing when nothing is left.
		backlog := ch.IntN("backlog", 4) - 1
		release := ch.IntN("release", 2) == 1
		what = fmt.Sprintf("RunEndThenStart(%d, release=%v)", backlog, release)
		var (
			pl      core.Plan
			started core.RunID
		)
		pl, started, err = ws.RunEndThenStart(m.ctx, claim, run, "", backlog, release)
		switch {
		case started != 0 && (err != nil || pl.Kind != core.PlanRun || backlog < 0):
			return what, err, fmt.Errorf("call %d: RunEndThenStart started run %d with plan %s and error %v", m.calls, started, pl.Kind, err)
		case err == nil && started != 0:
			m.plans[claim.Holder], m.runs[claim.Holder] = pl, started
			m.next[claim.Holder] = afterStart(ch)
		case err == nil:
			m.plans[claim.Holder] = pl
			m.next[claim.Holder] = nextAfter(pl) // after a release, a Release the round refuses
		}
	}
	return what, err, nil
}

// afterStart is the protocol-next call after a run's start: Ask, RunEnd
// or RunEndThenStart.
func afterStart(ch Chooser) int {
	return []int{8, 9, 12}[ch.IntN("ask-or-end", 3)]
}

// checkEffect checks that the trace so far is accepted, and that a call
// refused as out of the protocol wrote and traced nothing.
func (m *Machine) checkEffect(what string, err error, before []uint64, lines int) error {
	if _, cerr := tracecheck.Check(m.rec.Lines()); cerr != nil {
		return fmt.Errorf("%s returned %v; the trace is rejected: %w", what, err, cerr)
	}
	if protocolRefusal(err) {
		after, verr := m.versions()
		if verr != nil {
			return verr
		}
		if !slices.Equal(before, after) || m.rec.Len() != lines {
			return fmt.Errorf("%s was refused (%v) but wrote or traced: versions %v -> %v, %d -> %d lines", what, err, before, after, lines, m.rec.Len())
		}
	}
	return nil
}

// nextAfter is the protocol-next call (Step's numbering) after a plan:
// Release, Abandon, RunStart or Reply.
func nextAfter(p core.Plan) int {
	switch p.Kind {
	case core.PlanAbandon:
		return 4
	case core.PlanRun:
		return 6
	case core.PlanReply:
		return 7
	}
	return 3
}

// pickClaim picks a claim of any process, the zero claim, or a hand-built
// one.
// pickClaim picks a claim of any process (most often a recent one) and
// its owner, or a hand-built claim or the zero claim (owner -1).
func (m *Machine) pickClaim(ch Chooser, thread core.ThreadID) (core.Claim, int) {
	n := ch.IntN("claim", len(m.claims)+2)
	switch {
	case n < len(m.claims) && ch.IntN("latest", 3) > 0:
		i := len(m.claims) - 1 - ch.IntN("recent", min(3, len(m.claims)))
		return m.claims[i], m.owners[i]
	case n < len(m.claims):
		return m.claims[n], m.owners[n]
	case n == len(m.claims):
		return core.Claim{Thread: thread, Holder: "h0"}, -1
	}
	return core.Claim{}, -1
}

// versions reads every thread's version.
func (m *Machine) versions() ([]uint64, error) {
	var out []uint64
	for _, id := range m.threads {
		th, err := m.poster.Thread(m.ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, th.Version)
	}
	return out, nil
}

// Lines returns the trace so far.
func (m *Machine) Lines() []core.TraceEvent { return m.rec.Lines() }

// hookStorage is one process's view of the storage: it runs a one-shot
// hook once the next transaction returns, so that a call can be made
// while another call of the same process is under way.
type hookStorage struct {
	core.Storage
	hook func()
}

func (s *hookStorage) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	err := s.Storage.Update(ctx, fn)
	s.fire()
	return err
}

// View reads read-only when the storage can, else in a transaction.
func (s *hookStorage) View(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	var err error
	if v, ok := s.Storage.(core.Viewer); ok {
		err = v.View(ctx, fn)
	} else {
		err = s.Storage.Update(ctx, fn)
	}
	s.fire()
	return err
}

func (s *hookStorage) fire() {
	if h := s.hook; h != nil {
		s.hook = nil
		h()
	}
}
