package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Event is one fault the nemesis injected, with its start and end as
// offsets from the run's start (End equals Start for an instant fault).
type Event struct {
	Kind   Kind          `json:"kind"`
	Target string        `json:"target,omitempty"` // the worker, or "" for the server
	Start  time.Duration `json:"start_ns"`
	End    time.Duration `json:"end_ns"`
	Detail string        `json:"detail"`
	Err    string        `json:"error,omitempty"` // the fault could not be injected
}

// kill is a SIGKILL, for the handover figures.
type kill struct {
	proc *proc
	at   time.Time
}

// nemesis injects faults until ctx ends: one every NemesisEvery on
// average (uniform in half to one and a half of it), on a worker drawn
// from the run's seeded source, of the kind next in a deck of the kinds
// it shuffles with that source: every kind is injected once before any is
// twice, so that a short run has each (a kind that finds no free worker
// or its lock taken stays next). Faults overlap in time but
// hold their worker (a slot) alone. When ctx ends, faults in progress heal
// at once; nemesis returns after they have. It returns the first error
// that makes the run impossible (a replacement worker that cannot start).
func (r *run) nemesis(ctx context.Context) error {
	if len(r.cfg.Nemesis) == 0 {
		<-ctx.Done()
		return nil
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	fatal := make(chan error, 1)
	var restarting, rewinding sync.Mutex
	deck := kindDeck{kinds: r.cfg.Nemesis}
	for {
		r.mu.Lock()
		wait := time.Duration(float64(r.cfg.NemesisEvery) * (0.5 + r.rng.Float64()))
		kind := deck.next(r.rng)
		free := make([]*slot, 0, len(r.slots))
		for _, s := range r.slots {
			s.mu.Lock()
			if !s.busy {
				free = append(free, s)
			}
			s.mu.Unlock()
		}
		var s *slot
		if len(free) > 0 {
			s = free[r.rng.IntN(len(free))]
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case err := <-fatal:
			return err
		case <-time.After(wait):
		}
		if kind == KindRestart || kind == KindLose {
			if !restarting.TryLock() {
				continue
			}
			deck.take()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer restarting.Unlock()
				r.inject(ctx, kind, nil)
			}()
			continue
		}
		if s == nil {
			continue
		}
		// One rewind at a time: it holds the other workers meanwhile.
		if kind == KindRewind && !rewinding.TryLock() {
			continue
		}
		s.mu.Lock()
		if s.busy {
			s.mu.Unlock()
			if kind == KindRewind {
				rewinding.Unlock()
			}
			continue
		}
		s.busy = true
		s.mu.Unlock()
		deck.take()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if kind == KindRewind {
				defer rewinding.Unlock()
			}
			defer func() {
				s.mu.Lock()
				s.busy = false
				s.mu.Unlock()
			}()
			if err := r.inject(ctx, kind, s); err != nil {
				select {
				case fatal <- err:
				default:
				}
			}
		}()
	}
}

// kindDeck deals the nemesis's kinds: each once, in an order shuffled
// with the run's source, before any of them twice.
type kindDeck struct {
	kinds []Kind
	left  []Kind // the kinds still to deal in this round; the last is next
}

// next is the kind to inject next, a new round shuffled when the last is
// dealt. It stays next until take.
func (d *kindDeck) next(rng *rand.Rand) Kind {
	if len(d.left) == 0 {
		d.left = slices.Clone(d.kinds)
		rng.Shuffle(len(d.left), func(i, j int) { d.left[i], d.left[j] = d.left[j], d.left[i] })
	}
	return d.left[len(d.left)-1]
}

// take deals the kind next returned: it was injected.
func (d *kindDeck) take() { d.left = d.left[:len(d.left)-1] }

// between draws a duration in [lo, hi], both ends included, from the
// run's source: between(0, 1) is a coin the nemesis flips.
func (r *run) between(lo, hi time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)+1))
}

// hold waits d or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// inject performs one fault of kind on slot s (nil for the server) and
// records it. Its error is fatal to the run.
func (r *run) inject(ctx context.Context, kind Kind, s *slot) error {
	ttl := r.cfg.TTL
	ev := Event{Kind: kind, Start: time.Since(r.start)}
	var p *proc
	if s != nil {
		p = s.current()
		ev.Target = p.name
	}
	var fatal error
	fail := func(err error) { ev.Err = err.Error() }
	switch kind {
	case KindStop:
		d := r.between(3*ttl/2, 4*ttl)
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			fail(err)
			break
		}
		hold(ctx, d)
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			fail(err)
		}
		ev.Detail = fmt.Sprintf("SIGSTOP, SIGCONT after %v", d.Round(time.Millisecond))
		p.note("stopped %v", d.Round(time.Millisecond))
	case KindKill:
		p.setMeant()
		at := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			fail(err)
			break
		}
		<-p.done
		p.note("SIGKILL")
		r.mu.Lock()
		r.kills = append(r.kills, kill{p, at})
		r.mu.Unlock()
		np, err := r.startWorker(s)
		if err != nil {
			fail(err)
			fatal = err
			break
		}
		ev.Detail = fmt.Sprintf("SIGKILL, replaced by %s", np.name)
	case KindClock:
		jump := r.between(ttl, 3*ttl)
		if r.between(0, 1) == 0 {
			jump = -jump
		}
		d := r.between(2*ttl, 4*ttl)
		if err := p.setOffset(s.skew + jump); err != nil {
			fail(err)
			break
		}
		hold(ctx, d)
		if err := p.setOffset(s.skew); err != nil {
			fail(err)
		}
		ev.Detail = fmt.Sprintf("lease clock %+v for %v, then back", jump.Round(time.Millisecond), d.Round(time.Millisecond))
		p.note("clock %+v for %v", jump.Round(time.Millisecond), d.Round(time.Millisecond))
	case KindTerminate:
		what, err := r.cluster.terminate(ctx, appName(r.schema, p.name), ttl, r.pick())
		if err != nil {
			fail(err)
			break
		}
		if what == "" {
			what = "no session to end"
		}
		ev.Detail = "pg_terminate_backend: " + what
	case KindRestart, KindLose:
		if err := r.restartCluster(ctx, kind, &ev); err != nil {
			fail(err)
		}
	case KindPartition:
		d := r.between(ttl, 3*ttl)
		s.proxy.Partition(true)
		hold(ctx, d)
		s.proxy.Partition(false)
		ev.Detail = fmt.Sprintf("cut off from PostgreSQL for %v", d.Round(time.Millisecond))
	case KindLatency:
		lat := r.between(ttl/4, ttl)
		d := r.between(2*ttl, 4*ttl)
		s.proxy.SetLatency(lat)
		hold(ctx, d)
		s.proxy.SetLatency(0)
		ev.Detail = fmt.Sprintf("+%v a round trip for %v", lat.Round(time.Millisecond), d.Round(time.Millisecond))
	case KindRetire:
		fatal = r.retire(ctx, s, p, &ev)
	case KindRewind:
		r.rewind(ctx, s, &ev)
	case KindCommit:
		delay := r.between(ttl+ttl/10, 2*ttl)
		d := r.between(2*ttl, 4*ttl)
		before, _ := s.proxy.Commits()
		s.proxy.DelayCommits(delay)
		hold(ctx, d)
		s.proxy.DelayCommits(0)
		after, _ := s.proxy.Commits()
		ev.Detail = fmt.Sprintf("COMMITs held %v for %v (%d held)", delay.Round(time.Millisecond), d.Round(time.Millisecond), after-before)
	}
	ev.End = time.Since(r.start)
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	return fatal
}

// restartCluster restarts the cluster for KindRestart (fast or immediate,
// drawn) or KindLose (immediate, losing the commits whose WAL was not
// written), holding clusterUp, and describes the restart in ev.
func (r *run) restartCluster(ctx context.Context, kind Kind, ev *Event) error {
	r.clusterUp.Lock()
	defer r.clusterUp.Unlock()
	if kind == KindLose {
		if err := r.cluster.restart(ctx, "immediate"); err != nil {
			return err
		}
		ev.Detail = "pg_ctl restart -m immediate with synchronous_commit off: acknowledged commits lost"
		return nil
	}
	mode, note := "fast", ""
	if r.between(0, 1) == 1 {
		if r.cluster.immediate {
			mode = "immediate"
		} else {
			note = " (not immediate: synchronous_commit is off, so a crash would lose acknowledged commits)"
		}
	}
	if err := r.cluster.restart(ctx, mode); err != nil {
		return err
	}
	ev.Detail = "pg_ctl restart -m " + mode + note
	return nil
}

// stopGrace bounds a worker's clean stop, a retired one's or the last
// one's: past it the worker is killed (stopKilled). A runner's Run gives
// its turns in progress a ShutdownGrace (5s by default) and then its open
// rounds' Crash as long again, so a worker that stops cleanly, with
// storage there, is gone before it.
const stopGrace = 15 * time.Second

// retire cuts slot s's worker p off from the database for one to three
// TTLs, then, the cut healed, stops it cleanly (SIGTERM) at once and
// starts its replacement once p has stopped (KindRetire); it describes
// the fault, or its error, in ev.
func (r *run) retire(ctx context.Context, s *slot, p *proc, ev *Event) error {
	d := r.between(r.cfg.TTL, 3*r.cfg.TTL)
	s.proxy.Partition(true)
	hold(ctx, d)
	s.proxy.Partition(false)
	np, err := r.stopCleanly(s, p)
	if err != nil {
		ev.Err = err.Error()
		return err
	}
	ev.Detail = fmt.Sprintf("cut off from PostgreSQL for %v, then SIGTERM at once (a clean stop), replaced by %s", d.Round(time.Millisecond), np.name)
	p.note("cut off %v, then SIGTERM", d.Round(time.Millisecond))
	return nil
}

// stopCleanly stops slot s's worker p (SIGTERM) and starts its
// replacement, once p has stopped; no restart of the cluster begins
// meanwhile (clusterUp).
func (r *run) stopCleanly(s *slot, p *proc) (*proc, error) {
	r.clusterUp.RLock()
	defer r.clusterUp.RUnlock()
	p.setMeant()
	at := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return nil, err
	}
	select {
	case <-p.done:
	case <-time.After(r.stopGrace):
		r.stopKilled(p, at)
	}
	return r.startWorker(s)
}

// stopKilled kills worker p, sent SIGTERM at at, which has not stopped
// within r.stopGrace: it is a kill (its writes in doubt are settled from
// storage's log), and an overrun the report names as a problem.
func (r *run) stopKilled(p *proc, at time.Time) {
	_ = p.cmd.Process.Kill()
	<-p.done
	p.note("did not stop on SIGTERM within %v: killed", r.stopGrace)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kills = append(r.kills, kill{p, at})
	r.overran = append(r.overran, p.name)
}

// faultsInForce names the faults still in force on the workers' slots:
// a proxy's partition, latency or held COMMITs, a lease clock not put
// back to its slot's skew, a worker left stopped. The nemesis heals every
// fault before it returns; the run asks once it has, and a fault left in
// force makes the run an error, not a verdict: the checks would have
// judged a run the nemesis never let recover.
func (r *run) faultsInForce() []string {
	var left []string
	for _, s := range r.slots {
		p := s.current()
		for _, f := range s.proxy.InForce() {
			left = append(left, fmt.Sprintf("%s: %s", p.name, f))
		}
		select {
		case <-p.done:
			continue // exited: no clock to read, nothing to continue
		default:
		}
		if b, err := os.ReadFile(p.clockFile); err != nil {
			left = append(left, fmt.Sprintf("%s: lease clock unreadable: %v", p.name, err))
		} else if o, err := time.ParseDuration(strings.TrimSpace(string(b))); err != nil || o != s.skew {
			left = append(left, fmt.Sprintf("%s: lease clock offset %q, not its skew %v", p.name, strings.TrimSpace(string(b)), s.skew))
		}
		if stopped, err := processStopped(p.cmd.Process.Pid); err != nil {
			left = append(left, fmt.Sprintf("%s: state unreadable: %v", p.name, err))
		} else if stopped {
			left = append(left, fmt.Sprintf("%s: stopped (SIGSTOP), never continued", p.name))
		}
	}
	return left
}
