package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/threadclaim/threadclaim/core"
)

// Agent runs one run: it is given the prompt and may ask the person
// questions, which later messages answer through replies. The run ends
// when Run returns, with its error or without; a Run that panics fails
// its run the same way (its error says so, with the panic's value and
// stack), and the runner goes on.
type Agent interface {
	Run(ctx context.Context, s *Session) error
}

// errAgentPanicked is wrapped by the run's error (RunHandle.Wait) when
// its agent panicked: the runner recovers the panic, records the run's
// end as for an agent that returned an error, and goes on.
var errAgentPanicked = errors.New("runner: the agent panicked")

// AgentFunc adapts a function to Agent.
type AgentFunc func(ctx context.Context, s *Session) error

// Run calls f.
func (f AgentFunc) Run(ctx context.Context, s *Session) error { return f(ctx, s) }

// Delivered is what a run was handed: the claim it runs under, its id, its
// prompt, and the taken cursor its start saved.
type Delivered struct {
	Claim  core.Claim
	Run    core.RunID
	Prompt core.Message
	Taken  core.Seq
}

// Session is an agent's view of its run; the runner makes it, and the
// calls of one it did not make (the zero Session), and a call given a nil
// ctx, return an error for which errors.Is(err, core.ErrInvalidArgument)
// holds, and change nothing. ctx passed to Agent.Run is
// cancelled when the runner loses the claim, or when the record of the
// run's steering fails (Steer), until the agent waits for an answer
// (Await); then only when the runner stops.
//
// While its run works, the agent may ask the person a question (Ask) and
// wait for the answer (Await), hear the messages posted after its prompt
// (Steer), and set its answer to the person (Output). The run's calls
// keep the specification's order: Ask, Steer and the run's end each
// record the steering last given first.
type Session struct {
	// Delivered is what the run was handed. It is the agent's copy: the
	// session's calls go by their own, which a change of it leaves as it
	// was.
	Delivered Delivered
	own       Delivered // what the run was handed, as the session's calls use it
	ws        *core.Workspace
	r         *Runner
	turn      *Turn

	// callMu orders the run's calls that give or write (Ask, Steer, the
	// run's end) and guards steer.
	callMu sync.Mutex
	steer  steering

	keep    func() // takes the agent's context from its turn
	outMu   sync.Mutex
	out     string // the run's output, recorded with its end
	endOnce sync.Once
	ended   chan struct{} // closed once Await recorded the run's end
	endErr  error
}

// Output sets the run's output: what the agent answers the person. It is
// recorded with the run's end, in the same transaction (the thread's Run
// has it as Output, and Workspace.Follow delivers it as a RunOutput
// event), and is no message of the thread: it never becomes a prompt.
// A later call replaces the text. The run's end is recorded when the
// agent returns, or by Await; after either (from a goroutine the agent
// left behind) Output returns core.ErrOutOfOrder and the text is not
// recorded. A text storage could not keep (core.CheckText) is refused
// with core.ErrInvalidArgument and the output left as it was. An
// abandoned run's end is refused, and its output with it.
func (s *Session) Output(text string) error {
	if err := s.made(); err != nil {
		return err
	}
	if err := core.CheckText("run output", text); err != nil {
		return err // refused now, not at the run's end
	}
	returned := s.agentReturned()
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if returned || s.endedRun() {
		return fmt.Errorf("output of run %d of thread %q after its end: %w", s.own.Run, s.own.Claim.Thread, core.ErrOutOfOrder)
	}
	s.out = text
	return nil
}

// output returns the run's output so far.
func (s *Session) output() string {
	if s == nil {
		return ""
	}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.out
}

// Ask opens a request of the run. It returns core.ErrRunAbandoned once a
// later claim abandoned the run (or refused the record of its steering),
// and core.ErrOutOfOrder once the run has ended (after Await). It records
// the steering last given (Steer) first.
func (s *Session) Ask(ctx context.Context, question string) (core.RequestID, error) {
	if err := s.madeWith(ctx, "Ask"); err != nil {
		return 0, err
	}
	s.callMu.Lock()
	defer s.callMu.Unlock()
	if err := s.recordPending(ctx); err != nil {
		return 0, err
	}
	if s.steer.closed {
		return 0, fmt.Errorf("question of run %d of thread %q after its end: %w", s.own.Run, s.own.Claim.Thread, core.ErrOutOfOrder)
	}
	var req core.RequestID
	err := s.turn.round(func() (err error) { req, err = s.ws.Ask(ctx, s.own.Claim, s.own.Run, question); return err })
	if err == nil {
		s.steer.asked = append(s.steer.asked, req)
	}
	return req, err
}

// Await waits for the answer to a request the run asked, and returns the
// message that answered it. It returns core.ErrUnknownRequest, and leaves
// the run as it is, for a request this run's Ask did not return, and
// core.ErrOutOfOrder once the agent returned.
//
// The specification answers a request only while no run of the thread is
// active, so Await first records the run's end (RunEnd, not fenced): the
// agent goes on waiting outside its run, and can ask nothing more. It
// returns core.ErrRunAbandoned if a later claim abandoned the run before
// that, or refused the record of its steering (Steer), which it makes
// first. The runner's turn then goes on: when the answer is posted, the
// turn that holds the thread (this runner's, or another process's once
// this one released it) commits the Reply, fenced as ever. This runner
// wakes Await as soon as it commits the Reply itself; otherwise Await
// reads the request through the workspace every PollEvery on the runner's
// clock. It returns ctx's error when ctx ends first; the agent's ctx now
// ends only when the runner stops, so give ctx a deadline. A ctx that
// has ended already changes nothing: the run goes on as it was. The
// run's end is not cut off by ctx (a write cut off in flight may or may
// not commit), as the steering's record is not.
func (s *Session) Await(ctx context.Context, req core.RequestID) (core.Message, error) {
	if err := s.madeWith(ctx, "Await"); err != nil {
		return core.Message{}, err
	}
	s.callMu.Lock()
	returned, failed, asked := s.steer.returned, s.steer.err, slices.Contains(s.steer.asked, req)
	s.callMu.Unlock()
	switch {
	case returned:
		return core.Message{}, fmt.Errorf("await request %d of run %d of thread %q after the agent returned: %w", req, s.own.Run, s.own.Claim.Thread, core.ErrOutOfOrder)
	case !asked && failed == nil: // (a failed steering record ends the run below, and says so)
		return core.Message{}, fmt.Errorf("await request %d, which run %d of thread %q did not ask: %w", req, s.own.Run, s.own.Claim.Thread, core.ErrUnknownRequest)
	case ctx.Err() != nil && failed == nil && !s.endedRun():
		return core.Message{}, ctx.Err() // the run goes on as it was
	}
	s.endOnce.Do(func() {
		// A write cut off in flight may or may not commit: the run's end,
		// as the steering's record, is not cut off by ctx.
		ctx := context.WithoutCancel(ctx)
		if err := s.closeRun(ctx); err != nil {
			// The steering's record failed: the run's end is not
			// recorded, and the turn ends as the record's error says.
			s.endErr = err
			close(s.ended)
			return
		}
		if s.keep != nil {
			s.keep()
		}
		s.outMu.Lock() // no Output between the end and its record
		s.endErr = s.turn.round(func() error { return s.ws.RunEnd(ctx, s.own.Claim, s.own.Run, s.out) })
		close(s.ended)
		s.outMu.Unlock()
	})
	if s.endErr != nil {
		return core.Message{}, s.endErr
	}
	thread := s.own.Claim.Thread
	for {
		woken, cancel := s.r.awaitAnswer(thread, req)
		m, ok, err := s.ws.Answer(ctx, thread, req)
		if err != nil || ok {
			cancel()
			return m, err
		}
		select {
		case <-woken:
		case <-s.r.cfg.Clock.After(s.r.cfg.PollEvery):
		case <-ctx.Done():
			cancel()
			return core.Message{}, ctx.Err()
		}
		cancel()
	}
}

// made refuses a Session the runner did not make (a zero Session, say,
// in an agent's own test), whose calls would reach no run.
func (s *Session) made() error {
	if s == nil || s.turn == nil {
		return fmt.Errorf("%w: a Session the runner did not make (only the one Agent.Run is given has a run)", core.ErrInvalidArgument)
	}
	return nil
}

// madeWith is made for a call given ctx, which must not be nil: a nil one
// reached the steering's record or the run's end, whose refusal gave the
// round up.
func (s *Session) madeWith(ctx context.Context, call string) error {
	if err := s.made(); err != nil {
		return err
	}
	if ctx == nil {
		return fmt.Errorf("%w: Session.%s given a nil context", core.ErrInvalidArgument, call)
	}
	return nil
}

// endedRun reports whether Await recorded the run's end.
func (s *Session) endedRun() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// RunHandle follows one planned run from its start to its end.
type RunHandle struct {
	// Claim is the claim the run was planned under.
	Claim core.Claim
	// Prompt is the message it was planned for.
	Prompt core.Seq

	mu   sync.Mutex
	run  core.RunID
	done chan struct{}
	err  error
}

func newRunHandle(c core.Claim, prompt core.Seq) *RunHandle {
	return &RunHandle{Claim: c, Prompt: prompt, done: make(chan struct{})}
}

// RunID returns the run's id, 0 until its start is recorded.
func (h *RunHandle) RunID() core.RunID {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.run
}

func (h *RunHandle) started(id core.RunID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.run = id
}

func (h *RunHandle) finish(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.done:
		return
	default:
	}
	h.err = err
	close(h.done)
}

// Wait waits for the run to finish. It returns nil once the run's end is
// recorded; an error for which errors.Is(err, core.ErrThreadBusy) holds
// when the fence refused its start (it consumed nothing);
// core.ErrRunAbandoned when a later claim abandoned it (its end, or the
// record of its steering, was refused); the agent's error,
// or another storage error, otherwise; ctx's error if ctx ends first.
// A RunHandle the runner did not make (the zero one, which no run ends)
// and a nil ctx are refused with core.ErrInvalidArgument.
func (h *RunHandle) Wait(ctx context.Context) error {
	switch {
	case h == nil || h.done == nil:
		return fmt.Errorf("%w: a RunHandle the runner did not make (Config.OnRun and TurnReport.Runs hand them out)", core.ErrInvalidArgument)
	case ctx == nil:
		return fmt.Errorf("%w: RunHandle.Wait given a nil context", core.ErrInvalidArgument)
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		select {
		case <-h.done: // finished already: its outcome, not ctx's
		default:
			return ctx.Err()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}
