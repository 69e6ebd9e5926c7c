package sim

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
)

// errNoFork: the execution cannot be forked where it is.
var errNoFork = errors.New("sim: cannot fork the execution")

// fork returns a copy of the execution, between two operations, that goes
// on from here on its own: a copy of the storage, of every process's
// clock, workspace (its rounds), runner and turn, of the trace recorded so
// far, the log, the directed scheduler's place and the random sources. The
// copy's Stats count only what it does itself, but for the steps and
// outcomes, which it adds to s's counts. s must run on a
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
		// The step and outcome counts are s's maps: a fork adds to them.
		stats:     Stats{Steps: s.stats.Steps, Outcomes: s.stats.Outcomes},
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
	f.procStore = f.cfg.Storage
	if s.cfg.Interleave {
		f.procStore = &procStorage{Storage: f.cfg.Storage}
	}
	f.procStore = f.cfg.Mutants.storage(f.procStore)
	// The poster and the processes are s's until the copy makes them act
	// (own, ownPoster): most forks take one step of one process.
	f.poster, f.posterShared = s.poster, true
	for _, p := range s.procs {
		f.procs = append(f.procs, &simProc{
			name: p.name, clock: coretest.NewClock(p.clock.Now()), asks: p.asks, holders: p.holders,
			co: newCoroutine(), thread: p.thread,
			ws: p.ws, r: p.r, turn: p.turn, shared: true,
		})
	}
	if s.dir != nil {
		d := *s.dir // its state is shared: Do changes no state it is given
		d.checks = slices.Clip(d.checks)
		f.dir = &d
	}
	return f, nil
}

// own gives p a workspace, runner and turn of its own, forked from the
// ones it shares with the execution it was forked from (fork), before it
// acts.
func (s *Seeded) own(ctx context.Context, p *simProc) {
	if !p.shared {
		return
	}
	p.shared = false
	var claim func(core.Claim) core.Claim
	p.ws, claim = p.ws.ForkForTesting(s.procStore, p.clock, s.rec)
	p.r = p.r.ForkForTesting(p.ws, p.clock, p.agent(), s.newHolder(p), claim)
	if p.turn != nil {
		if s.cfg.Interleave {
			// The claim's step carried the process's coroutine: its runs'
			// questions pause in the copy's.
			ctx = context.WithValue(ctx, coroutineKey{}, p.co)
		}
		p.turn = p.turn.ForkForTesting(ctx, p.r, claim)
	}
}

// ownPoster gives the execution a poster of its own, over its storage,
// forked from the one it shares with the execution it was forked from.
func (s *Seeded) ownPoster() *core.Workspace {
	if s.posterShared {
		s.poster, _ = s.poster.ForkForTesting(s.cfg.Storage, coretest.NewClock(s.poster.Now()), s.rec)
		s.posterShared = false
	}
	return s.poster
}
