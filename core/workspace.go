package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Fences says which writes check their claim's holder. Every field is true
// in a Workspace unless a test switches it off with WithFencesForTesting.
type Fences struct {
	Start   bool // RunStart: consumes the run's prompt
	Reply   bool // Reply: consumes the answer
	Abandon bool // Abandon: ends an earlier holder's run
}

// AllFences returns every fence on: the only setting a deployment uses.
func AllFences() Fences { return Fences{Start: true, Reply: true, Abandon: true} }

// Option configures a Workspace.
type Option func(*Workspace)

// WithProcess names the process in trace lines. Default "".
func WithProcess(name string) Option { return func(w *Workspace) { w.proc = name } }

// WithTracer sets where trace lines go. Default none: nothing is traced.
func WithTracer(t Tracer) Option { return func(w *Workspace) { w.tracer = t } }

// WithFencesForTesting switches fences off. It exists for mutation tests,
// which show that the checks catch the unfenced workspace; no deployment
// setting reaches it.
func WithFencesForTesting(f Fences) Option { return func(w *Workspace) { w.fences = f } }

// Workspace writes threads through a Storage under claims. Each runner
// process has its own, with its own clock; many share one Storage. It is
// safe for concurrent use.
type Workspace struct {
	storage Storage
	clock   Clock
	proc    string
	tracer  Tracer
	fences  Fences
	mutants Mutants
}

// NewWorkspace returns a Workspace over s whose lease expiries are stamped
// with clock.
func NewWorkspace(s Storage, clock Clock, opts ...Option) *Workspace {
	w := &Workspace{storage: s, clock: clock, fences: AllFences()}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Process returns the process name trace lines carry.
func (w *Workspace) Process() string { return w.proc }

// Now reads the workspace's clock.
func (w *Workspace) Now() time.Time { return w.clock.Now() }

func (w *Workspace) trace(ev *TraceEvent) {
	if w.tracer == nil || ev == nil {
		return
	}
	ev.Proc = w.proc
	w.tracer.Trace(*ev)
}

// update runs fn and, once the transaction has ended, traces the line fn
// left: a write's or a read's line when the transaction committed, a
// refusal's when fn returned ErrThreadBusy or ErrRunAbandoned (nothing was
// written), none otherwise. A storage whose transactions keep trace lines
// (TraceLog) gets each write's line before the commit.
func (w *Workspace) update(ctx context.Context, fn func(ctx context.Context, tx Transaction, line **TraceEvent) error) error {
	return w.traced(ctx, w.storage.Update, fn)
}

// read is update for an action that only reads: in a read-only
// transaction when the storage is a Viewer.
func (w *Workspace) read(ctx context.Context, fn func(ctx context.Context, tx Transaction, line **TraceEvent) error) error {
	if v, ok := w.storage.(Viewer); ok {
		return w.traced(ctx, v.View, fn)
	}
	return w.update(ctx, fn)
}

// view runs an untraced read, read-only when the storage is a Viewer.
func (w *Workspace) view(ctx context.Context, fn func(ctx context.Context, tx Transaction) error) error {
	if v, ok := w.storage.(Viewer); ok {
		return v.View(ctx, fn)
	}
	return w.storage.Update(ctx, fn)
}

type runTx func(ctx context.Context, fn func(ctx context.Context, tx Transaction) error) error

func (w *Workspace) traced(ctx context.Context, run runTx, fn func(ctx context.Context, tx Transaction, line **TraceEvent) error) error {
	var line *TraceEvent
	var call int64
	clock, timed := w.tracer.(TraceClock)
	if timed {
		call = clock.TraceNow()
	}
	err := run(ctx, func(ctx context.Context, tx Transaction) error {
		line = nil
		if err := fn(ctx, tx, &line); err != nil {
			return err
		}
		if log, ok := tx.(TraceLog); ok && w.tracer != nil && line != nil && !line.Read {
			l := *line
			l.Proc = w.proc
			return log.LogTrace(ctx, l)
		}
		return nil
	})
	if err == nil || (line != nil && line.Read && isRefusal(err)) {
		if timed && line != nil {
			line.Call, line.Return = call, clock.TraceNow()
		}
		w.trace(line)
	}
	return err
}

func isRefusal(err error) bool {
	return errors.Is(err, ErrThreadBusy) || errors.Is(err, ErrRunAbandoned)
}

func leaseKey(id ThreadID) string { return string(id) }

// record checks ev against the thread, bumps the thread's version once,
// stamps ev with it, appends ev, and, for an event that consumes a
// message, saves the taken cursor at that message.
func record(ctx context.Context, tx Transaction, t *Thread, ev *Event) error {
	if err := t.Check(*ev); err != nil {
		return err
	}
	v, err := tx.Bump(ctx, t.ID)
	if err != nil {
		return err
	}
	ev.Version = v
	if err := tx.Append(ctx, t.ID, *ev); err != nil {
		return err
	}
	if ev.Consumes() {
		return tx.SaveTaken(ctx, t.ID, ev.Message)
	}
	return nil
}

// CreateThread adds an empty thread. It returns ErrThreadExists or
// ErrInvalidArgument for an empty id.
func (w *Workspace) CreateThread(ctx context.Context, id ThreadID) error {
	if id == "" {
		return fmt.Errorf("%w: empty thread id", ErrInvalidArgument)
	}
	return w.storage.Update(ctx, func(ctx context.Context, tx Transaction) error {
		return tx.CreateThread(ctx, id)
	})
}

// Threads lists every thread.
func (w *Workspace) Threads(ctx context.Context) ([]ThreadID, error) {
	var ids []ThreadID
	err := w.view(ctx, func(ctx context.Context, tx Transaction) error {
		var err error
		ids, err = tx.ThreadIDs(ctx)
		return err
	})
	return ids, err
}

// Pending lists the threads that have a message to consume or a run still
// active, in creation order. It asks the storage without locks when it is
// a PendingLister, and otherwise reads each thread. The answer may be stale.
func (w *Workspace) Pending(ctx context.Context) ([]ThreadID, error) {
	if pl, ok := w.storage.(PendingLister); ok {
		return pl.PendingThreads(ctx)
	}
	ids, err := w.Threads(ctx)
	if err != nil {
		return nil, err
	}
	var out []ThreadID
	for _, id := range ids {
		t, err := w.Thread(ctx, id)
		if err != nil {
			return nil, err
		}
		if t.Unconsumed() || len(t.ActiveRuns()) > 0 {
			out = append(out, id)
		}
	}
	return out, nil
}

// Thread returns a copy of the thread's state. It returns ErrUnknownThread.
func (w *Workspace) Thread(ctx context.Context, id ThreadID) (*Thread, error) {
	var t *Thread
	err := w.view(ctx, func(ctx context.Context, tx Transaction) error {
		got, err := tx.Thread(ctx, id)
		if err != nil {
			return err
		}
		t = got.Clone()
		return nil
	})
	return t, err
}

// Lease returns the thread's lease as storage holds it now.
func (w *Workspace) Lease(ctx context.Context, id ThreadID) (Lease, error) {
	var l Lease
	err := w.view(ctx, func(ctx context.Context, tx Transaction) error {
		var err error
		l, err = tx.Lease(ctx, leaseKey(id))
		return err
	})
	return l, err
}

// Post appends a message to the thread and returns its seq. Anyone may
// post: it is not fenced. It returns ErrUnknownThread.
func (w *Workspace) Post(ctx context.Context, id ThreadID, text string) (Seq, error) {
	var seq Seq
	err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, id)
		if err != nil {
			return err
		}
		seq = t.Last() + 1
		ev := Event{Kind: MessagePosted, At: w.clock.Now(), Message: seq, Text: text}
		if err := record(ctx, tx, t, &ev); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: ev.Version, Action: ActionPost, Thread: id, Msg: seq, Taken: t.Taken}
		return nil
	})
	return seq, err
}

// Claim takes the thread's lease for holder until ttl from now by the
// workspace's clock. It succeeds when nobody holds the lease or the lease
// has expired by this clock, which may run ahead of the holder's. It
// returns ErrThreadBusy when another holder's lease has not expired,
// ErrUnknownThread, and ErrInvalidArgument for an empty holder, a
// non-positive ttl, or a holder that already holds the lease (holders are
// fresh for every claim).
func (w *Workspace) Claim(ctx context.Context, id ThreadID, holder Holder, ttl time.Duration) (Claim, error) {
	c := Claim{Thread: id, Holder: holder}
	if err := c.validate(); err != nil {
		return Claim{}, err
	}
	if ttl <= 0 {
		return Claim{}, fmt.Errorf("%w: claim ttl %v is not positive", ErrInvalidArgument, ttl)
	}
	err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, id)
		if err != nil {
			return err
		}
		l, err := tx.Lease(ctx, leaseKey(id))
		if err != nil {
			return err
		}
		now := w.clock.Now()
		switch {
		case l.Holder == holder:
			return fmt.Errorf("%w: holder %q already holds thread %q", ErrInvalidArgument, holder, id)
		case l.Holder != "" && !l.Expired(now):
			return fmt.Errorf("claim thread %q: %w", id, ErrThreadBusy)
		}
		v, err := tx.Bump(ctx, id)
		if err != nil {
			return err
		}
		if err := tx.PutLease(ctx, Lease{Key: leaseKey(id), Holder: holder, ExpiresAt: now.Add(ttl)}); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: v, Action: ActionClaim, Thread: id, Holder: holder, Taken: t.Taken, Lease: holder}
		return nil
	})
	if err != nil {
		return Claim{}, err
	}
	return c, nil
}

// Renew extends the claim's lease to ttl from now by the workspace's clock.
// A lease that expired and that nobody took renews. It returns
// ErrThreadBusy when another holder has the lease or nobody does.
func (w *Workspace) Renew(ctx context.Context, c Claim, ttl time.Duration) error {
	if err := c.validate(); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: claim ttl %v is not positive", ErrInvalidArgument, ttl)
	}
	return w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		held, _, err := tx.HoldsLease(ctx, leaseKey(c.Thread), c.Holder)
		if err != nil {
			return err
		}
		if !held {
			return fmt.Errorf("renew claim on thread %q: %w", c.Thread, ErrThreadBusy)
		}
		v, err := tx.Bump(ctx, c.Thread)
		if err != nil {
			return err
		}
		if err := tx.PutLease(ctx, Lease{Key: leaseKey(c.Thread), Holder: c.Holder, ExpiresAt: w.clock.Now().Add(ttl)}); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: v, Action: ActionRenew, Thread: c.Thread, Holder: c.Holder, Taken: t.Taken, Lease: c.Holder}
		return nil
	})
}

// Release gives the lease up if the claim still has it. A claim that lost
// its lease releases nothing and is not an error: the line is traced all
// the same, since the claimant's round is over either way.
func (w *Workspace) Release(ctx context.Context, c Claim) error {
	if err := c.validate(); err != nil {
		return err
	}
	return w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		held, l, err := tx.HoldsLease(ctx, leaseKey(c.Thread), c.Holder)
		if err != nil {
			return err
		}
		if !held {
			*line = &TraceEvent{Tick: t.Version, Read: true, Action: ActionRelease, Thread: c.Thread, Holder: c.Holder, Taken: t.Taken, Lease: l.Holder}
			return nil
		}
		v, err := tx.Bump(ctx, c.Thread)
		if err != nil {
			return err
		}
		if err := tx.DeleteLease(ctx, leaseKey(c.Thread)); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: v, Action: ActionRelease, Thread: c.Thread, Holder: c.Holder, Taken: t.Taken}
		return nil
	})
}

// fence checks, inside tx, that the claim's holder has the lease. When it
// does not and the fence is on, it leaves the refusal's line and returns
// ErrThreadBusy. It returns the lease holder seen.
func (w *Workspace) fence(ctx context.Context, tx Transaction, on bool, c Claim, t *Thread, refusal TraceEvent, line **TraceEvent) (Holder, error) {
	if !on && w.tracer == nil {
		// The mutant, untraced: no lease read, so that a benchmark of it
		// measures a write without the fence's lock.
		return "", nil
	}
	held, l, err := tx.HoldsLease(ctx, leaseKey(c.Thread), c.Holder)
	if err != nil {
		return "", err
	}
	if !held && on {
		refusal.Tick, refusal.Read, refusal.Thread, refusal.Holder = t.Version, true, c.Thread, c.Holder
		refusal.Taken, refusal.Lease = t.Taken, l.Holder
		*line = &refusal
		return "", fmt.Errorf("%s on thread %q: %w", refusal.Action, c.Thread, ErrThreadBusy)
	}
	return l.Holder, nil
}

// Abandon marks an active run that an earlier claim left as abandoned, so
// that its end is refused and the thread can go on. It is fenced: it
// returns ErrThreadBusy, and writes nothing, when the claim's holder no
// longer has the lease; otherwise a claimant that lost its claim could
// abandon the new holder's live run. It returns ErrUnknownRun, ErrRunNotActive
// for a run that is not active or that this claim started, and ErrRunAbandoned.
func (w *Workspace) Abandon(ctx context.Context, c Claim, run RunID) error {
	if err := c.validate(); err != nil {
		return err
	}
	on, err := w.fenceFirst(ctx, w.fences.Abandon, c, TraceEvent{Action: ActionAbandonFenced, Run: run})
	if err != nil {
		return err
	}
	return w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		lease, err := w.fence(ctx, tx, on, c, t, TraceEvent{Action: ActionAbandonFenced, Run: run}, line)
		if err != nil {
			return err
		}
		if r, ok := t.Run(run); ok && r.Holder == c.Holder {
			return fmt.Errorf("%w: run %d of thread %q is this claim's own", ErrRunNotActive, run, c.Thread)
		}
		ev := Event{Kind: RunAbandoned, At: w.clock.Now(), Run: run, Holder: c.Holder}
		if err := record(ctx, tx, t, &ev); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: ev.Version, Action: ActionAbandon, Thread: c.Thread, Holder: c.Holder, Run: run, Taken: t.Taken, Lease: lease}
		return nil
	})
}

// PlanKind says what a plan will write.
type PlanKind int

// The kinds of plan.
const (
	PlanNothing PlanKind = iota // every message is consumed: release
	PlanAbandon                 // runs earlier claims left are active: abandon them first
	PlanRun                     // start a run whose prompt is Message
	PlanReply                   // answer Request with Message
)

func (k PlanKind) String() string {
	switch k {
	case PlanNothing:
		return "nothing"
	case PlanAbandon:
		return "abandon"
	case PlanRun:
		return PlanKindRun
	case PlanReply:
		return PlanKindReply
	}
	return fmt.Sprintf("PlanKind(%d)", int(k))
}

// Plan is what a claimant will do next with the thread.
type Plan struct {
	Kind    PlanKind
	Message Seq       // PlanRun: the prompt; PlanReply: the answer
	Request RequestID // PlanReply: the request it answers
	Runs    []RunID   // PlanAbandon: the active runs to abandon
	Taken   Seq       // the taken cursor the plan read
}

// Plan reads the thread and decides the claim's next write: abandon the
// runs earlier claims left active; else answer the oldest open request
// with the oldest unconsumed message; else start a run for the oldest
// unconsumed message; else nothing. It writes nothing and is not fenced:
// the write it plans is. Only run and reply plans are traced.
func (w *Workspace) Plan(ctx context.Context, c Claim) (Plan, error) {
	if err := c.validate(); err != nil {
		return Plan{}, err
	}
	var p Plan
	err := w.read(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		p = Plan{Taken: t.Taken}
		if active := t.ActiveRuns(); len(active) > 0 {
			p.Kind = PlanAbandon
			for _, r := range active {
				p.Runs = append(p.Runs, r.ID)
			}
			return nil
		}
		if !t.Unconsumed() {
			return nil
		}
		p.Kind, p.Message = PlanRun, t.Taken+1
		if open := t.OpenRequests(); len(open) > 0 {
			p.Kind, p.Request = PlanReply, open[0].ID
		}
		*line = &TraceEvent{Tick: t.Version, Read: true, Action: ActionPlan, Thread: c.Thread, Holder: c.Holder,
			Msg: p.Message, Req: p.Request, Taken: t.Taken, Kind: p.Kind.String()}
		return nil
	})
	if err != nil {
		return Plan{}, err
	}
	return p, nil
}

// RunStart records that a run started with prompt as its prompt, saves the
// taken cursor at prompt, and returns the run's id. It consumes the prompt,
// so it is fenced: it returns ErrThreadBusy, and writes nothing, when the
// claim's holder no longer has the lease. It does not compare the cursor:
// the fence alone keeps a message from being consumed twice. It returns
// ErrUnknownThread and ErrUnknownMessage.
func (w *Workspace) RunStart(ctx context.Context, c Claim, prompt Seq) (RunID, error) {
	if err := c.validate(); err != nil {
		return 0, err
	}
	var id RunID
	on, err := w.fenceFirst(ctx, w.fences.Start, c, TraceEvent{Action: ActionStartFenced, Msg: prompt})
	if err != nil {
		return 0, err
	}
	err = w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		lease, err := w.fence(ctx, tx, on, c, t, TraceEvent{Action: ActionStartFenced, Msg: prompt}, line)
		if err != nil {
			return err
		}
		id = RunID(len(t.Runs) + 1)
		ev := Event{Kind: RunStarted, At: w.clock.Now(), Message: prompt, Run: id, Holder: c.Holder}
		if err := record(ctx, tx, t, &ev); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: ev.Version, Action: ActionRunStart, Thread: c.Thread, Holder: c.Holder, Msg: prompt, Run: id, Taken: prompt, Lease: lease}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// Reply answers the request with the message and saves the taken cursor at
// it. It consumes the answer, so it is fenced: it returns ErrThreadBusy,
// and writes nothing, when the claim's holder no longer has the lease. It
// returns ErrUnknownRequest, ErrAlreadyAnswered and ErrUnknownMessage.
func (w *Workspace) Reply(ctx context.Context, c Claim, req RequestID, answer Seq) error {
	if err := c.validate(); err != nil {
		return err
	}
	on, err := w.fenceFirst(ctx, w.fences.Reply, c, TraceEvent{Action: ActionReplyFenced, Msg: answer, Req: req})
	if err != nil {
		return err
	}
	return w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		lease, err := w.fence(ctx, tx, on, c, t, TraceEvent{Action: ActionReplyFenced, Msg: answer, Req: req}, line)
		if err != nil {
			return err
		}
		ev := Event{Kind: Answered, At: w.clock.Now(), Message: answer, Request: req, Holder: c.Holder}
		if err := record(ctx, tx, t, &ev); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: ev.Version, Action: ActionReply, Thread: c.Thread, Holder: c.Holder, Msg: answer, Req: req, Taken: answer, Lease: lease}
		return nil
	})
}

// Ask opens a request of the run with the question and returns its id. It
// consumes nothing and is not fenced. It returns ErrRunAbandoned,
// ErrRunNotActive and ErrUnknownRun; a refused Ask is not traced, since it
// changes nothing the specification follows.
func (w *Workspace) Ask(ctx context.Context, c Claim, run RunID, question string) (RequestID, error) {
	if err := c.validate(); err != nil {
		return 0, err
	}
	var id RequestID
	err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		id = RequestID(len(t.Requests) + 1)
		ev := Event{Kind: Asked, At: w.clock.Now(), Run: run, Request: id, Text: question}
		if err := record(ctx, tx, t, &ev); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: ev.Version, Action: ActionAsk, Thread: c.Thread, Holder: c.Holder, Run: run, Req: id, Taken: t.Taken}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// RunEnd records the run's end. It is not fenced: core refuses it with
// ErrRunAbandoned once a later claim abandoned the run (traced as
// EndRefused), and an end recorded under a lapsed claim consumes nothing.
// It returns ErrRunNotActive for a run that already ended and ErrUnknownRun.
func (w *Workspace) RunEnd(ctx context.Context, c Claim, run RunID) error {
	if err := c.validate(); err != nil {
		return err
	}
	return w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		ev := Event{Kind: RunEnded, At: w.clock.Now(), Run: run}
		if err := record(ctx, tx, t, &ev); err != nil {
			if errors.Is(err, ErrRunAbandoned) {
				*line = &TraceEvent{Tick: t.Version, Read: true, Action: ActionEndRefused, Thread: c.Thread, Holder: c.Holder, Run: run, Taken: t.Taken}
			}
			return err
		}
		*line = &TraceEvent{Tick: ev.Version, Action: ActionRunEnd, Thread: c.Thread, Holder: c.Holder, Run: run, Taken: t.Taken}
		return nil
	})
}

// Crash traces that the claim's round ended without a word to storage: the
// process died, or a runner gave the round up after an error it could not
// classify (such as ErrCommitUnknown). It writes nothing; the claim's lease
// stays until it expires and the next claimant abandons whatever the round
// left active. With no Tracer it does nothing.
func (w *Workspace) Crash(ctx context.Context, c Claim) error {
	if w.tracer == nil {
		return nil
	}
	return w.read(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		*line = &TraceEvent{Tick: t.Version, Read: true, Action: ActionCrash, Thread: c.Thread, Holder: c.Holder, Taken: t.Taken}
		return nil
	})
}
