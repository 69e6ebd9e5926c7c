package runner

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/threadclaim/threadclaim/core"
)

// steering is a session's state of steering: the message last given and
// not recorded yet, which the run's next write records first, so that the
// run's calls keep the specification's order (between Steer and its
// record, SteerRecord or SteerRefused, the round takes only Renew and
// Crash). Session.callMu guards it.
type steering struct {
	// closed: the run's end was taken up (Await, or the turn once the
	// agent returned); no Steer or Ask follows.
	closed bool
	// returned: the agent returned; no call of its session follows.
	returned bool
	// asked are the requests the run opened (Ask): what Await waits for.
	asked []core.RequestID
	// pending is the message given and not recorded yet; nil when none.
	pending *core.Message
	// err is the first record that failed (core.ErrRunAbandoned when
	// refused): the run's later calls return it.
	err error
	// recorded counts the messages whose record committed: they count
	// as consumed by the turn.
	recorded int
	// counted: the turn has counted recorded.
	counted bool
}

// Steer gives the agent the next message posted to the thread after its
// run's prompt, oldest first, as steering: ok is false when there is none
// now, or when a request of the thread is open (its answer is that
// message: Await). Call it between steps of the agent's work, as often as
// it cares to hear; each message is given once.
//
// Given first, recorded after: Steer reads the message
// (core.Workspace.Steer) and hands it back; its record
// (core.Workspace.SteerRecord), which consumes it, is the run's next
// write: the next Steer, Ask or Await records it first, and when the agent
// returns, the turn records it as a step of its own (StepSteerRecord)
// before the run's end. The record is not fenced by the claim: a run
// keeps its steering after its claim lapsed, as it keeps its end. Once a
// later claim abandoned the run, though, it is refused: the message was
// given and not consumed, and the thread's next holder gives it again
// (ADR-0069's one exception; the window is the agent's own work on the
// message). The round then ends as a refused end does (OutcomeLost,
// nothing more written, no Release): the agent's ctx is cancelled, and
// the run's later calls and its RunHandle.Wait return an error for which
// errors.Is(err, core.ErrRunAbandoned) holds. A record that fails
// otherwise cancels the agent's ctx as well; the turn then gives its round
// up (OutcomeError), and later calls return that error.
//
// Steer returns core.ErrRunAbandoned once a later claim abandoned the run
// (nothing is given), and core.ErrOutOfOrder once the run's end was taken
// up (Await, or the agent returned).
func (s *Session) Steer(ctx context.Context) (core.Message, bool, error) {
	if err := s.madeWith(ctx, "Steer"); err != nil {
		return core.Message{}, false, err
	}
	s.callMu.Lock()
	defer s.callMu.Unlock()
	if err := s.recordPending(ctx); err != nil {
		return core.Message{}, false, err
	}
	if s.steer.closed {
		return core.Message{}, false, fmt.Errorf("steering of run %d of thread %q after its end: %w", s.own.Run, s.own.Claim.Thread, core.ErrOutOfOrder)
	}
	var (
		m  core.Message
		ok bool
	)
	err := s.turn.round(func() (err error) { m, ok, err = s.ws.Steer(ctx, s.own.Claim, s.own.Run); return err })
	if err != nil || !ok {
		return core.Message{}, false, err
	}
	s.r.metrics.steering.Add(ctx, 1, metric.WithAttributes(attribute.String("action", string(core.ActionSteer))))
	s.turn.event("steer", steerAttrs(s, m)...)
	s.steer.pending = &m
	return m, true, nil
}

func steerAttrs(s *Session, m core.Message) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.Int64("run", int64(s.own.Run)), attribute.Int64("message", int64(m.Seq))}
}

// recordPending records the steering given and not recorded yet, if any,
// and returns the first record's error. callMu is held. A write cut off
// in flight may or may not commit, so the record is not cut off by ctx.
func (s *Session) recordPending(ctx context.Context) error {
	m := s.steer.pending
	if m == nil {
		return s.steer.err
	}
	s.steer.pending = nil
	ctx = context.WithoutCancel(ctx)
	t := s.turn
	err := t.round(func() error { return s.ws.SteerRecord(ctx, s.own.Claim, s.own.Run, m.Seq) })
	switch {
	case err == nil:
		s.steer.recorded++
		s.r.metrics.steering.Add(ctx, 1, metric.WithAttributes(attribute.String("action", string(core.ActionSteerRecord))))
		s.r.metrics.latency.Record(ctx, s.r.cfg.Clock.Now().Sub(m.PostedAt).Seconds())
		t.event("steer_recorded", steerAttrs(s, *m)...)
		return nil
	case errors.Is(err, core.ErrRunAbandoned):
		s.r.metrics.steering.Add(ctx, 1, metric.WithAttributes(attribute.String("action", string(core.ActionSteerRefused))))
		t.event("steer_refused", steerAttrs(s, *m)...)
	}
	s.steer.err = fmt.Errorf("steering %d of run %d of thread %q: %w", m.Seq, s.own.Run, s.own.Claim.Thread, err)
	t.cancelAgent()
	return s.steer.err
}

// closeRun takes up the run's end: no Steer or Ask follows. It records
// the steering given and not recorded yet, and returns the first record's
// error.
func (s *Session) closeRun(ctx context.Context) error {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	s.steer.closed = true
	return s.recordPending(ctx)
}

// closeAgent takes up the run's end once the agent returned, without
// recording: it reports whether steering is left to record
// (StepSteerRecord), and the error of a record the agent's call made that
// failed (the round then ended with it, or was given up).
func (s *Session) closeAgent() (pending bool, failed error) {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	s.steer.closed, s.steer.returned = true, true
	return s.steer.pending != nil, s.steer.err
}

// agentReturned reports whether the agent returned: a call of its session
// after that (from a goroutine it left behind) is refused.
func (s *Session) agentReturned() bool {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	return s.steer.returned
}

// steeringRecorded returns, once, how many messages the run's steering
// consumed; 0 after the first call. The run's end was taken up.
func (s *Session) steeringRecorded() int {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	if s.steer.counted {
		return 0
	}
	s.steer.counted = true
	return s.steer.recorded
}

// cancelAgent cancels the running agent's context: its steering's record
// failed.
func (t *Turn) cancelAgent() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
	}
}
