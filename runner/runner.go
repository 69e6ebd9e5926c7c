package runner

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/threadclaim/threadclaim/core"
)

// Runner works threads: it claims a thread with a fresh holder, turns its
// messages into runs and replies, and releases it. Many runners, in many
// processes, share one storage; the fenced writes keep a message from being
// consumed twice whatever their timing.
type Runner struct {
	cfg     Config
	ws      *core.Workspace
	tracer  trace.Tracer
	metrics *metrics
}

// New returns a Runner, or an error naming what is wrong with cfg.
func New(cfg Config) (*Runner, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.MeterProvider)
	if err != nil {
		return nil, err
	}
	return &Runner{
		cfg:     cfg,
		ws:      cfg.Workspace,
		tracer:  cfg.TracerProvider.Tracer("github.com/threadclaim/threadclaim/runner"),
		metrics: m,
	}, nil
}

// Config returns the runner's configuration with its defaults filled in.
func (r *Runner) Config() Config { return r.cfg }

// Work takes one turn on the thread to its end, renewing the claim every
// RenewEvery while it lasts, and returns the turn's outcome. The error is
// the one behind a failed or busy turn: errors.Is(err, core.ErrThreadBusy)
// for a fenced refusal.
//
// When ctx ends the turn stops gracefully: the running agent's context is
// cancelled, its run's end is recorded, and the claim is released
// (OutcomeStopped). Storage calls are not cut off by ctx, since a write
// cut off in flight may or may not have committed; they are cut off only
// if the turn has not ended ShutdownGrace after ctx did.
func (r *Runner) Work(ctx context.Context, thread core.ThreadID) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return OutcomeStopped, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	t := r.NewTurn(thread)
	stopWatching := context.AfterFunc(ctx, func() {
		t.stop()
		select {
		case <-r.cfg.Clock.After(r.cfg.ShutdownGrace):
			cancel()
		case <-sctx.Done():
		}
	})
	defer stopWatching()
	if t.Step(sctx) {
		return t.Outcome()
	}
	// The renewal timer. stop ends its wait, never a renewal in flight:
	// one cut off after its commit would be a write nobody traced.
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-sctx.Done():
				return
			case <-r.cfg.Clock.After(r.cfg.RenewEvery):
				if err := t.Renew(sctx); err != nil {
					return
				}
			}
		}
	}()
	for !t.Step(sctx) {
	}
	close(stop)
	<-done
	return t.Outcome()
}

// Run works every thread with messages to consume, one turn at a time,
// until ctx ends; then it returns ctx's error. It looks for work every
// PollEvery, and at once when Wake delivers; once Wake is closed, it polls.
// Failed turns do not stop it: another claim has the thread, or storage
// will be tried again. When ctx ends, the turn in progress stops
// gracefully (see Work).
func (r *Runner) Run(ctx context.Context) error {
	wake := r.cfg.Wake
	for {
		// A storage failure listing or reading threads is tried again at
		// the next poll; each turn's own failures are in its span.
		_ = r.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.cfg.Clock.After(r.cfg.PollEvery):
		case _, ok := <-wake:
			if !ok {
				wake = nil // closed: polling alone from now on
			}
		}
	}
}

// RunOnce takes a turn on each thread that has a message to consume or a
// run an earlier claim left active (core.Workspace.Pending), and returns
// the storage error listing them, if any.
func (r *Runner) RunOnce(ctx context.Context) error {
	ids, err := r.ws.Pending(ctx)
	if err != nil {
		return fmt.Errorf("list threads with work: %w", err)
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_, _ = r.Work(ctx, id)
	}
	return nil
}
