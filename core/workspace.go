package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Option configures a Workspace.
type Option func(*Workspace)

// WithProcess names the process in trace lines. Default "". Each
// Workspace is one process of the specification: two Workspaces must not
// share a name in one trace. A name is an id as a thread's is (at most
// MaxIDBytes, valid UTF-8, no NUL byte), or NewWorkspace panics naming
// it: a longer one makes trace lines tracecheck refuses, and an invalid
// one is written as another name.
func WithProcess(name string) Option { return func(w *Workspace) { w.proc = name } }

// WithTracer sets where trace lines go. Default none: nothing is traced.
func WithTracer(t Tracer) Option { return func(w *Workspace) { w.tracer = t } }

// WithDoubts sets where the writes whose commit outcome was unknown are
// reported (Doubt): when the write returns ErrCommitUnknown, and when the
// round's Crash resolves it. Default none. fn must be safe for concurrent
// use and must not call the Workspace.
func WithDoubts(fn func(Doubt)) Option { return func(w *Workspace) { w.doubts = fn } }

// WithFencesForTesting switches fences off. It exists for mutation tests,
// which show that the checks catch the unfenced workspace; no deployment
// setting reaches it.
func WithFencesForTesting(f Fences) Option { return func(w *Workspace) { w.fences = f } }

// Workspace writes threads through a Storage under claims. Each runner
// process has its own, with its own clock; many share one Storage. It is
// safe for concurrent use. NewWorkspace makes one: the zero Workspace has
// no storage, and its calls panic (its Clock is nil). A call given a nil
// context returns ErrInvalidArgument and does nothing.
//
// The Workspace recovers no panic of its Storage, its Tracer or the
// function WithDoubts gives: it goes on up the call, and leaves the
// claim's round as it was mid-call. After a Claim's, this workspace
// refuses the thread's later claims (ErrOutOfOrder: a round still open,
// whose claim the caller never got); after another call's, the round's
// later calls are refused as another call of the round is in flight, and
// Crash waits for it until its ctx ends. A Tracer must not panic.
//
// The Workspace keeps each claim's round (the specification's pc for this
// process and thread) and refuses, with ErrOutOfOrder or ErrRoundOver and
// nothing written or traced, any call the specification does not allow
// next: so every sequence of calls on its methods, from any number of
// workspaces with any clocks, is either refused or traced as a behaviour
// of the specification.
type Workspace struct {
	storage Storage
	clock   Clock
	proc    string
	tracer  Tracer
	fences  Fences
	mutants Mutants
	doubts  func(Doubt) // WithDoubts

	mu     sync.Mutex
	rounds map[ThreadID]*round // the open round of each thread
	used   map[Holder]bool     // holders this workspace claimed with, recent ones
	usedQ  []Holder            // used's holders, oldest first
}

// recentHolders bounds how many holders a Workspace remembers to refuse
// their reuse; storage refuses the rest (ErrHolderReused).
const recentHolders = 1 << 14

// NewWorkspace returns a Workspace over s whose lease expiries are stamped
// with clock. A nil s or clock, or a process name WithProcess refuses, is
// a programming error: it panics here, naming it, rather than at the first
// call. A nil option is ignored, as tracecheck's are.
func NewWorkspace(s Storage, clock Clock, opts ...Option) *Workspace {
	switch {
	case s == nil:
		panic("core: NewWorkspace: nil Storage")
	case clock == nil:
		panic("core: NewWorkspace: nil Clock")
	}
	w := &Workspace{storage: s, clock: clock, fences: AllFences(), rounds: map[ThreadID]*round{}, used: map[Holder]bool{}}
	for _, o := range opts {
		if o != nil { // as tracecheck.NewChecker: an option left unset
			o(w)
		}
	}
	if w.proc != "" {
		if err := checkID("process name", w.proc); err != nil {
			panic("core: NewWorkspace: WithProcess: " + err.Error())
		}
	}
	return w
}

// Process returns the process name trace lines carry.
func (w *Workspace) Process() string { return w.proc }

// Now reads the workspace's clock.
func (w *Workspace) Now() time.Time { return w.clock.Now() }

// Clock returns the clock the workspace stamps lease expiries with, so that
// a runner over it keeps its timers on the same clock.
func (w *Workspace) Clock() Clock { return w.clock }

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
func (w *Workspace) update(ctx context.Context, fn func(ctx context.Context, tx Transaction, line **TraceEvent) error) (*TraceEvent, bool, error) {
	return w.traced(ctx, w.storage.Update, fn)
}

// read is update for an action that only reads: in a read-only
// transaction when the storage is a Viewer.
func (w *Workspace) read(ctx context.Context, fn func(ctx context.Context, tx Transaction, line **TraceEvent) error) (*TraceEvent, bool, error) {
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

// traced runs fn in a transaction of run and traces the line fn left, as
// update says. next are the lines fn may leave after it in the same
// transaction (RunEndThenStart's Plan and RunStart), which the caller
// traces: storage's log gets each write's line, and a read's line when a
// write of the transaction follows it.
func (w *Workspace) traced(ctx context.Context, run runTx, fn func(ctx context.Context, tx Transaction, line **TraceEvent) error, next ...**TraceEvent) (*TraceEvent, bool, error) {
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
		log, ok := tx.(TraceLog)
		if !ok || w.tracer == nil {
			return nil
		}
		var held [4]*TraceEvent
		lines, lastWrite := append(held[:0], line), -1
		for _, n := range next {
			lines = append(lines, deref(n))
		}
		for i, l := range lines {
			if l != nil && !l.Read {
				lastWrite = i
			}
		}
		for i, l := range lines {
			// A read's line is kept when a write of the same transaction
			// follows it (RunEndThenStart's Plan, before its RunStart): a
			// process killed after the commit leaves the write in storage's
			// log, and the read the write went by with it.
			if l != nil && (!l.Read || i < lastWrite) {
				c := *l
				c.Proc = w.proc
				if err := log.LogTrace(ctx, c); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if line != nil && (err == nil || (line.Read && isRefusal(err))) {
		if timed {
			line.Call, line.Return = call, clock.TraceNow()
		}
		w.trace(line)
		return line, true, err
	}
	if line != nil && timed {
		// Not traced: kept for a Crash that learns the write committed.
		line.Call, line.Return = call, clock.TraceNow()
	}
	return line, false, err
}

// deref returns *p, or nil for a nil p.
func deref(p **TraceEvent) *TraceEvent {
	if p == nil {
		return nil
	}
	return *p
}

func isRefusal(err error) bool {
	return errors.Is(err, ErrThreadBusy) || errors.Is(err, ErrRunAbandoned)
}

// leaseNow reads the clock for a lease's stamp, to the microsecond: the
// precision PostgreSQL keeps. A lease stored as stamped (with a TTL of
// whole microseconds) reads back with the expiry its Claim or Renew line
// carries, which the trace checker compares with a later Claim's
// replaced.
func leaseNow(c Clock) time.Time { return c.Now().Truncate(time.Microsecond) }

// leaseTTL is ttl rounded up to a whole microsecond, as leaseNow's now
// is rounded down: a lease's expiry, now + ttl, is then a whole
// microsecond too, which storage that keeps times to the microsecond
// (PostgreSQL's timestamptz) keeps as it is, so that the expiry a
// takeover reads back is the one the Claim or Renew traced. (A TTL of
// a third of a second is 333,333,333 ns: stored rounded, it made a
// takeover's trace line disagree with the renewal's.)
//
// It refuses, with ErrInvalidArgument, a ttl whose rounding overflows or
// whose expiry, now + ttl, is past the latest time a trace line's Unix
// nanoseconds hold (April 2262): before, a ttl of math.MaxInt64 (a
// "lease for ever") wrapped round to a negative one, and the lease was
// stamped already expired, in 1734, for any other workspace to take.
func leaseTTL(now time.Time, ttl time.Duration) (time.Duration, error) {
	r := ttl.Truncate(time.Microsecond)
	if r < ttl {
		r += time.Microsecond
	}
	if r <= 0 || now.Add(r).After(maxLeaseExpiry) {
		return 0, fmt.Errorf("%w: claim ttl %v is too long: the lease would expire past %v, the latest expiry a trace line's Unix nanoseconds hold", ErrInvalidArgument, ttl, maxLeaseExpiry.UTC())
	}
	return r, nil
}

// maxLeaseExpiry is the latest expiry a lease can have: Claim and Renew
// lines carry it in Unix nanoseconds.
var maxLeaseExpiry = time.Unix(0, math.MaxInt64)

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

// behind returns an error when storage is behind what the claim's round
// saw: consuming msg would skip a message (msg is past the one after the
// thread's taken cursor), or, for a run's start (starting), a run is
// active. A round plans, and Steer gives, the message after the cursor
// it reads, and plans a run only when no run is active; under its lease
// no other write moves the cursor or starts a run. So storage whose
// cursor is behind the round's, or with a run active that the round saw
// end or abandoned, has lost commits the round saw acknowledged
// (synchronous_commit off and a crash, a failover to an asynchronous
// replica) while it kept the claim. The write would leave the lost
// consumption's message behind the cursor, never consumed, on a thread
// whose row says no work is left; or start a second run beside the one
// whose end was lost. It is refused, and writes nothing; the round's
// Crash ends it, and the next claim plans from storage's state. A cursor
// ahead of the round's (msg consumed already), which only a write the
// fence should have refused can make, is the fence's to catch, not this
// check's: the check says nothing then, a run active or not.
//
// With a fence off or a mutant on (tests only), a stale write may move the
// cursor back, or start a run, past a plan made under a lease: that is
// the defect the checks must see, so the refusal is off there.
func (w *Workspace) behind(t *Thread, msg Seq, starting bool) error {
	if w.fences != AllFences() || w.mutants != (Mutants{}) {
		return nil
	}
	if msg > t.Taken+1 {
		return fmt.Errorf("%w: thread %q: this round would consume message %d, but storage has consumed only up to %d: storage lost commits the round saw acknowledged",
			ErrInconsistentLog, t.ID, msg, t.Taken)
	}
	if starting && msg == t.Taken+1 {
		for _, r := range t.runs.live {
			if r.State == StateActive {
				return fmt.Errorf("%w: thread %q: this round would start a run on message %d, but storage has run %d active, which the round saw end: storage lost commits the round saw acknowledged",
					ErrInconsistentLog, t.ID, msg, r.ID)
			}
		}
	}
	return nil
}

// CreateThread adds an empty thread. It returns ErrThreadExists, or
// ErrInvalidArgument for an id that is empty, longer than MaxIDBytes, or
// that CheckText refuses.
func (w *Workspace) CreateThread(ctx context.Context, id ThreadID) error {
	if ctx == nil {
		return nilContext("CreateThread")
	}
	if err := checkID("thread id", string(id)); err != nil {
		return err
	}
	return w.storage.Update(ctx, func(ctx context.Context, tx Transaction) error {
		return tx.CreateThread(ctx, id)
	})
}

// Threads lists every thread.
func (w *Workspace) Threads(ctx context.Context) ([]ThreadID, error) {
	if ctx == nil {
		return nil, nilContext("Threads")
	}
	var ids []ThreadID
	err := w.view(ctx, func(ctx context.Context, tx Transaction) error {
		var err error
		ids, err = tx.ThreadIDs(ctx)
		return err
	})
	return ids, err
}

// Pending lists the threads that have a message to consume or a run still
// active, in creation order, each with its lease (the zero Lease when
// nobody holds it). It asks the storage without locks when it is a
// PendingLister, and otherwise reads each thread and its lease in one
// read-only transaction. The answer may be stale.
func (w *Workspace) Pending(ctx context.Context) ([]PendingThread, error) {
	if ctx == nil {
		return nil, nilContext("Pending")
	}
	if pl, ok := w.storage.(PendingLister); ok {
		return pl.PendingThreads(ctx)
	}
	var out []PendingThread
	err := w.view(ctx, func(ctx context.Context, tx Transaction) error {
		out = out[:0]
		ids, err := tx.ThreadIDs(ctx)
		if err != nil {
			return err
		}
		for _, id := range ids {
			t, err := tx.Thread(ctx, id)
			if err != nil {
				return err
			}
			if !t.Unconsumed() && len(t.ActiveRuns()) == 0 {
				continue
			}
			l, err := tx.Lease(ctx, id)
			if err != nil {
				return err
			}
			out = append(out, PendingThread{ID: id, Lease: l})
		}
		return nil
	})
	return out, err
}

// Thread returns a copy of the thread's state. It returns ErrUnknownThread.
func (w *Workspace) Thread(ctx context.Context, id ThreadID) (*Thread, error) {
	if ctx == nil {
		return nil, nilContext("Thread")
	}
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

// Lease returns the thread's lease as storage holds it now: the zero Lease,
// and no error, for a thread nobody holds and for one that does not exist.
func (w *Workspace) Lease(ctx context.Context, id ThreadID) (Lease, error) {
	if ctx == nil {
		return Lease{}, nilContext("Lease")
	}
	var l Lease
	err := w.view(ctx, func(ctx context.Context, tx Transaction) error {
		var err error
		l, err = tx.Lease(ctx, id)
		return err
	})
	return l, err
}

// Post appends a message to the thread and returns its seq. Anyone may
// post: it is not fenced. It returns ErrUnknownThread, or
// ErrInvalidArgument for a text (or id) CheckText refuses.
func (w *Workspace) Post(ctx context.Context, id ThreadID, text string) (Seq, error) {
	if ctx == nil {
		return 0, nilContext("Post")
	}
	if err := CheckText("thread id", string(id)); err != nil {
		return 0, err
	}
	if err := CheckText("message text", text); err != nil {
		return 0, err
	}
	var seq Seq
	_, _, err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		if p, ok := tx.(messagePoster); ok {
			// Storage decides the message's Seq and version itself: the
			// same write as below, without reading the thread first.
			msg, v, taken, err := p.PostMessage(ctx, id, w.clock.Now(), text)
			if err != nil {
				return err
			}
			seq = msg
			*line = &TraceEvent{Tick: v, Action: ActionPost, Thread: id, Msg: seq, Taken: taken}
			return nil
		}
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

// reserve opens a round on the thread for holder before its Claim goes to
// storage: a process has at most one round on a thread (the
// specification's Claim needs pc[p] = "idle"), and never claims with a
// holder it used before.
func (w *Workspace) reserve(id ThreadID, holder Holder) (*round, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.rounds[id]; r != nil {
		return nil, fmt.Errorf("claim thread %q: %w: this process's round under holder %q is still open (end it with Release or Crash)", id, ErrOutOfOrder, r.holder)
	}
	if w.used[holder] {
		return nil, fmt.Errorf("claim thread %q: %w: holder %q claimed before", id, ErrHolderReused, holder)
	}
	w.used[holder] = true
	w.usedQ = append(w.usedQ, holder)
	if len(w.usedQ) > recentHolders {
		delete(w.used, w.usedQ[0])
		w.usedQ = w.usedQ[1:]
	}
	r := &round{ws: w, thread: id, holder: holder, phase: phaseClaimed}
	w.rounds[id] = r
	return r, nil
}

// finishPending ends this workspace's round on the thread whose Crash
// could not be traced because storage did not answer after a write in
// doubt: a Claim on the thread retries that Crash first.
func (w *Workspace) finishPending(ctx context.Context, id ThreadID) error {
	w.mu.Lock()
	r := w.rounds[id]
	w.mu.Unlock()
	if r == nil {
		return nil
	}
	r.mu.Lock()
	pending := r.crashFailed && r.phase != phaseOver
	r.mu.Unlock()
	if !pending {
		return nil
	}
	return w.finish(ctx, r)
}

// unreserve forgets a round whose Claim did not commit, and its holder,
// which held nothing.
func (w *Workspace) unreserve(r *round, holder Holder) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rounds[r.thread] == r {
		delete(w.rounds, r.thread)
	}
	delete(w.used, holder)
}

// takeLease is a Claim's read and write: it takes the thread's lease
// for holder until expires when nobody else holds it or it has expired at
// now, and bumps the thread's version. It returns the thread as the claim
// left it, the lease as it found it and the new version; ErrThreadBusy
// and ErrInvalidArgument (holder holds the lease) when the lease refuses
// the claim, with nothing written. A storage that decides the claim in
// its write (leaseClaimer) makes it one step. With start set, a storage
// that can (leaseStartClaimer) may also write the run start start plans
// (see leaseStartClaimer): it is returned as the start's event, with the
// thread as it left it.
func takeLease(ctx context.Context, tx Transaction, id ThreadID, holder Holder, now, expires time.Time, start *startPlan) (*Thread, Lease, uint64, Event, error) {
	refusal := func(l Lease) error {
		switch {
		case l.Holder == holder:
			return fmt.Errorf("%w: holder %q already holds thread %q", ErrInvalidArgument, holder, id)
		case l.Holder != "" && !l.Expired(now):
			return fmt.Errorf("claim thread %q: %w", id, ErrThreadBusy)
		}
		return nil
	}
	sc, startable := tx.(leaseStartClaimer)
	if c, ok := tx.(leaseClaimer); ok || start != nil && startable {
		var (
			t       *Thread
			l       Lease
			v       uint64
			started Event
			err     error
		)
		if start != nil && startable {
			t, l, v, started, err = sc.ClaimLeaseThenStart(ctx, id, holder, now, expires, start.at, start.plan)
		} else {
			t, l, v, err = c.ClaimLease(ctx, id, holder, now, expires)
		}
		if err != nil {
			return nil, Lease{}, 0, Event{}, err
		}
		refused := refusal(l)
		switch {
		case v == 0 && refused != nil:
			return nil, Lease{}, 0, Event{}, refused
		case (v == 0) != (refused != nil):
			// Storage and the rule above disagree: a broken storage.
			return nil, Lease{}, 0, Event{}, fmt.Errorf("%w: storage's claim of thread %q (version %d) disagrees with its lease %+v at %v",
				ErrInconsistentLog, id, v, l, now)
		case started.Version != 0 && !start.wrote(started, v):
			return nil, Lease{}, 0, Event{}, fmt.Errorf("%w: storage started a run on thread %q that its plan did not: %+v (the claim at version %d)",
				ErrInconsistentLog, id, started, v)
		}
		return t, l, v, started, nil
	}
	t, err := tx.Thread(ctx, id)
	if err != nil {
		return nil, Lease{}, 0, Event{}, err
	}
	l, err := tx.Lease(ctx, id)
	if err != nil {
		return nil, Lease{}, 0, Event{}, err
	}
	if err := refusal(l); err != nil {
		return nil, Lease{}, 0, Event{}, err
	}
	v, err := tx.Bump(ctx, id)
	if err != nil {
		return nil, Lease{}, 0, Event{}, err
	}
	if err := tx.PutLease(ctx, Lease{Thread: id, Holder: holder, ExpiresAt: expires}); err != nil {
		return nil, Lease{}, 0, Event{}, err
	}
	return t, l, v, Event{}, nil
}

// runStarted is the event that starts run, claim c's, on prompt at at.
func runStarted(c Claim, prompt Seq, run RunID, at time.Time) Event {
	return Event{Kind: RunStarted, At: at, Message: prompt, Run: run, Holder: c.Holder}
}

// runStartLine is the RunStart line of ev, a run's start (runStarted)
// recorded under lease.
func runStartLine(c Claim, ev Event, lease Holder) *TraceEvent {
	return &TraceEvent{Tick: ev.Version, Action: ActionRunStart, Thread: c.Thread, Holder: c.Holder, Msg: ev.Message, Run: ev.Run, Taken: ev.Message, Lease: lease}
}

// startPlan is a Claim's plan made from the thread as the claim left it,
// for a storage that writes the run's start with the claim
// (leaseStartClaimer): the Plan, its line, and the RunStarted event it
// would record, at (zero: none).
type startPlan struct {
	c      Claim
	at     time.Time
	called bool
	p      Plan
	line   *TraceEvent
	want   Event
}

// plan is leaseStartClaimer's plan: planOf, and for a run the start that
// RunStart would record on the thread.
func (s *startPlan) plan(t *Thread) (Event, bool) {
	s.called = true
	s.p, s.line = planOf(t, s.c)
	s.want = Event{}
	if s.p.Kind != PlanRun {
		return Event{}, false
	}
	want := runStarted(s.c, s.p.Message, t.LastRun()+1, s.at)
	want.Version = t.Version + 1
	if t.Check(want) != nil {
		return Event{}, false
	}
	s.want = want
	return want, true
}

// wrote reports whether ev is the start plan returned, written with the
// claim at version v: one version past it, at plan's time to storage's
// precision (a microsecond or finer).
func (s *startPlan) wrote(ev Event, v uint64) bool {
	w := s.want
	return w.Kind == RunStarted && ev.Kind == w.Kind && ev.Message == w.Message && ev.Run == w.Run && ev.Holder == w.Holder &&
		ev.Version == v+1 && !ev.At.After(w.At) && w.At.Sub(ev.At) < time.Microsecond
}

// Claim takes the thread's lease for holder until ttl from now by the
// workspace's clock (lease times are whole microseconds: now is read to
// the microsecond, and ttl rounded up to one). It succeeds when nobody holds the lease or the lease
// has expired by this clock, which may run ahead of the holder's. It
// returns ErrThreadBusy when another holder's lease has not expired,
// ErrUnknownThread, ErrInvalidArgument for an empty holder, a non-positive
// ttl or one whose expiry is past April 2262 (what a trace line's Unix
// nanoseconds hold: math.MaxInt64 is refused, not a lease for ever),
// or a holder that holds the lease, ErrHolderReused for a holder this
// workspace claimed with before (storage may refuse one other workspaces
// used), and ErrOutOfOrder while this workspace's round on the thread is
// still open.
//
// The claim opens a round that ends with Release, a refusal of a fenced
// write or of RunEnd, or Crash; the claim is refused once it has ended.
// When the outcome of the Claim's commit is unknown (ErrCommitUnknown) it
// returns the claim with the error: the caller must end it with Crash.
func (w *Workspace) Claim(ctx context.Context, id ThreadID, holder Holder, ttl time.Duration) (Claim, error) {
	if ctx == nil {
		return Claim{}, nilContext("Claim")
	}
	c, _, _, err := w.claim(ctx, id, holder, ttl, claimOnly)
	return c, err
}

// ClaimThenPlan is Claim followed by Plan with nothing between them: it
// claims the thread and, in the same transaction, plans the claim's first
// write from the thread as the claim found it. The plan reads the thread
// at the instant the claim commits, so its trace line carries the Claim's
// call and return. It saves the round trip of a Plan of its own. Its
// errors are Claim's, and with one nothing was planned (for
// ErrCommitUnknown the claim is returned as Claim returns it).
func (w *Workspace) ClaimThenPlan(ctx context.Context, id ThreadID, holder Holder, ttl time.Duration) (Claim, Plan, error) {
	if ctx == nil {
		return Claim{}, Plan{}, nilContext("ClaimThenPlan")
	}
	c, p, _, err := w.claim(ctx, id, holder, ttl, claimPlan)
	return c, p, err
}

// ClaimThenStart is ClaimThenPlan, and, when the plan is a run and
// storage can write the run's start in the claim's own statements, that
// RunStart too, with nothing between: the run's id is returned (0 when
// it was not started: the caller then calls RunStart as after
// ClaimThenPlan). Its three lines, Claim, Plan and RunStart, carry the
// call and return of the one transaction. A started run consumed its
// prompt under the claim's own lease, taken in the same statements, so
// the start is fenced as RunStart is; with the start fence switched off
// (WithFencesForTesting) it never starts, and RunStart's own call is
// what a test of that fence exercises. It saves RunStart's round trip on
// a PostgreSQL Store; the memory Store starts nothing here.
func (w *Workspace) ClaimThenStart(ctx context.Context, id ThreadID, holder Holder, ttl time.Duration) (Claim, Plan, RunID, error) {
	if ctx == nil {
		return Claim{}, Plan{}, 0, nilContext("ClaimThenStart")
	}
	return w.claim(ctx, id, holder, ttl, claimStart)
}

// claimMode is what claim does after the claim.
type claimMode int

const (
	claimOnly  claimMode = iota // Claim
	claimPlan                   // ClaimThenPlan
	claimStart                  // ClaimThenStart
)

// claim is Claim, and Plan (and a start) in the same transaction as mode
// says.
func (w *Workspace) claim(ctx context.Context, id ThreadID, holder Holder, ttl time.Duration, mode claimMode) (Claim, Plan, RunID, error) {
	c := Claim{Thread: id, Holder: holder}
	if err := c.validate(); err != nil {
		return Claim{}, Plan{}, 0, err
	}
	if ttl <= 0 {
		return Claim{}, Plan{}, 0, fmt.Errorf("%w: claim ttl %v is not positive", ErrInvalidArgument, ttl)
	}
	if err := w.finishPending(ctx, id); err != nil {
		return Claim{}, Plan{}, 0, err
	}
	r, err := w.reserve(id, holder)
	if err != nil {
		return Claim{}, Plan{}, 0, err
	}
	var (
		p                   Plan
		planLine, startLine *TraceEvent
		started             RunID
	)
	line, _, err := w.traced(ctx, w.storage.Update, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		planLine, startLine, started = nil, nil, 0
		now := leaseNow(w.clock)
		ttl, err := leaseTTL(now, ttl)
		if err != nil {
			return err
		}
		var sp *startPlan
		if mode == claimStart && w.fences.Start {
			sp = &startPlan{c: c, at: w.clock.Now()}
		}
		t, l, v, ev, err := takeLease(ctx, tx, id, holder, now, now.Add(ttl), sp)
		if err != nil {
			return err
		}
		*line = &TraceEvent{Tick: v, Action: ActionClaim, Thread: id, Holder: holder, Taken: t.Taken, Lease: holder,
			Now: now.UnixNano(), TTL: int64(ttl), Expires: now.Add(ttl).UnixNano()}
		if l.Holder != "" {
			(*line).Replaced = l.ExpiresAt.UnixNano()
		}
		switch {
		case mode == claimOnly:
		case sp != nil && sp.called:
			p, planLine = sp.p, sp.line // planned from the thread before the start
			(*line).Taken = p.Taken
		default:
			t, err := tx.Thread(ctx, id) // as the claim left it
			if err != nil {
				return err
			}
			p, planLine = planOf(t, c)
		}
		if ev.Version != 0 {
			started = ev.Run
			startLine = runStartLine(c, ev, holder)
		}
		return nil
	}, &planLine, &startLine)
	switch {
	case errors.Is(err, ErrCommitUnknown):
		if line == nil {
			// Storage decides the version in the round trip that
			// commits the claim, and its reply was lost: the line's
			// tick is unknown (Doubt.Tick 0).
			line = &TraceEvent{Action: ActionClaim, Thread: id, Holder: holder, Lease: holder}
		}
		r.mu.Lock()
		r.doubt, r.claimDoubt = true, true
		if planLine != nil && startLine != nil {
			pl := *planLine // the Plan between the claim and its start, for a Crash that learns they committed
			pl.Call, pl.Return = line.Call, line.Return
			r.doubtPlan = &pl
		}
		kept := r.doubtWrite(line)
		r.mu.Unlock()
		if kept {
			w.doubted(r, DoubtPending, false)
		}
		c.r = r
		return c, Plan{}, 0, err
	case err != nil:
		w.unreserve(r, holder)
		return Claim{}, Plan{}, 0, err
	default:
		r.tick, r.taken = line.Tick, line.Taken
		c.r = r
	}
	if mode == claimOnly {
		return c, Plan{}, 0, nil
	}
	// The claim is new: no other call has it yet, so nothing can have
	// moved its round on since the commit.
	if err := w.planAfter(c, line, planLine, p); err != nil {
		return c, Plan{}, 0, err
	}
	if startLine != nil {
		if err := w.startAfter(c, line, startLine, p); err != nil {
			return c, Plan{}, 0, err
		}
	}
	return c, p, started, nil
}

// planAfter takes the claim's round on to the plan p, read (with its line
// planLine, nil for a plan that is not traced) in the transaction of the
// write whose line is line: the plan's line carries that write's call and
// return (ClaimThenPlan).
func (w *Workspace) planAfter(c Claim, line, planLine *TraceEvent, p Plan) error {
	r, err := w.enter(c, ActionPlan, nil)
	if err != nil {
		return err
	}
	if planLine != nil {
		planLine.Call, planLine.Return = line.Call, line.Return
		w.trace(planLine)
	}
	r.leave(planLine, planLine != nil, nil, &p)
	return nil
}

// startAfter takes the claim's round on from its plan p to the run's
// start, written (with its line startLine) in the transaction of the
// claim whose line is line (ClaimThenStart).
func (w *Workspace) startAfter(c Claim, line, startLine *TraceEvent, p Plan) error {
	r, err := w.enter(c, ActionRunStart, planned(PlanRun, p.Message, 0))
	if err != nil {
		return err
	}
	startLine.Call, startLine.Return = line.Call, line.Return
	w.trace(startLine)
	r.leave(startLine, true, nil, nil)
	return nil
}

// Renew extends the claim's lease to ttl from now by the workspace's clock
// (ttl rounded up to a whole microsecond, as Claim's).
// A lease that expired and that nobody took renews. It returns
// ErrThreadBusy when another holder has the lease or nobody does (not
// traced: the round goes on, to its Release or its refusal), and
// ErrInvalidArgument, changing nothing, for a ttl Claim refuses.
func (w *Workspace) Renew(ctx context.Context, c Claim, ttl time.Duration) error {
	if ctx == nil {
		return nilContext("Renew")
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: claim ttl %v is not positive", ErrInvalidArgument, ttl)
	}
	r, err := w.enter(c, ActionRenew, nil)
	if err != nil {
		return err
	}
	line, traced, err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		held, _, err := tx.HoldsLease(ctx, c.Thread, c.Holder)
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
		now := leaseNow(w.clock)
		ttl, err := leaseTTL(now, ttl)
		if err != nil {
			return err
		}
		if err := tx.PutLease(ctx, Lease{Thread: c.Thread, Holder: c.Holder, ExpiresAt: now.Add(ttl)}); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: v, Action: ActionRenew, Thread: c.Thread, Holder: c.Holder, Taken: t.Taken, Lease: c.Holder,
			Now: now.UnixNano(), TTL: int64(ttl), Expires: now.Add(ttl).UnixNano()}
		return nil
	})
	r.leaveRenew(line, traced, err)
	return err
}

// Release gives the lease up if the claim still has it, and ends the
// claim's round. A claim that lost its lease releases nothing and is not
// an error: the line is traced all the same, since the claimant's round is
// over either way. It returns ErrOutOfOrder while a plan or a run of the
// round is open (end the run first, or Crash), and ErrRoundOver once the
// round has ended (as after a refused start: a deferred Release then does
// nothing).
func (w *Workspace) Release(ctx context.Context, c Claim) error {
	if ctx == nil {
		return nilContext("Release")
	}
	r, err := w.enter(c, ActionRelease, nil)
	if err != nil {
		return err
	}
	line, traced, err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		return w.release(ctx, tx, c, t, line)
	})
	r.leave(line, traced, err, nil)
	return err
}

// release gives the claim's lease up in tx, where the thread is t, if the
// claim still has it, and leaves Release's line: a write's, or a read's
// when the lease is another's or nobody's.
func (w *Workspace) release(ctx context.Context, tx Transaction, c Claim, t *Thread, line **TraceEvent) error {
	held, l, err := tx.HoldsLease(ctx, c.Thread, c.Holder)
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
	if err := tx.DeleteLease(ctx, c.Thread); err != nil {
		return err
	}
	*line = &TraceEvent{Tick: v, Action: ActionRelease, Thread: c.Thread, Holder: c.Holder, Taken: t.Taken}
	return nil
}

// fence checks, inside tx, that the claim's holder has the lease. When it
// does not and the fence is on, it leaves the refusal's line and returns
// ErrThreadBusy. It returns the lease holder seen.
func (w *Workspace) fence(ctx context.Context, tx Transaction, on bool, c Claim, t *Thread, refusal TraceEvent, line **TraceEvent) (Holder, error) {
	held, l, err := tx.HoldsLease(ctx, c.Thread, c.Holder)
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
// longer has the lease (the round is then over); otherwise a claimant that
// lost its claim could abandon the new holder's live run. It returns
// ErrUnknownRun, ErrRunNotActive for a run that is not active or that this
// claim started, and ErrRunAbandoned.
func (w *Workspace) Abandon(ctx context.Context, c Claim, run RunID) error {
	if ctx == nil {
		return nilContext("Abandon")
	}
	r, err := w.enter(c, ActionAbandon, nil)
	if err != nil {
		return err
	}
	line, traced, err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		lease, err := w.fence(ctx, tx, w.fences.Abandon, c, t, TraceEvent{Action: ActionAbandonFenced, Run: run}, line)
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
	r.leave(line, traced, err, nil)
	return err
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
	// Posted is message Message as it was posted (PlanRun, PlanReply), so
	// that the caller need not read the thread again for its text or time.
	Posted Message
}

// Plan reads the thread and decides the claim's next write: abandon the
// runs earlier claims left active; else answer the oldest open request
// with the oldest unconsumed message; else start a run for the oldest
// unconsumed message; else nothing. It writes nothing and is not fenced:
// the write it plans is. Only run and reply plans are traced; such a plan
// is the one RunStart or Reply must then carry out (nothing else may
// follow in the round but Renew and Crash).
func (w *Workspace) Plan(ctx context.Context, c Claim) (Plan, error) {
	if ctx == nil {
		return Plan{}, nilContext("Plan")
	}
	r, err := w.enter(c, ActionPlan, nil)
	if err != nil {
		return Plan{}, err
	}
	var p Plan
	line, traced, err := w.read(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		p, *line = planOf(t, c)
		return nil
	})
	r.leave(line, traced, err, &p)
	if err != nil {
		return Plan{}, err
	}
	return p, nil
}

// planOf decides the claim's next write from the thread's state, and
// returns the plan's trace line (nil for a plan that is not traced).
func planOf(t *Thread, c Claim) (Plan, *TraceEvent) {
	p := Plan{Taken: t.Taken}
	if active := t.ActiveRuns(); len(active) > 0 {
		p.Kind = PlanAbandon
		for _, r := range active {
			p.Runs = append(p.Runs, r.ID)
		}
		return p, nil
	}
	if !t.Unconsumed() {
		return p, nil
	}
	p.Kind, p.Message, p.Posted = PlanRun, t.Taken+1, t.Messages[t.Taken]
	if open := t.openRequests(); len(open) > 0 {
		p.Kind, p.Request = PlanReply, open[0].ID
	}
	return p, &TraceEvent{Tick: t.Version, Read: true, Action: ActionPlan, Thread: c.Thread, Holder: c.Holder,
		Msg: p.Message, Req: p.Request, Taken: t.Taken, Kind: p.Kind.String()}
}

// planned checks that the round's current plan is of kind k for message m
// (and request q for a reply): a write for any other plan is refused.
func planned(k PlanKind, m Seq, q RequestID) func(r *round) error {
	return func(r *round) error {
		if r.plan.Kind != k || r.plan.Message != m || r.plan.Request != q {
			return fmt.Errorf("%w: the round's plan is %s message %d request %d, not %s message %d request %d",
				ErrOutOfOrder, r.plan.Kind, r.plan.Message, r.plan.Request, k, m, q)
		}
		return nil
	}
}

// RunStart records that a run started with prompt as its prompt, saves the
// taken cursor at prompt, and returns the run's id. It consumes the prompt,
// so it is fenced: it returns ErrThreadBusy when the claim's holder no
// longer has the lease (the round is then over), and writes nothing of
// the run: only a RunRefused notice in the thread's log, which changes
// none of its state. It does not compare the cursor: the fence alone keeps a message from being
// consumed twice. It returns ErrOutOfOrder unless the round's current plan
// (Plan) is a run for prompt, and ErrUnknownThread and ErrUnknownMessage.
func (w *Workspace) RunStart(ctx context.Context, c Claim, prompt Seq) (RunID, error) {
	if ctx == nil {
		return 0, nilContext("RunStart")
	}
	r, err := w.enter(c, ActionRunStart, planned(PlanRun, prompt, 0))
	if err != nil {
		return 0, err
	}
	var id RunID
	var refused error
	line, traced, err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		refused = nil
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		lease, err := w.fence(ctx, tx, w.fences.Start, c, t, TraceEvent{Action: ActionStartFenced, Msg: prompt}, line)
		if err != nil {
			if *line != nil && noteRefused(ctx, tx, t, c, prompt, w.clock.Now()) {
				refused = err // commit the notice, then return the refusal
				return nil
			}
			return err
		}
		if err := w.behind(t, prompt, true); err != nil {
			return err
		}
		id = t.LastRun() + 1
		ev := runStarted(c, prompt, id, w.clock.Now())
		if err := record(ctx, tx, t, &ev); err != nil {
			return err
		}
		*line = runStartLine(c, ev, lease)
		return nil
	})
	if err == nil && refused != nil {
		err = refused
	}
	r.leave(line, traced, err, nil)
	if err != nil {
		return 0, err
	}
	return id, nil
}

// noteRefused appends, in the refused start's own transaction, a
// RunRefused notice, so that a follower of the thread (Follow) hears of
// the refusal. It is no action of the specification: it consumes nothing,
// leaves the thread's state and version as they are, and is not traced
// (the refusal is, as StartFenced). It reports whether the notice was
// written; when it was not (storage refused it), the refusal stands and
// the transaction writes nothing.
func noteRefused(ctx context.Context, tx Transaction, t *Thread, c Claim, prompt Seq, at time.Time) bool {
	ev := Event{Version: t.Version, Kind: RunRefused, At: at, Message: prompt, Holder: c.Holder}
	return t.Check(ev) == nil && tx.Append(ctx, c.Thread, ev) == nil
}

// Reply answers the request with the message and saves the taken cursor at
// it. It consumes the answer, so it is fenced: it returns ErrThreadBusy,
// and writes nothing, when the claim's holder no longer has the lease (the
// round is then over). It returns ErrOutOfOrder unless the round's current
// plan is this reply, and ErrUnknownRequest, ErrAlreadyAnswered and
// ErrUnknownMessage.
func (w *Workspace) Reply(ctx context.Context, c Claim, req RequestID, answer Seq) error {
	if ctx == nil {
		return nilContext("Reply")
	}
	r, err := w.enter(c, ActionReply, planned(PlanReply, answer, req))
	if err != nil {
		return err
	}
	line, traced, err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		lease, err := w.fence(ctx, tx, w.fences.Reply, c, t, TraceEvent{Action: ActionReplyFenced, Msg: answer, Req: req}, line)
		if err != nil {
			return err
		}
		if err := w.behind(t, answer, false); err != nil {
			return err
		}
		ev := Event{Kind: Answered, At: w.clock.Now(), Message: answer, Request: req, Holder: c.Holder}
		if err := record(ctx, tx, t, &ev); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: ev.Version, Action: ActionReply, Thread: c.Thread, Holder: c.Holder, Msg: answer, Req: req, Taken: answer, Lease: lease}
		return nil
	})
	r.leave(line, traced, err, nil)
	return err
}

// ownRun checks that run is the round's run.
func ownRun(run RunID) func(r *round) error {
	return func(r *round) error {
		if r.run != run {
			return fmt.Errorf("%w: run %d is not the round's run %d", ErrOutOfOrder, run, r.run)
		}
		return nil
	}
}

// Ask opens a request of the round's run with the question and returns
// its id. It consumes nothing and is not fenced. It returns
// ErrRunAbandoned, ErrRunNotActive and ErrUnknownRun, ErrOutOfOrder for
// a run other than the round's own, and ErrInvalidArgument for a question
// CheckText refuses; a refused Ask is not traced, since
// it changes nothing the specification follows.
func (w *Workspace) Ask(ctx context.Context, c Claim, run RunID, question string) (RequestID, error) {
	if ctx == nil {
		return 0, nilContext("Ask")
	}
	if err := CheckText("question", question); err != nil {
		return 0, err
	}
	r, err := w.enter(c, ActionAsk, ownRun(run))
	if err != nil {
		return 0, err
	}
	var id RequestID
	r.mu.Lock()
	asked := r.asked
	r.mu.Unlock()
	line, traced, err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		id = RequestID(len(t.Requests) + 1)
		if id <= asked {
			// Requests are never taken back: storage lost the round's
			// own Ask (see behind), and the question would take its id.
			return fmt.Errorf("%w: thread %q: this round asked request %d, but storage has %d requests: storage lost commits the round saw acknowledged",
				ErrInconsistentLog, c.Thread, asked, len(t.Requests))
		}
		ev := Event{Kind: Asked, At: w.clock.Now(), Run: run, Request: id, Text: question}
		if err := record(ctx, tx, t, &ev); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: ev.Version, Action: ActionAsk, Thread: c.Thread, Holder: c.Holder, Run: run, Req: id, Taken: t.Taken}
		return nil
	})
	r.leave(line, traced, err, nil)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.asked = max(r.asked, id)
	r.mu.Unlock()
	return id, nil
}

// RunEnd records the end of the round's run and, when output is not
// empty, the run's output (its answer to the person) with it, in the same
// transaction: a RunOutput event, which no plan consumes, so it can never
// become a prompt; the thread's Run has it as Output. It is not fenced:
// core refuses it with ErrRunAbandoned once a later claim abandoned the
// run (traced as EndRefused; the round is then over), and then records no
// output either; an end recorded under a lapsed claim consumes nothing.
// It returns ErrRunNotActive for a run that already ended,
// ErrUnknownRun, ErrOutOfOrder for a run other than the round's own, and
// ErrInvalidArgument for an output CheckText refuses: nothing is written
// or traced, and the run stays active for a RunEnd with another output.
func (w *Workspace) RunEnd(ctx context.Context, c Claim, run RunID, output string) error {
	if ctx == nil {
		return nilContext("RunEnd")
	}
	r, err := w.enter(c, ActionRunEnd, ownRun(run))
	if err != nil {
		return err
	}
	line, traced, err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		return w.runEnd(ctx, tx, c, run, output, line)
	})
	r.leave(line, traced, err, nil)
	return err
}

// runEnd records the end of run, and its output, in tx and leaves
// RunEnd's line (or EndRefused's) in line.
func (w *Workspace) runEnd(ctx context.Context, tx Transaction, c Claim, run RunID, output string, line **TraceEvent) error {
	t, err := tx.Thread(ctx, c.Thread)
	if err != nil {
		return err
	}
	ev := Event{Kind: RunEnded, At: w.clock.Now(), Run: run}
	if err := record(ctx, tx, t, &ev); err != nil {
		if errors.Is(err, ErrRunAbandoned) {
			if w.mutants.OutputOfAbandonedRun {
				return w.outputOfAbandoned(ctx, tx, t, c, run, output, line)
			}
			*line = &TraceEvent{Tick: t.Version, Read: true, Action: ActionEndRefused, Thread: c.Thread, Holder: c.Holder, Run: run, Taken: t.Taken}
		}
		return err
	}
	if output != "" {
		out := Event{Version: ev.Version, Kind: RunOutput, At: ev.At, Run: run, Text: output}
		if err := tx.Append(ctx, c.Thread, out); err != nil {
			return err
		}
	}
	*line = &TraceEvent{Tick: ev.Version, Action: ActionRunEnd, Thread: c.Thread, Holder: c.Holder, Run: run, Taken: t.Taken, Output: output != ""}
	return nil
}

// outputOfAbandoned is the mutant Mutants.OutputOfAbandonedRun: the
// output of a run whose end was refused is written anyway, as a write of
// its own, and traced as the RunEnd that wrote it.
func (w *Workspace) outputOfAbandoned(ctx context.Context, tx Transaction, t *Thread, c Claim, run RunID, output string, line **TraceEvent) error {
	out := Event{Kind: RunOutput, At: w.clock.Now(), Run: run, Text: output}
	if err := record(ctx, tx, t, &out); err != nil {
		return err
	}
	*line = &TraceEvent{Tick: out.Version, Action: ActionRunEnd, Thread: c.Thread, Holder: c.Holder, Run: run, Taken: t.Taken, Output: true}
	return nil
}

// steering checks that run is the round's run and msg the steering it
// was given.
func steering(run RunID, msg Seq) func(r *round) error {
	return func(r *round) error {
		if r.run != run || r.steer != msg {
			return fmt.Errorf("%w: the round's run %d was given steering %d, not run %d steering %d",
				ErrOutOfOrder, r.run, r.steer, run, msg)
		}
		return nil
	}
}

// Steer reads the thread and gives the round's active run the oldest
// unconsumed message as steering: a message posted after the run's prompt,
// while the run works. ok is false, and nothing is traced, when there is
// none to give, or when a request is open (the oldest unconsumed message
// answers the oldest open request: Plan). A read: it writes nothing, and
// the message is not consumed until SteerRecord records it; the caller
// gives it to the run's agent first and records it after. Until then the
// round takes only SteerRecord, Renew and Crash. It returns
// ErrRunAbandoned once a later claim abandoned the run, ErrRunNotActive
// once it ended, and ErrOutOfOrder for a run other than the round's own;
// those are not traced.
func (w *Workspace) Steer(ctx context.Context, c Claim, run RunID) (m Message, ok bool, err error) {
	if ctx == nil {
		return Message{}, false, nilContext("Steer")
	}
	r, err := w.enter(c, ActionSteer, ownRun(run))
	if err != nil {
		return Message{}, false, err
	}
	line, traced, err := w.read(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		if err := t.checkActive(run); err != nil && !w.mutants.SteerInactiveRun {
			return err
		}
		next := t.Taken + 1
		if w.mutants.SteerConsumed && t.Taken > 0 {
			next = t.Taken
		}
		if len(t.openRequests()) > 0 || next > t.Last() {
			return nil
		}
		m, ok = t.Messages[next-1], true
		*line = &TraceEvent{Tick: t.Version, Read: true, Action: ActionSteer, Thread: c.Thread, Holder: c.Holder, Msg: next, Run: run, Taken: t.Taken}
		return nil
	})
	r.leave(line, traced, err, nil)
	if err != nil {
		return Message{}, false, err
	}
	return m, ok, nil
}

// SteerRecord records that the round's run was given msg as steering
// (Steer): the message is consumed, the taken cursor saved at it, and the
// thread's Run lists it in Steering. It is not fenced by the claim: like
// RunEnd, core refuses it with ErrRunAbandoned once a later claim
// abandoned the run (traced as SteerRefused; the round is then over, and
// msg stays unconsumed: the next holder gives it again, which is ADR-0069's
// one exception). Since that claim abandons the run before it plans, a
// stalled run's record cannot consume a message another turn took. It
// returns ErrOutOfOrder unless msg is the steering the round's run was
// given.
func (w *Workspace) SteerRecord(ctx context.Context, c Claim, run RunID, msg Seq) error {
	if ctx == nil {
		return nilContext("SteerRecord")
	}
	r, err := w.enter(c, ActionSteerRecord, steering(run, msg))
	if err != nil {
		return err
	}
	line, traced, err := w.update(ctx, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		t, err := tx.Thread(ctx, c.Thread)
		if err != nil {
			return err
		}
		ev := Event{Kind: RunSteered, At: w.clock.Now(), Message: msg, Run: run}
		switch err := t.Check(ev); {
		case errors.Is(err, ErrRunAbandoned) && w.mutants.SteerRecordAfterAbandon:
			return w.steerUnchecked(ctx, tx, t, c, run, msg, line)
		case errors.Is(err, ErrRunAbandoned):
			*line = &TraceEvent{Tick: t.Version, Read: true, Action: ActionSteerRefused, Thread: c.Thread, Holder: c.Holder, Msg: msg, Run: run, Taken: t.Taken}
			return err
		case err != nil:
			return err
		case w.mutants.SteerRecordKeepsCursor:
			return w.steerUnchecked(ctx, tx, t, c, run, msg, line)
		}
		if err := w.behind(t, msg, false); err != nil {
			return err
		}
		if err := record(ctx, tx, t, &ev); err != nil {
			return err
		}
		*line = &TraceEvent{Tick: ev.Version, Action: ActionSteerRecord, Thread: c.Thread, Holder: c.Holder, Msg: msg, Run: run, Taken: msg}
		return nil
	})
	r.leave(line, traced, err, nil)
	return err
}

// steerUnchecked is the mutants Mutants.SteerRecordAfterAbandon (the
// cursor moves to msg, with no event, for an abandoned run) and
// Mutants.SteerRecordKeepsCursor (the event, with no cursor), traced as
// the SteerRecord that wrote them.
func (w *Workspace) steerUnchecked(ctx context.Context, tx Transaction, t *Thread, c Claim, run RunID, msg Seq, line **TraceEvent) error {
	v, err := tx.Bump(ctx, t.ID)
	if err != nil {
		return err
	}
	taken := t.Taken
	if w.mutants.SteerRecordKeepsCursor {
		err = tx.Append(ctx, t.ID, Event{Version: v, Kind: RunSteered, At: w.clock.Now(), Message: msg, Run: run})
	} else {
		taken = msg
		err = tx.SaveTaken(ctx, t.ID, msg)
	}
	if err != nil {
		return err
	}
	*line = &TraceEvent{Tick: v, Action: ActionSteerRecord, Thread: c.Thread, Holder: c.Holder, Msg: msg, Run: run, Taken: taken}
	return nil
}

// RunEndThenStart is RunEnd followed by Plan with nothing between them,
// and, when the plan is a run and at least backlog messages wait after
// its prompt, by that run's RunStart, or, with release, when the plan is
// nothing, by Release: one transaction, where each was one. It records
// the end of the round's run (with its output, as RunEnd does), plans the
// claim's next write from the thread as that write left it, and starts
// the planned run, fenced as RunStart is, or gives the lease up, as
// Release does (a read, when the lease is no longer the claim's). The
// lines it traces carry the transaction's call and return, and nothing
// another process writes comes between them. A negative backlog starts
// nothing: the end and the plan alone, a round trip fewer than RunEnd and
// then Plan. backlog 0 starts every planned run: one write a message
// where there were two, while a thread has a backlog (a runner asks for a
// deeper one: runner.Config.SeparatePlans). release saves the round trip
// of a Release after a turn's last run: the round is over when it returns
// PlanNothing.
//
// started is the run started, or 0: the plan is not a run, the backlog
// is shorter, or the fence refused the start (the claim's holder no
// longer has the lease in the transaction), which then writes nothing of
// the start; the planned run is then RunStart's to start, which records
// a refusal.
//
// With an error nothing else is returned. It is RunEnd's error, and the
// run's end was not recorded, nor anything planned, started or released;
// or the transaction's commit is unknown (ErrCommitUnknown), and the
// round's Crash resolves the end and what followed it together: a storage
// that keeps trace lines has the transaction's lines or none (the Plan's
// among them when a run started), and when it has them, the Crash traces
// the Plan between the writes too, or, after a Release, ends the round
// with no line, as a Release in doubt that committed does.
func (w *Workspace) RunEndThenStart(ctx context.Context, c Claim, run RunID, output string, backlog int, release bool) (p Plan, started RunID, err error) {
	if ctx == nil {
		return Plan{}, 0, nilContext("RunEndThenStart")
	}
	r, err := w.enter(c, ActionRunEnd, ownRun(run))
	if err != nil {
		return Plan{}, 0, err
	}
	var planLine, startLine, releaseLine *TraceEvent
	line, traced, err := w.traced(ctx, w.storage.Update, func(ctx context.Context, tx Transaction, line **TraceEvent) error {
		p, planLine, startLine, releaseLine, started = Plan{}, nil, nil, nil, 0
		if err := w.runEnd(ctx, tx, c, run, output, line); err != nil {
			return err
		}
		t, err := tx.Thread(ctx, c.Thread) // the transaction's own write read back
		if err != nil {
			return err
		}
		p, planLine = planOf(t, c)
		if p.Kind == PlanNothing && release {
			return w.release(ctx, tx, c, t, &releaseLine)
		}
		if p.Kind != PlanRun || backlog < 0 || t.Last()-p.Message < Seq(backlog) {
			return nil
		}
		var refusal *TraceEvent
		lease, err := w.fence(ctx, tx, w.fences.Start, c, t, TraceEvent{Action: ActionStartFenced, Msg: p.Message}, &refusal)
		switch {
		case errors.Is(err, ErrThreadBusy):
			return nil // RunStart's own call records the refusal
		case err != nil:
			return err
		}
		id := t.LastRun() + 1
		ev := runStarted(c, p.Message, id, w.clock.Now())
		if err := record(ctx, tx, t, &ev); err != nil {
			return err
		}
		started = id
		startLine = runStartLine(c, ev, lease)
		return nil
	}, &planLine, &startLine, &releaseLine)
	if err == nil {
		for _, l := range [3]*TraceEvent{planLine, startLine, releaseLine} {
			if l != nil {
				l.Call, l.Return = line.Call, line.Return
				w.trace(l)
			}
		}
	} else {
		if errors.Is(err, ErrCommitUnknown) && line != nil && planLine != nil && startLine != nil {
			pl := *planLine
			pl.Call, pl.Return = line.Call, line.Return
			r.mu.Lock()
			if r.doubtLine == nil {
				r.doubtPlan = &pl // leave makes line the write in doubt
			}
			r.mu.Unlock()
		}
		if errors.Is(err, ErrCommitUnknown) && line != nil && releaseLine != nil && !releaseLine.Read {
			r.mu.Lock()
			if r.doubtLine == nil {
				r.doubtReleased = true
			}
			r.mu.Unlock()
		}
		planLine, startLine, releaseLine = nil, nil, nil
	}
	r.leave(line, traced, err, &p, planLine, startLine, releaseLine)
	if err != nil {
		return Plan{}, 0, err
	}
	return p, started, nil
}

// Crash ends the claim's round without a word to storage: the process died,
// or a runner gave the round up after an error it could not classify (such
// as a storage that cannot be reached, or ErrCommitUnknown). It writes
// nothing; the claim's lease stays until it expires and the next claimant
// abandons whatever the round left active.
//
// From the moment Crash begins until it returns, every other call of the
// round is refused with ErrRoundOver, a Renew too. Its trace line does not
// depend on storage answering: Crash first waits
// for the round's calls in flight (or for ctx), then reads the thread's
// version and taken cursor, and traces its line at them; when that read
// fails (storage unreachable, ctx ended) it traces at the last version the
// round's own lines saw, with the taken cursor they saw: a point of the
// thread's order at which the process was in its round, so the line is
// valid wherever the trace puts the thread's later writes. The one case
// that needs the read is a round with a write whose commit is unknown
// (the write may have committed after that point): then, if the read
// fails, Crash returns the error and the round stays open with only Crash
// allowed; the next Crash, or this workspace's next Claim on the thread,
// tries again. A write in doubt is resolved by that read:
// a Release that committed ends the round with its own line, and a Claim
// that did not commit opened none, so neither is followed by a Crash
// line; WithDoubts reports each resolution.
func (w *Workspace) Crash(ctx context.Context, c Claim) error {
	if ctx == nil {
		return nilContext("Crash")
	}
	r, err := w.enter(c, ActionCrash, nil)
	if err != nil {
		return err
	}
	// Crash counts as a call in flight while it waits for the others, and
	// from now on no other call may begin (enter): one that began after
	// the wait and before finish's read (a renewal timer firing then)
	// would run beside that read, and its write could land after the
	// Crash line.
	r.mu.Lock()
	r.calls--
	if r.calls == 0 {
		close(r.idle)
	}
	r.ending++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.ending--
		r.mu.Unlock()
	}()
	if err := r.wait(ctx); err != nil {
		return err
	}
	return w.finish(ctx, r)
}

// finish ends the round with its Crash line: at the version and taken
// cursor a read sees, or, when storage does not answer and no write of the
// round is in doubt, at the last ones the round's lines saw. When storage
// does not answer and a write is in doubt, the round stays open (only
// Crash may follow) and the error is returned; Claim on the thread tries
// again.
//
// A write in doubt is resolved first, in a transaction that locks the
// thread (so that the write, if it is still in flight, has committed or
// rolled back before it): a storage that keeps trace lines
// (TraceLogReader) says whether the write's line is in its log. A Release
// that committed ended the round itself, and a Claim that did not commit
// opened none: neither is followed by a Crash line. Any other write in
// doubt is followed by one, whatever its outcome: the spec lets Crash
// follow it either way. Without a log to ask (a storage that keeps none,
// or says so: traceKeeper), or a tick to ask it for (a Claim whose one
// round trip's reply was lost), a Claim is taken to have committed when
// the lease is the claim's, and a Release not to have.
func (w *Workspace) finish(ctx context.Context, r *round) error {
	r.mu.Lock()
	switch {
	case r.phase == phaseOver:
		r.mu.Unlock()
		return fmt.Errorf("crash on thread %q: %w", r.thread, ErrRoundOver)
	case r.crashing:
		r.mu.Unlock()
		return fmt.Errorf("crash on thread %q: %w: the round's Crash is in progress", r.thread, ErrOutOfOrder)
	}
	r.crashing = true
	tick, taken, doubt, claimDoubt, inDoubt, doubtPlan, released := r.tick, r.taken, r.doubt, r.claimDoubt, r.doubtLine, r.doubtPlan, r.doubtReleased
	r.mu.Unlock()
	end := func(outcome DoubtOutcome, crashed bool) {
		r.mu.Lock()
		r.end()
		r.mu.Unlock()
		if inDoubt != nil {
			w.doubted(r, outcome, crashed)
		}
	}
	if w.tracer == nil {
		end(DoubtUndecided, false)
		return nil
	}
	line := &TraceEvent{Tick: tick, Read: true, Action: ActionCrash, Thread: r.thread, Holder: r.holder, Taken: taken}
	var (
		version   uint64
		seenTaken Seq
		ours      bool
		outcome   = DoubtUndecided
	)
	read := w.view
	if inDoubt != nil {
		read = w.storage.Update // locks the thread: the write in doubt is over
	}
	rerr := read(ctx, func(ctx context.Context, tx Transaction) error {
		t, err := tx.Thread(ctx, r.thread)
		if err != nil {
			return err
		}
		l, err := tx.Lease(ctx, r.thread)
		if err != nil {
			return err
		}
		version, seenTaken, ours = t.Version, t.Taken, l.Holder == r.holder
		outcome = DoubtUndecided
		if keeper, ok := tx.(traceKeeper); ok && !keeper.KeepsTrace() {
			return nil // no log to ask: decided from the lease
		}
		if log, ok := tx.(TraceLogReader); ok && inDoubt != nil && inDoubt.Tick != 0 {
			ev, found, err := log.LoggedTrace(ctx, r.thread, inDoubt.Tick)
			if err != nil {
				return err
			}
			outcome = DoubtNotCommitted
			if found && ev.Holder == r.holder && ev.Action == inDoubt.Action {
				outcome = DoubtCommitted
			}
		}
		return nil
	})
	switch {
	case rerr != nil && doubt:
		r.mu.Lock()
		r.crashing, r.crashFailed = false, true
		r.mu.Unlock()
		return fmt.Errorf("crash on thread %q after a write whose commit is unknown: the round stays open until storage answers: %w", r.thread, rerr)
	case rerr != nil:
		// Storage did not answer: the last point the round saw.
	case claimDoubt && (outcome == DoubtNotCommitted || outcome == DoubtUndecided && !ours):
		end(outcome, false)
		return nil // the claim did not commit, or its lease is gone: nothing to end
	case inDoubt != nil && (inDoubt.Action == ActionRelease || released) && outcome == DoubtCommitted:
		end(outcome, false)
		return nil // the Release's line, in storage's log, ended the round
	default:
		line.Tick, line.Taken = version, seenTaken
	}
	end(outcome, true)
	if outcome == DoubtCommitted && doubtPlan != nil {
		w.trace(doubtPlan) // the Plan between the two writes storage's log has
	}
	if clock, ok := w.tracer.(TraceClock); ok {
		line.Call = clock.TraceNow()
		line.Return = line.Call
	}
	w.trace(line)
	return nil
}

// doubted reports the round's write in doubt to WithDoubts' function.
func (w *Workspace) doubted(r *round, outcome DoubtOutcome, crashed bool) {
	if w.doubts == nil {
		return
	}
	r.mu.Lock()
	l := r.doubtLine
	r.mu.Unlock()
	if l == nil {
		return
	}
	w.doubts(Doubt{Proc: w.proc, Thread: r.thread, Holder: r.holder, Action: l.Action, Tick: l.Tick, Outcome: outcome, Crashed: crashed})
}

// Answer returns the message that answered the thread's request, and false
// while the request is open. It reads without a trace line: it is no
// action of the specification (runner.Session.Await polls it). It returns
// ErrUnknownThread and ErrUnknownRequest.
func (w *Workspace) Answer(ctx context.Context, id ThreadID, req RequestID) (Message, bool, error) {
	if ctx == nil {
		return Message{}, false, nilContext("Answer")
	}
	var (
		m        Message
		answered bool
	)
	err := w.view(ctx, func(ctx context.Context, tx Transaction) error {
		t, err := tx.Thread(ctx, id)
		if err != nil {
			return err
		}
		q, ok := t.request(req)
		if !ok {
			return fmt.Errorf("%w: request %d of thread %q", ErrUnknownRequest, req, id)
		}
		if q.State == RequestAnswered && int(q.Answer) <= len(t.Messages) {
			m, answered = t.Messages[q.Answer-1], true
		}
		return nil
	})
	return m, answered, err
}
