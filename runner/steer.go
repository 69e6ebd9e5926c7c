package runner

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/threadclaim/threadclaim/core"
)

// steering is a session's state of steering: the record of the latest
// message given, which every later call of the run waits for, so that the
// run's calls keep the specification's order (between Steer and its
// record, SteerRecord or SteerRefused, the round takes only Renew and
// Crash). Session.callMu guards it.
type steering struct {
	// closed: the run's end was taken up (Await, or the turn once the
	// agent returned); no Steer or Ask follows.
	closed bool
	// record is closed when the latest record returned; nil until a
	// message is given. err and recorded are set before it closes.
	record chan struct{}
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
// (core.Workspace.Steer) and hands it back, and its record
// (core.Workspace.SteerRecord), which consumes it, starts as Steer
// returns. Every later call of the run (Ask, Await's end of the run, the
// next Steer, the runner's end of the run when the agent returns) waits
// for that record first. The record is not fenced by the claim: a run
// keeps its steering after its claim lapsed, as it keeps its end. Once a
// later claim abandoned the run, though, it is refused: the message was
// given and not consumed, and the thread's next holder gives it again
// (ADR-0069's one exception). The round then ends as a refused end does
// (OutcomeLost, nothing more written, no Release): the agent's ctx is
// cancelled, and the run's later calls and its RunHandle.Wait return an
// error for which errors.Is(err, core.ErrRunAbandoned) holds. A record
// that fails otherwise cancels the agent's ctx as well; the turn then
// gives its round up (OutcomeError), and later calls return that error.
//
// Steer returns core.ErrRunAbandoned once a later claim abandoned the run
// (nothing is given), and core.ErrOutOfOrder once the run's end was taken
// up (Await, or the agent returned).
func (s *Session) Steer(ctx context.Context) (core.Message, bool, error) {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	if err := s.waitRecord(); err != nil {
		return core.Message{}, false, err
	}
	if s.steer.closed {
		return core.Message{}, false, fmt.Errorf("steering of run %d of thread %q after its end: %w", s.Delivered.Run, s.Delivered.Claim.Thread, core.ErrOutOfOrder)
	}
	m, ok, err := s.ws.Steer(ctx, s.Delivered.Claim, s.Delivered.Run)
	if err != nil || !ok {
		return core.Message{}, false, err
	}
	s.given(ctx, m)
	return m, true, nil
}

// given counts and traces the steering m given, and starts its record.
// callMu is held.
func (s *Session) given(ctx context.Context, m core.Message) {
	t := s.turn
	attrs := []attribute.KeyValue{attribute.Int64("run", int64(s.Delivered.Run)), attribute.Int64("message", int64(m.Seq))}
	s.r.metrics.steering.Add(ctx, 1, metric.WithAttributes(attribute.String("action", string(core.ActionSteer))))
	t.event("steer", attrs...)
	done := make(chan struct{})
	s.steer.record = done
	// A write cut off in flight may or may not commit: the record is not
	// cut off by the agent's context.
	rctx := context.WithoutCancel(ctx)
	go func() {
		defer close(done)
		err := s.ws.SteerRecord(rctx, s.Delivered.Claim, s.Delivered.Run, m.Seq)
		switch {
		case err == nil:
			s.steer.recorded++
			s.r.metrics.steering.Add(rctx, 1, metric.WithAttributes(attribute.String("action", string(core.ActionSteerRecord))))
			s.r.metrics.latency.Record(rctx, s.r.cfg.Clock.Now().Sub(m.PostedAt).Seconds())
			t.event("steer_recorded", attrs...)
			return
		case errors.Is(err, core.ErrRunAbandoned):
			s.r.metrics.steering.Add(rctx, 1, metric.WithAttributes(attribute.String("action", string(core.ActionSteerRefused))))
			t.event("steer_refused", attrs...)
		}
		s.steer.err = fmt.Errorf("steering %d of run %d of thread %q: %w", m.Seq, s.Delivered.Run, s.Delivered.Claim.Thread, err)
		t.cancelAgent()
	}()
}

// waitRecord waits for the record of the latest steering given, and
// returns the first record's error. callMu is held. The record is a
// storage call, which returns; it is not cut off.
func (s *Session) waitRecord() error {
	if s.steer.record != nil {
		<-s.steer.record
	}
	return s.steer.err
}

// closeRun takes up the run's end: no Steer or Ask follows. It waits for
// the record of the latest steering given and returns the first record's
// error.
func (s *Session) closeRun() error {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	s.steer.closed = true
	return s.waitRecord()
}

// steeringRecorded returns, once, how many messages the run's steering
// consumed; 0 after the first call. The run's end was taken up.
func (s *Session) steeringRecorded() int {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	_ = s.waitRecord() // its error is the turn's, from closeRun
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
