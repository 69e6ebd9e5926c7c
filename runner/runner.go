package runner

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/threadclaim/threadclaim/core"
)

// Runner works threads: it claims a thread with a fresh holder, turns its
// messages into runs and replies, and releases it. Many runners, in many
// processes, share one storage; the fenced writes keep a message from being
// consumed twice whatever their timing. Runners in one process may share
// one core.Workspace: its rounds are then theirs together, and a turn
// that finds the thread's round open for another of them (a claim the
// Workspace refuses, core.ErrOutOfOrder) ends with OutcomeError, having
// written nothing; a Workspace of its own for each runner avoids it.
// New makes one: the zero Runner's
// Run, TakeTurn and TakeTurns return an error saying so, and given a nil
// ctx one wrapping core.ErrInvalidArgument, having done nothing.
type Runner struct {
	cfg     Config
	ws      *core.Workspace
	tracer  trace.Tracer
	metrics *metrics

	// detached counts agents that wait for an answer past their turn.
	detached sync.WaitGroup

	mu      sync.Mutex
	waiters map[answerKey][]chan struct{} // Session.Await calls, by request

	openMu sync.Mutex
	open   []openRound // rounds whose Crash storage did not answer

	running atomic.Bool // a Run is going on: a second one is refused
}

// errRunning is Run's error when another Run of the same Runner is going
// on.
var errRunning = errors.New("runner: Run is already running on this Runner: one Run at a time (start another Runner for more turns, or raise MaxConcurrentTurns)")

// errNotMade is the error of a Runner that New did not make.
var errNotMade = errors.New("runner: a Runner not made by New (the zero Runner has no Workspace or Agent)")

// made refuses a Runner that New did not make, whose calls would fail on
// its missing configuration.
func (r *Runner) made(ctx context.Context, call string) error {
	switch {
	case r == nil || r.ws == nil:
		return errNotMade
	case ctx == nil:
		return fmt.Errorf("runner: %w: %s given a nil context", core.ErrInvalidArgument, call)
	}
	return nil
}

// openRound is a round whose Crash could not be traced: a write of it
// returned core.ErrCommitUnknown and storage did not answer the Crash's
// read. next is when Run tries its Crash again.
type openRound struct {
	claim core.Claim
	next  time.Time
}

type answerKey struct {
	thread core.ThreadID
	req    core.RequestID
}

// New returns a Runner, or an error naming what is wrong with cfg (it
// wraps core.ErrInvalidArgument).
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

// TakeTurn takes one turn on the thread to its end, renewing the claim every
// RenewEvery while it lasts, and returns the turn's outcome. The error is
// the one behind a failed or busy turn: errors.Is(err, core.ErrThreadBusy)
// for a fenced refusal.
//
// When ctx ends the turn stops gracefully: the running agent's context is
// cancelled, its run's end is recorded, and the claim is released
// (OutcomeStopped). Storage calls are not cut off by ctx, since a write
// cut off in flight may or may not have committed; they are cut off only
// if the turn has not ended ShutdownGrace after ctx did. TakeTurn waits
// for the turn's agent to return, unless it waits for an answer
// (Session.Await), and Run for every agent: one that ignores its ctx keeps
// them from returning, ShutdownGrace or not. A ctx that has ended already
// claims nothing: TakeTurn returns OutcomeStopped and ctx's error.
func (r *Runner) TakeTurn(ctx context.Context, thread core.ThreadID) (Outcome, error) {
	return r.work(ctx, thread, false)
}

// work is TakeTurn; a takeover turn plans once (Config.TakeoverTurns).
func (r *Runner) work(ctx context.Context, thread core.ThreadID, takeover bool) (Outcome, error) {
	if err := r.made(ctx, "TakeTurn"); err != nil {
		return OutcomeError, err
	}
	if err := ctx.Err(); err != nil {
		return OutcomeStopped, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	t := r.NewTurn(thread)
	t.outer, t.takeover = ctx, takeover
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
				err := t.Renew(sctx)
				switch {
				case err == nil:
				case errors.Is(err, core.ErrThreadBusy), errors.Is(err, core.ErrCommitUnknown), sctx.Err() != nil:
					// The claim is lost, or the renewal's outcome is
					// unknown (a write in doubt is not repeated under
					// its holder), or the turn is stopping: no more
					// renewals.
					return
				default:
					// Storage failed it and wrote nothing: the lease
					// may still be the claim's, so try again at the
					// next tick rather than let it lapse.
					r.cfg.Logger.Warn("renew failed; trying again at the next tick", "thread", thread, "err", err)
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
// waits for its turns to stop gracefully (see TakeTurn) and returns nil: a
// runner stopped by its context (cancelled or past its deadline) is not a
// failure. (Before issue 24 it returned ctx's error; a caller that wants
// to know why it stopped reads ctx.Err().) A Runner runs one Run at a
// time: a call while another goes on returns an error at once. It keeps up to MaxConcurrentTurns turns going at once, each on
// its own thread. It looks for work every PollEvery; at once when Wake
// delivers the empty ThreadID (once Wake is closed, it polls); and when a
// turn ends, always without Wake, and with it only when a sweep (its
// first look, or one the empty ThreadID asked for) found work that no
// slot was free to start. A thread Wake names it claims at once, with no
// look (see Config.Wake); when no slot is free, or a turn of its own has
// the thread, at the next turn's end. With Wake a poll takes only the
// free threads an earlier look found waiting too, so that it does not
// claim a thread whose wake-up is on its way to a runner; and the threads
// a poll found and could not start wait for their wake-up or a later
// poll, except those found waiting at three looks before that poll: each
// turn's end claims the next of those, the longest waiting first, so that
// runners that share the threads unevenly share a backlog evenly; past a
// fifth of PollEvery after that poll it lists the threads again first,
// and leaves those another runner has claimed since. (A
// look at each turn's end instead, which claimed every thread waiting,
// kept runners that had fallen behind from catching up: most of what it
// found was on its way to another runner; issue 25.)
//
// Of the threads with work it starts first those whose lease has expired
// by Clock, the longest expired first (from one of the first four of that
// order, drawn at each look, so that runners that see the same threads
// lapse spread over them): their holder stopped renewing, and may be dead.
// When every slot is taken it still looks every PollEvery for such
// threads, and takes them over in its TakeoverTurns slots (short
// turns: see Config), so that a dead runner's thread is claimed within
// ClaimTTL + PollEvery of its last renewal whatever the load. The threads
// nobody holds it starts the longest waiting first (since its looks first
// found each free with work; from one of the first sixteen, drawn at each
// look, so that runners that look at once begin at different threads): a
// thread waits behind those that had work before it, and a thread a
// bounded turn left (OutcomeYielded) behind the others.
// Failed turns do not stop it: another claim has the thread, or storage
// will be tried again. Each turn is reported to Logger and OnTurn. At
// each look it first tries again to end the rounds whose Crash storage
// did not answer when a turn crashed, at most once every PollEvery each.
//
// Run spends no storage round trip it can do without, since those are
// what bounds how many messages a fleet consumes a second: a wake-up that
// names a thread costs no look, nor does the end of its turn when nothing
// else waits; while all its turns are going it looks only every
// PollEvery, for expired leases (a wake-up waits for a free slot); it
// leaves out the
// threads whose lease another holder has and has not let expire (that
// holder's turn plans every message posted meanwhile, and a storage that
// wakes runners, as the PostgreSQL Store does, wakes them again when the
// holder releases a thread with work left); and a thread whose claim it
// found held by another holder all the same (OutcomeBusy: the listing was
// stale) it leaves out of its looks for PollEvery.
func (r *Runner) Run(ctx context.Context) error {
	if err := r.made(ctx, "Run"); err != nil {
		return err
	}
	if !r.running.CompareAndSwap(false, true) {
		return errRunning
	}
	defer r.running.Store(false)
	s := r.newScheduler(ctx)
	defer r.detached.Wait()
	defer func() {
		s.wg.Wait()
		r.endOpenRounds(ctx)
	}()
	wake := r.cfg.Wake
	// fresh: the next look takes every free thread with work. Without
	// it, a look with Wake (a poll) takes only those an earlier look
	// found waiting too: a post's wake-up is on its way to one runner,
	// which claims the thread at once, and a poll that took it as well
	// would make one of the two claims find it taken, or nothing left.
	needLook, asked, fresh := true, false, true
	// poll is the timer of the next poll, PollEvery after the last look:
	// a wake-up that names a thread makes no look, and must not put the
	// poll off, or wake-ups coming faster than PollEvery would keep Run
	// from ever looking for lapsed leases.
	var poll <-chan time.Time
	for {
		r.retryCrashes(ctx)
		if needLook && !(s.full() && len(s.takeovers) == cap(s.takeovers)) {
			// (Every slot taken: nothing found could start. A turn's
			// end makes Run look.)
			s.lookAndLaunch(asked, fresh || wake == nil)
			needLook, asked, fresh, poll = false, false, false, nil
		}
		if poll == nil {
			poll = r.cfg.Clock.After(r.cfg.PollEvery)
		}
		w := wake
		if s.full() {
			w = nil // a wake-up brings no expired lease
		}
		select {
		case <-ctx.Done():
			return nil
		case <-poll:
			needLook, poll = true, nil
		case <-s.ended:
			// Without wake-ups, a turn's end is when Run learns of work
			// sooner than the poll. With them it claims, with no look,
			// the threads wake-ups named that no slot could take then
			// (rewake) and a poll's leftover; only work a sweep found
			// and could not start (behind) waits for a look.
			behind := s.takeBehind()
			for _, id := range s.takeRewake() {
				s.wakeFor(id)
			}
			s.launchLeftover()
			needLook, fresh = needLook || wake == nil || behind, fresh || behind
		case id, ok := <-w:
			switch {
			case !ok:
				wake, needLook = nil, true // closed: polling alone from now on (every look fresh)
			case id == "":
				needLook, asked, fresh = true, true, true
			default:
				s.wakeFor(id)
			}
		}
	}
}

// newScheduler returns the state of a Run whose context is ctx.
func (r *Runner) newScheduler(ctx context.Context) *scheduler {
	return &scheduler{
		r:         r,
		ctx:       ctx,
		rng:       newRand(),
		slots:     make(chan struct{}, r.cfg.MaxConcurrentTurns),
		takeovers: make(chan struct{}, max(r.cfg.TakeoverTurns, 0)),
		ended:     make(chan struct{}, 1),
		jobs:      make(chan turnJob),
		busy:      map[core.ThreadID]bool{},
		again:     map[core.ThreadID]bool{},
		held:      map[core.ThreadID]time.Time{},
		waiting:   map[core.ThreadID]uint64{},
	}
}

// scheduler is one Run's state: its turn slots and takeover slots, the
// threads it is working and those it found held by another holder.
type scheduler struct {
	r         *Runner
	ctx       context.Context
	rng       *rand.Rand
	slots     chan struct{}
	takeovers chan struct{}
	ended     chan struct{} // a turn ended: Run starts what waits for a slot, or looks
	jobs      chan turnJob  // a launched turn, to a worker whose turn ended (worker)
	wg        sync.WaitGroup

	mu   sync.Mutex
	busy map[core.ThreadID]bool
	// again holds the threads a wake-up named while this Run's own turn
	// had them (a release that left work, seen before the turn was over),
	// true, and those a look asked for by a wake-up found busy here,
	// false: the turn's end puts the thread in rewake, unless the turn
	// found the thread held by another holder and only a look asked.
	again map[core.ThreadID]bool
	// rewake holds the threads a wake-up named that Run claims at the
	// next turn's end, with no look: again's, and those no slot was free
	// for.
	rewake []core.ThreadID
	// leftover holds the free threads the last poll found waiting at
	// stealAfter looks before it and could not start, the longest
	// waiting first: a turn's end claims the next of them, with no look
	// while the listing they come from is fresh (leftAt: see
	// refreshLeftover). Only Run's goroutine uses them, and stillFree.
	leftover   []core.ThreadID
	leftAt     time.Time
	stillFree  map[core.ThreadID]bool
	lastListed int // threads the last listing (a look's, or the leftover's) had
	// behind: a sweep (a look that took every free thread with work) or a
	// look's lapsed leases left work that no slot was free to start; the
	// next turn's end makes Run look, and that look is a sweep.
	behind bool
	held   map[core.ThreadID]time.Time // threads found claimed by another, and when
	// waiting holds, for each free thread with work, the look that first
	// found it so (looks counts them): the free threads are taken the
	// longest waiting first.
	waiting map[core.ThreadID]uint64
	looks   uint64
	salt    uint64 // this runner's order of the threads found in one look
	// listed and keyed are order's, kept from look to look so that a look
	// does not allocate them anew.
	listed map[core.ThreadID]bool
	keyed  []orderKey
}

// rank places a thread among those one look found, by a hash of its id
// salted by this runner's own draw: runners break the tie each their own
// way, so that those that look at once begin at different threads.
func (s *scheduler) rank(id core.ThreadID) uint64 {
	x := uint64(14695981039346656037) // FNV-1a of the id
	for i := range len(id) {
		x = (x ^ uint64(id[i])) * 1099511628211
	}
	x ^= s.salt
	// splitmix64's finalizer: a salt's bits reach every bit of the rank.
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// takeoverWindow and lookWindow are how many of the longest-expired
// lapsed threads, and of the longest-waiting free ones, a look draws the
// first it takes from. A wider window spreads runners that look at once
// over more threads (fewer claims that find the thread taken), a
// narrower one keeps closer to the order: the free threads' was measured
// (issue 25; store/postgres/BENCH.md): 4 made a claim find its thread
// taken often enough to raise post-to-start's median fivefold at a
// steady 1,250 messages a second, 16 did not, and both cut the tail under
// a steady stream of posts. A dead runner leaves few threads: four spread them.
const (
	takeoverWindow = 4
	lookWindow     = 16
)

// stealAfter is how many looks before a poll a free thread must have
// been found waiting at for the poll to leave it to the next turn's end
// when no slot was free (leftover): with wake-ups, a runner that left its
// turn slots to its own wake-ups then takes, at each turn's end, the
// longest-waiting thread whose wake-up's runner has not started it for
// so long, which under a backlog evens the work out among the runners
// (their shares of the threads differ, and so do their threads'
// messages). A thread found waiting at fewer looks is, under load, most
// often one whose wake-up is on its way to its runner or waits there for
// a slot: claiming those at each turn's end found many taken, and kept
// runners that fell behind from catching up (issue 25: measured with 1;
// store/postgres/BENCH.md).
const stealAfter = 3

// leftoverFresh: a turn's end claims the next thread of a poll's
// leftover with no look only within PollEvery/leftoverFresh of the
// listing it comes from; later, it lists the threads again first and
// drops from the leftover those another runner has claimed since
// (refreshLeftover). Under a steady stream of posts every runner's poll
// finds the same threads waiting, and each runner claims its leftover
// one turn's end at a time until its next poll: claimed from the poll's
// listing alone, 32-37% of those claims found the thread taken by
// another runner's turn end since: 0.017-0.042 claims a message while 4
// or 16 posters posted (issue 25's target is 0.05), 0.003-0.0098 with
// the listing brought up to date, for 0.02-0.035 listings a message more
// and the same posting rate and tail. Dropping a stale leftover instead
// cut them as much and cost the posting p99 1.3-1.6x: the threads it
// held then waited for the next poll (store/postgres/BENCH.md).
const leftoverFresh = 5

// refreshRows bounds what a leftover's listing may cost: it is made only
// when the last listing had at most refreshRows threads for each thread
// of the leftover, so that the rows it reads grow with the claims it may
// save, not with every thread that has work. On PostgreSQL, with the
// benchmarks' 25-65 threads with work, a listing cost the server about
// 0.11 ms, and a claim that found its thread taken about 0.13-0.15 ms
// and a round trip (store/postgres/BENCH.md); a listing's cost grows
// with the threads it lists, a claim's does not. Past the bound the
// leftover is claimed as the poll left it.
const refreshRows = 16

// full reports whether every ordinary turn slot is taken.
func (s *scheduler) full() bool { return len(s.slots) == cap(s.slots) }

// look lists the threads with work and returns those whose lease has
// lapsed, in the order Run takes them over, and the free ones, in order
// (see order).
//
// fresh: take every free thread with work; otherwise only those an
// earlier look found waiting too (order).
//
// asked: a wake-up asked for the look (the empty id), in place of the
// names it did not give, a release of a thread this Run's turn still has
// among them; such a thread, listed with work, is looked at again when
// its turn ends, as a wake-up that names it would make it (wakeFor).
func (s *scheduler) look(asked, fresh bool) (lapsed, free []core.ThreadID) {
	r := s.r
	list, err := r.ws.Pending(s.ctx)
	if err != nil && s.ctx.Err() == nil {
		r.cfg.Logger.Warn("list threads with work", "err", err)
	}
	now := r.cfg.Clock.Now()
	s.lastListed = len(list)
	var expired []core.PendingThread
	free = make([]core.ThreadID, 0, len(list))
	for _, p := range list {
		switch {
		case p.Lease.Holder == "":
			free = append(free, p.ID)
		case p.Lease.Expired(now):
			expired = append(expired, p)
		}
	}
	// The longest expired first: a live holder whose clock runs behind
	// Run's renews a lease that looks expired here, but its expiry keeps
	// moving on; a dead holder's stays where it was. From one of the
	// first takeoverWindow of that order, drawn at each look: every runner
	// sees the same threads lapse at once (a runner died), and runners
	// that all began at the oldest would all claim it, one winning, the
	// rest holding its row for a round trip each and leaving the others
	// for a later look.
	slices.SortStableFunc(expired, func(a, b core.PendingThread) int { return a.Lease.ExpiresAt.Compare(b.Lease.ExpiresAt) })
	startWithin(s.rng, expired, takeoverWindow)
	for _, p := range expired {
		lapsed = append(lapsed, p.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	free = s.order(free, fresh)
	for id, at := range s.held {
		if now.Sub(at) >= r.cfg.PollEvery {
			delete(s.held, id)
		}
	}
	for _, p := range list {
		if asked && s.busy[p.ID] {
			if _, ok := s.again[p.ID]; !ok {
				s.again[p.ID] = false // a named wake-up's true stays
			}
		}
	}
	return lapsed, free
}

// order puts the free threads with work the longest waiting first (by the
// look that first found each free with work, then by rank),
// and then starts them at one of the first lookWindow, drawn at each
// look, the ones before it going last. The longest waiting first bounds a
// thread's wait by the threads ahead of it: drawn from all of them, as
// before, a thread could be passed over look after look (the tail of
// post-to-start under a steady stream of posts). The draw keeps runners
// that look at once (each at its turn's end) from all beginning at the same
// thread, all but one of them finding it taken. Unless fresh, it keeps
// only the threads an earlier look found waiting too (free with work at
// every look since). It returns the threads to take, in order.
func (s *scheduler) order(free []core.ThreadID, fresh bool) []core.ThreadID {
	s.looks++
	for _, id := range free {
		if _, ok := s.waiting[id]; !ok {
			s.waiting[id] = s.looks
		}
	}
	if len(s.waiting) > len(free) {
		// Forget the threads no longer free with work.
		if s.listed == nil {
			s.listed = make(map[core.ThreadID]bool, len(free))
		}
		clear(s.listed)
		for _, id := range free {
			s.listed[id] = true
		}
		for id := range s.waiting {
			if !s.listed[id] {
				delete(s.waiting, id)
			}
		}
	}
	if s.salt == 0 {
		s.salt = s.rng.Uint64() | 1
	}
	// Each thread's keys once, not at each comparison.
	keyed := s.keyed[:0]
	for _, id := range free {
		keyed = append(keyed, orderKey{waiting: s.waiting[id], rank: s.rank(id), id: id})
	}
	slices.SortFunc(keyed, func(a, b orderKey) int {
		return cmp.Or(cmp.Compare(a.waiting, b.waiting), cmp.Compare(a.rank, b.rank), cmp.Compare(a.id, b.id))
	})
	for i := range keyed {
		free[i] = keyed[i].id
	}
	s.keyed = keyed[:0]
	if !fresh {
		// The longest waiting come first: keep those an earlier look
		// found waiting too.
		n := 0
		for n < len(free) && s.waiting[free[n]] < s.looks {
			n++
		}
		free = free[:n]
	}
	startWithin(s.rng, free, lookWindow)
	return free
}

// orderKey is a free thread's place in order's sort: the look that first
// found it waiting, then its rank.
type orderKey struct {
	waiting, rank uint64
	id            core.ThreadID
}

// startWithin rotates list in place so that it starts at one of its first
// window elements, drawn from rng, the ones before it going last.
func startWithin[T any](rng *rand.Rand, list []T, window int) {
	if n := len(list); n > 1 {
		k := rng.IntN(min(n, window))
		// list[k:] then list[:k], in place: each part reversed, then all.
		slices.Reverse(list[:k])
		slices.Reverse(list[k:])
		slices.Reverse(list)
	}
}

// lookAndLaunch looks for work and starts what it found, in order (see
// look): the lapsed threads until no slot takes them, then the free ones
// until no slot is free. asked and fresh are look's. Lapsed threads left
// unstarted make it behind, and so do free ones when fresh (a sweep: the
// next turn's end looks again). A poll's free threads left unstarted
// (with wake-ups, not fresh) are mostly, under load, those whose wake-up
// is on its way to a runner or waits there for a slot: a look at each
// turn's end that claimed them, finding many taken, kept runners that
// had fallen behind from catching up (issue 25, store/postgres/BENCH.md).
// Those found waiting at stealAfter looks before are the leftover; the
// others wait for their wake-up or the next poll.
func (s *scheduler) lookAndLaunch(asked, fresh bool) {
	lapsed, free := s.look(asked, fresh)
	if s.launchAll(lapsed, true) < len(lapsed) {
		s.setBehind()
	}
	n := s.launchAll(free, false)
	switch {
	case n == len(free):
		s.leftover = nil
	case fresh:
		s.leftover = nil
		s.setBehind()
	default:
		s.leftover, s.leftAt = s.leftover[:0], s.r.cfg.Clock.Now()
		s.mu.Lock()
		for _, id := range free[n:] {
			if s.looks-s.waiting[id] >= stealAfter {
				s.leftover = append(s.leftover, id)
			}
		}
		s.mu.Unlock()
	}
}

// launchLeftover launches the first thread of leftover that is neither
// this Run's nor found held by another, if a slot is free, and drops it
// and those it passed over from leftover. A leftover older than
// PollEvery/leftoverFresh is brought up to date first (refreshLeftover).
func (s *scheduler) launchLeftover() {
	if len(s.leftover) > 0 && !s.full() {
		s.refreshLeftover()
	}
	for len(s.leftover) > 0 && s.ctx.Err() == nil {
		id := s.leftover[0]
		s.mu.Lock()
		_, other := s.held[id]
		skip := s.busy[id] || other
		s.mu.Unlock()
		if !skip && !s.launch(id, false) {
			return
		}
		s.leftover = s.leftover[1:]
		if !skip {
			return
		}
	}
}

// refreshLeftover lists the threads with work again when the leftover's
// listing is older than PollEvery/leftoverFresh and the last listing
// was small enough for the leftover's length (refreshRows), and keeps in the
// leftover, in its order, only the threads that are still free with work:
// those another holder has claimed since, or whose work was done, would
// each cost a claim that finds them taken, or finds nothing. When the
// listing fails, the leftover stays as it was (the claims decide).
func (s *scheduler) refreshLeftover() {
	r := s.r
	now := r.cfg.Clock.Now()
	if now.Sub(s.leftAt) <= r.cfg.PollEvery/leftoverFresh || s.lastListed > refreshRows*len(s.leftover) {
		return
	}
	list, err := r.ws.Pending(s.ctx)
	if err != nil {
		return
	}
	s.leftAt, s.lastListed = now, len(list)
	if s.stillFree == nil {
		s.stillFree = make(map[core.ThreadID]bool, len(list))
	}
	clear(s.stillFree)
	for _, p := range list {
		if p.Lease.Holder == "" {
			s.stillFree[p.ID] = true
		}
	}
	s.leftover = slices.DeleteFunc(s.leftover, func(id core.ThreadID) bool { return !s.stillFree[id] })
}

// launchAll launches each thread in turn until one finds no slot, and
// returns how many it went through: len(ids) unless one found no slot.
func (s *scheduler) launchAll(ids []core.ThreadID, lapsed bool) int {
	for i, id := range ids {
		if s.ctx.Err() != nil || !s.launch(id, lapsed) {
			return i
		}
	}
	return len(ids)
}

// wakeFor starts a turn on the thread a wake-up named, with no look: it
// was given work while nobody held it (see Config.Wake). A thread found
// held by another holder before is claimed all the same; one this Run is
// working is claimed again when its turn ends, and so is one no slot was
// free for at the next turn's end.
func (s *scheduler) wakeFor(id core.ThreadID) {
	s.mu.Lock()
	if s.busy[id] {
		s.again[id] = true
		s.mu.Unlock()
		return
	}
	delete(s.held, id)
	s.mu.Unlock()
	if !s.launch(id, false) {
		s.mu.Lock()
		s.rewake = append(s.rewake, id)
		s.mu.Unlock()
	}
}

// takeRewake returns the threads to claim at a turn's end (rewake), and
// clears them.
func (s *scheduler) takeRewake() []core.ThreadID {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.rewake
	s.rewake = nil
	return ids
}

func (s *scheduler) setBehind() {
	s.mu.Lock()
	s.behind = true
	s.mu.Unlock()
}

// takeBehind reports whether work waits for a look (behind), and clears
// it: the look it brings finds that work again.
func (s *scheduler) takeBehind() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.behind
	s.behind = false
	return b
}

// launch starts a turn on the thread in a free slot, a takeover slot when
// lapsed and no other is free; it returns false when none is.
func (s *scheduler) launch(id core.ThreadID, lapsed bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, other := s.held[id]; s.busy[id] || other {
		return true
	}
	slot, takeover := s.slots, false
	select {
	case s.slots <- struct{}{}:
	default:
		if !lapsed {
			return false
		}
		select {
		case s.takeovers <- struct{}{}:
			slot, takeover = s.takeovers, true
		default:
			return false
		}
	}
	s.busy[id] = true
	t := turnJob{id: id, takeover: takeover, slot: slot}
	select {
	case s.jobs <- t: // a worker that ended its turn takes it
	default:
		s.wg.Add(1)
		go s.worker(t)
	}
	return true
}

// turnJob is a turn launch started: its thread, whether it is a takeover,
// and the slot it holds.
type turnJob struct {
	id       core.ThreadID
	takeover bool
	slot     chan struct{}
}

// worker takes turns: t, then each launch hands it while it waits, until
// Run's context ends. A worker outlives its turn so that the next turn
// runs on a stack grown already: a goroutine a turn grew from its first
// few kilobytes through the storage's calls, copying it at each doubling
// (a twentieth of a runner's CPU on PostgreSQL, BenchmarkRunnerLoadedLatency).
// There are at most as many workers as turns ever went at once.
func (s *scheduler) worker(t turnJob) {
	defer s.wg.Done()
	for {
		s.turn(t)
		select {
		case t = <-s.jobs:
		case <-s.ctx.Done():
			return
		}
	}
}

// turn takes the turn t, then frees its slot and tells Run it ended.
func (s *scheduler) turn(t turnJob) {
	o, _ := s.r.work(s.ctx, t.id, t.takeover)
	s.mu.Lock()
	delete(s.busy, t.id)
	if o == OutcomeBusy {
		s.held[t.id] = s.r.cfg.Clock.Now()
	}
	if named, ok := s.again[t.id]; ok {
		// A wake-up named the thread, or a look found it busy here,
		// while the turn went on: claim it again. Not when only a look
		// asked and the turn found the thread held by another holder,
		// whose work it is: it is left out for PollEvery, as a look
		// leaves it. A named wake-up says nobody held it when its work
		// came, so it is claimed all the same (see wakeFor).
		delete(s.again, t.id)
		if named || o != OutcomeBusy {
			s.rewake = append(s.rewake, t.id)
		}
	}
	s.mu.Unlock()
	<-t.slot
	select {
	case s.ended <- struct{}{}:
	default:
	}
}

// TakeTurns takes a turn, one at a time, on each thread that has a message
// to consume or a run an earlier claim left active
// (core.Workspace.Pending), whoever holds it, and returns the storage
// error listing them, if any. It first tries again to end the rounds
// whose Crash storage did not answer.
func (r *Runner) TakeTurns(ctx context.Context) error {
	if err := r.made(ctx, "TakeTurns"); err != nil {
		return err
	}
	r.retryCrashes(ctx)
	list, err := r.ws.Pending(ctx)
	if err != nil {
		return fmt.Errorf("list threads with work: %w", err)
	}
	for _, p := range list {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_, _ = r.TakeTurn(ctx, p.ID)
	}
	return nil
}

// leftOpen records a round whose Crash storage did not answer, for
// retryCrashes.
func (r *Runner) leftOpen(c core.Claim) {
	r.openMu.Lock()
	defer r.openMu.Unlock()
	r.open = append(r.open, openRound{claim: c})
}

// OpenRounds counts the rounds this runner gave up whose Crash storage has
// not answered yet: each had a write whose commit is unknown, and waits
// for Run (or TakeTurns) to trace its end, or for a claim of its thread by
// this runner's workspace, which tries first.
func (r *Runner) OpenRounds() int {
	r.openMu.Lock()
	defer r.openMu.Unlock()
	return len(r.open)
}

// retryCrashes tries again, once each, the Crash of every round left open
// (leftOpen) whose retry is due by Clock, and forgets those that ended:
// traced now, or ended meanwhile by a claim of the thread (Workspace.Claim
// ends such a round first). One that fails again is retried no sooner
// than PollEvery later. It never waits for storage to come back: a
// deterministic scheduler that drives turns step by step never calls it,
// and Run calls it once a look.
func (r *Runner) retryCrashes(ctx context.Context) {
	now := r.cfg.Clock.Now()
	r.openMu.Lock()
	var due []core.Claim
	for i := range r.open {
		if !now.Before(r.open[i].next) {
			due = append(due, r.open[i].claim)
			r.open[i].next = now.Add(r.cfg.PollEvery)
		}
	}
	r.openMu.Unlock()
	for _, c := range due {
		if ctx.Err() != nil {
			return
		}
		err := r.ws.Crash(ctx, c)
		if !roundEnded(err) {
			r.cfg.Logger.Warn("end a round whose write's commit is unknown", "thread", c.Thread, "holder", c.Holder, "err", err)
			continue
		}
		r.openMu.Lock()
		r.open = slices.DeleteFunc(r.open, func(o openRound) bool { return o.claim == c })
		r.openMu.Unlock()
	}
}

// endOpenRounds is Run's last tries, as it stops, at the Crash of every
// round still open: at once, whether or not its retry is due, and then
// every PollEvery while any is open (storage may answer again by then: a
// first query on a connection the server dropped fails, a restarting
// server comes back), since an open round is a write whose outcome the
// trace never settles. The tries are cut off ShutdownGrace after they
// start.
func (r *Runner) endOpenRounds(ctx context.Context) {
	r.openMu.Lock()
	n := len(r.open)
	for i := range r.open {
		r.open[i].next = time.Time{}
	}
	r.openMu.Unlock()
	if n == 0 {
		return
	}
	grace := r.cfg.Clock.After(r.cfg.ShutdownGrace)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-grace:
			cancel()
		case <-sctx.Done():
		}
	}()
	for {
		r.retryCrashes(sctx)
		if r.OpenRounds() == 0 {
			return
		}
		select {
		case <-sctx.Done():
			return
		case <-r.cfg.Clock.After(r.cfg.PollEvery):
		}
	}
}

// newRand returns a generator seeded from crypto/rand: runners that start
// at once draw apart.
func newRand() *rand.Rand {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand's Read)
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])))
}

// roundEnded says whether Crash's error leaves no round to end: it traced
// the end (nil), the round was over already, or the claim is not one of
// this workspace's rounds.
func roundEnded(err error) bool {
	return err == nil || errors.Is(err, core.ErrRoundOver) || errors.Is(err, core.ErrInvalidArgument)
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
