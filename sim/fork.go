package sim

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/simclock"
	"github.com/threadclaim/threadclaim/store/memory"
)

// errNoFork: the execution cannot be forked where it is.
var errNoFork = errors.New("sim: cannot fork the execution")

// fork returns a copy of the execution, between two operations, that goes
// on from here on its own: a copy of the storage, of every process's
// clock, workspace (its rounds), runner and turn, of the trace recorded so
// far, the log, the directed scheduler's place and the random sources. The
// copy's Stats count only what it does itself. s must run on a
// memory.Store, with no injected faults and no step paused between two
// transactions; ctx is the one s's steps are given.
//
// With share, the copy's trace, lapses and log grow in place of s's,
// over what s would add next, instead of being copied: s must take no
// operation after, and of the copies of s that share them only the latest
// may be used (with the copies of that one). A depth-first pass over
// forks (Tree) keeps to that, and copies nothing but the execution's own
// state.
func (s *Seeded) fork(ctx context.Context, share bool) (*Seeded, error) {
	store, ok := s.cfg.Storage.(*memory.Store)
	if !ok || s.faults != nil || s.cfg.Tracer != nil {
		return nil, errNoFork
	}
	for _, p := range s.procs {
		if p.co.active {
			return nil, errNoFork
		}
	}
	src, holderSrc := *s.src, *s.holderSrc
	f := &Seeded{
		cfg:       s.cfg,
		src:       &src,
		holderSrc: &holderSrc,
		threads:   s.threads,
		posted:    slices.Clone(s.posted),
		seen:      maps.Clone(s.seen),
		stats:     Stats{Steps: map[runner.Step]int{}, Outcomes: map[runner.Outcome]int{}},
		swarm:     s.swarm,
		lapses:    s.lapses,
		lapsed:    maps.Clone(s.lapsed),
		log:       s.log,
		quiesceAt: s.quiesceAt,
		liveness:  s.liveness,
	}
	f.rng, f.holderRNG = rand.New(f.src), rand.New(f.holderSrc)
	f.cfg.Storage = store.Clone()
	f.rec = &recorder{lines: s.rec.lines, perThread: maps.Clone(s.rec.perThread)}
	if !share {
		f.lapses, f.log, f.rec.lines = slices.Clip(f.lapses), slices.Clip(f.log), slices.Clip(f.rec.lines)
	}
	var procStore core.Storage = f.cfg.Storage
	if s.cfg.Interleave {
		procStore = &procStorage{Storage: f.cfg.Storage}
	}
	f.poster, _ = s.poster.ForkForTesting(f.cfg.Storage, simclock.New(s.poster.Now()), f.rec)
	for _, p := range s.procs {
		q := &simProc{name: p.name, clock: simclock.New(p.clock.Now()), asks: p.asks, holders: p.holders, co: newCoroutine(), thread: p.thread}
		var claim func(core.Claim) core.Claim
		q.ws, claim = p.ws.ForkForTesting(procStore, q.clock, f.rec)
		q.r = p.r.ForkForTesting(q.ws, q.clock, q.agent(), f.newHolder(q), claim)
		if p.turn != nil {
			tctx := ctx
			if s.cfg.Interleave {
				// The claim's step carried the process's coroutine: its
				// runs' questions pause in the copy's.
				tctx = context.WithValue(ctx, coroutineKey{}, q.co)
			}
			q.turn = p.turn.ForkForTesting(tctx, q.r, claim)
		}
		f.procs = append(f.procs, q)
	}
	if s.dir != nil {
		d := *s.dir
		d.state = s.dir.state.Clone()
		d.checks = slices.Clip(d.checks)
		f.dir = &d
	}
	return f, nil
}
