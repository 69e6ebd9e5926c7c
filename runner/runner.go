package runner

import (
	"context"
	"fmt"
	"sync"
	"time"

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

	// detached counts agents that wait for an answer past their turn.
	detached sync.WaitGroup

	mu      sync.Mutex
	waiters map[answerKey][]chan struct{} // Session.Await calls, by request
}

type answerKey struct {
	thread core.ThreadID
	req    core.RequestID
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
	t.outer = ctx
	stopWatching := context.AfterFunc(ctx, func() {
		t.Stop()
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

// Run works every thread with messages to consume until ctx ends; then it
// waits for its turns to stop gracefully (see Work) and returns ctx's
// error. It keeps up to MaxConcurrentTurns turns going at once, each on
// its own thread, and looks for work every PollEvery, at once when Wake
// delivers (once Wake is closed, it polls), and whenever a turn ends. It
// starts its turns from a rotating point of the list of threads with work,
// so that a thread a bounded turn left (OutcomeYielded) waits behind the
// others. Failed turns do not stop it: another claim has the thread, or
// storage will be tried again. Each turn is reported to Logger and OnTurn.
//
// Run spends no storage round trip it can do without, since those are
// what bounds how many messages a fleet consumes a second: it does not
// look for work while all its turns are going (a turn's end makes it
// look), and a thread whose claim it found held by another holder
// (OutcomeBusy) it leaves out of its looks for PollEvery, rather than
// claim it again at every wake-up while the other holder works it (that
// holder's turn plans every message posted meanwhile, and a storage that
// wakes runners, as the PostgreSQL Store does, wakes them again when the
// holder releases a thread with work left).
func (r *Runner) Run(ctx context.Context) error {
	wake := r.cfg.Wake
	slots := make(chan struct{}, r.cfg.MaxConcurrentTurns)
	ended := make(chan struct{}, 1)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		busy  = map[core.ThreadID]bool{}
		held  = map[core.ThreadID]time.Time{} // threads found claimed by another, and when
		start int
	)
	defer r.detached.Wait()
	defer wg.Wait()
	for {
		if len(slots) == cap(slots) {
			// Every turn is going: nothing found could start. A turn's
			// end makes Run look.
			if !r.wait(ctx, &wake, ended) {
				return ctx.Err()
			}
			continue
		}
		ids, err := r.ws.Pending(ctx)
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("list threads with work", "err", err)
		}
		if n := len(ids); n > 0 {
			ids = append(ids[start%n:], ids[:start%n]...)
		}
		now := r.cfg.Clock.Now()
		mu.Lock()
		for id, at := range held {
			if now.Sub(at) >= r.cfg.PollEvery {
				delete(held, id)
			}
		}
		mu.Unlock()
	launch:
		for _, id := range ids {
			if ctx.Err() != nil {
				break
			}
			mu.Lock()
			if _, other := held[id]; busy[id] || other {
				mu.Unlock()
				continue
			}
			select {
			case slots <- struct{}{}:
			default:
				mu.Unlock()
				break launch
			}
			busy[id] = true
			mu.Unlock()
			start++
			wg.Add(1)
			go func() {
				defer wg.Done()
				o, _ := r.Work(ctx, id)
				mu.Lock()
				delete(busy, id)
				if o == OutcomeBusy {
					held[id] = r.cfg.Clock.Now()
				}
				mu.Unlock()
				<-slots
				select {
				case ended <- struct{}{}:
				default:
				}
			}()
		}
		if !r.wait(ctx, &wake, ended) {
			return ctx.Err()
		}
	}
}

// wait waits for a reason to look for work: PollEvery passing, a turn's
// end, or a wake-up (once wake is closed, polling alone). It returns false
// when ctx ended.
func (r *Runner) wait(ctx context.Context, wake *<-chan struct{}, ended <-chan struct{}) bool {
	select {
	case <-ctx.Done():
		return false
	case <-r.cfg.Clock.After(r.cfg.PollEvery):
	case <-ended:
	case _, ok := <-*wake:
		if !ok {
			*wake = nil // closed: polling alone from now on
		}
	}
	return true
}

// RunOnce takes a turn, one at a time, on each thread that has a message
// to consume or a run an earlier claim left active
// (core.Workspace.Pending), and returns the storage error listing them, if
// any.
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

// answered wakes the Session.Await calls of this runner that wait for the
// request's answer, which the runner has just committed.
func (r *Runner) answered(thread core.ThreadID, req core.RequestID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := answerKey{thread, req}
	for _, ch := range r.waiters[k] {
		close(ch)
	}
	delete(r.waiters, k)
}

// awaitAnswer registers a wait for the request's answer; the channel is
// closed when this runner commits it. cancel drops the registration.
func (r *Runner) awaitAnswer(thread core.ThreadID, req core.RequestID) (ch chan struct{}, cancel func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiters == nil {
		r.waiters = map[answerKey][]chan struct{}{}
	}
	k := answerKey{thread, req}
	ch = make(chan struct{})
	r.waiters[k] = append(r.waiters[k], ch)
	return ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		ws := r.waiters[k]
		for i, c := range ws {
			if c == ch {
				r.waiters[k] = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(r.waiters[k]) == 0 {
			delete(r.waiters, k)
		}
	}
}
