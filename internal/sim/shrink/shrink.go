// Package shrink turns a failure into its shortest story.
//
// A seeded execution (sim.Seeded) is an explicit list of operations
// (sim.Log): replaying the list gives the same trace and the same verdict.
// When an execution fails — an invariant broken in storage, or a trace line
// the Go trace checker rejects — Shrink removes what the failure does not
// need, by delta debugging: whole processes, whole threads, all time jumps,
// then chunks of operations and single operations (ddmin), then it makes
// what is left simpler (no questions asked, shorter time jumps), keeping
// each change only while the same failure remains: the same invariant, or
// the same guard of the same action. It also tries the story without
// injected storage faults and without steps paused between transactions.
// What is left is a story a spec reviewer reads in a few lines.
//
// Failures with no operation log to replay — a concurrent execution's, a
// fleet of OS processes', any trace file — are shrunk by what they left:
// ShrinkTrace drops a rejected trace's lines while the checker rejects the
// same action at the same rule, and ShrinkHistory drops a history's
// operations while porcupine finds it not linearizable at the same
// operation.
package shrink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// The checks a Failure comes from.
const (
	CheckInvariant = "invariant" // an invariant broken in storage (sim.InvariantError)
	CheckTrace     = "trace"     // a line the Go trace checker rejects (tracecheck.Violation)
)

// Failure names one failure as precisely as shrinking keeps it: an
// invariant by its name, a rejected trace by the action tried and the
// rule that failed (a guard's conjunct in the spec's words, an invariant,
// or a line's field).
type Failure struct {
	Check     string      // CheckInvariant or CheckTrace
	Invariant string      // CheckInvariant: I1_ConsumedAtMostOnce, I3_OneActiveRun, NoLiveAbandon, Liveness, RoundsAgree
	Action    core.Action // CheckTrace: the action the line names
	Rule      string      // CheckTrace: what failed (tracecheck.Violation.Rule)
}

func (f Failure) String() string {
	if f.Check == CheckInvariant {
		return "invariant " + f.Invariant
	}
	return fmt.Sprintf("trace: %s rejected, %s", f.Action, f.Rule)
}

// Execution is one seeded execution and its verdicts.
type Execution struct {
	Log   sim.Log           // the operations applied, with the configuration
	Lines []core.TraceEvent // the trace, as the processes wrote it
	// Invariant is the invariant broken in storage, nil when none was.
	Invariant *sim.InvariantError
	// Violation is the trace checker's first rejected line, nil when the
	// trace was accepted.
	Violation *tracecheck.Violation
	Sim       sim.Stats
	Trace     tracecheck.Stats
	// Coverage is the trace with the lapses the execution saw
	// (sim.Seeded.CoverageLines): what sim.Coverage follows.
	Coverage []core.TraceEvent
}

// Failures lists what failed in the execution: the broken invariant,
// then the rejected line.
func (e *Execution) Failures() []Failure {
	var out []Failure
	if e.Invariant != nil {
		out = append(out, Failure{Check: CheckInvariant, Invariant: e.Invariant.Invariant})
	}
	if e.Violation != nil {
		out = append(out, Failure{Check: CheckTrace, Action: e.Violation.Action, Rule: e.Violation.Rule})
	}
	return out
}

// Has reports whether the execution fails with f.
func (e *Execution) Has(f Failure) bool { return slices.Contains(e.Failures(), f) }

// Story returns the lines that tell the failure f: for a rejected line,
// its thread's lines up to it; for a broken invariant, the lines of the
// thread it broke on (the execution stopped there). Other failures give
// every line.
func (e *Execution) Story(f Failure) []core.TraceEvent {
	var thread core.ThreadID
	last := -1
	switch {
	case f.Check == CheckTrace && e.Violation != nil:
		thread, last = e.Violation.Event.Thread, e.Violation.Line
	case f.Check == CheckInvariant && e.Invariant != nil && e.Invariant.Thread != "":
		thread = e.Invariant.Thread
	default:
		return slices.Clone(e.Lines)
	}
	var out []core.TraceEvent
	for _, th := range tracecheck.Order(e.Lines) {
		if th.Thread != thread {
			continue
		}
		for _, l := range th.Lines {
			if last >= 0 && l.N > last {
				break
			}
			out = append(out, *l.Ev)
		}
	}
	return out
}

// Execute runs one seeded execution — drawn from cfg.Seed, or cfg.Ops
// replayed — records its trace and checks it with the Go trace checker
// against the fenced spec. A broken invariant or a rejected trace is a
// verdict in the Execution; the error is for an execution that could not
// run (storage, a bad operation).
func Execute(ctx context.Context, cfg sim.Config) (*Execution, error) {
	s, err := sim.NewSeeded(ctx, cfg)
	if err != nil {
		return nil, err
	}
	e := &Execution{}
	runErr := s.Run(ctx)
	if runErr != nil && !errors.As(runErr, &e.Invariant) {
		return nil, runErr
	}
	// The trace as storage would keep it: with the writes that committed
	// although an injected fault told their process otherwise.
	e.Log, e.Lines, e.Sim, e.Coverage = s.Log(), s.TraceLines(), s.Stats(), s.CoverageLines()
	tracecheck.Sort(e.Lines) // in the order the processes traced them
	name := fmt.Sprintf("seed-%d", cfg.Seed)
	if cfg.Walks != nil {
		name = fmt.Sprintf("walks-%d", cfg.Seed)
	}
	e.Trace, err = tracecheck.Check(e.Lines, tracecheck.WithFile(name))
	if err != nil && !errors.As(err, &e.Violation) {
		return nil, err
	}
	return e, nil
}

// ErrNotReproduced: the log given to Shrink does not fail as asked.
var ErrNotReproduced = errors.New("the log does not reproduce the failure")

// Result is a shrunk failure.
type Result struct {
	Log  sim.Log    // the shortest log found that fails the same way
	Exec *Execution // its execution
	Runs int        // executions tried
}

// Option configures Shrink.
type Option func(*shrinker)

// OnStorage makes Shrink run each execution it tries on a storage open
// gives (and closes with the func it returns), in place of a fresh
// in-memory storage: a storage under test whose defect memory lacks.
func OnStorage(open func(context.Context) (core.Storage, func(), error)) Option {
	return func(s *shrinker) { s.open = open }
}

// Shrink shrinks log while it fails with want. The log runs on the
// in-memory storage, whatever storage it first ran on, unless OnStorage
// says otherwise.
func Shrink(ctx context.Context, log sim.Log, want Failure, opts ...Option) (Result, error) {
	s := &shrinker{ctx: ctx, want: want}
	for _, o := range opts {
		o(s)
	}
	if want.Invariant != "Liveness" {
		// The log holds its quiescence as operations, if it got there:
		// the story is those operations alone.
		log.NoQuiesce = true
	}
	cur, ok, err := s.try(log)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{}, fmt.Errorf("%w: %s", ErrNotReproduced, want)
	}
	log = cur.Log
	// An execution stops at its first broken invariant: what follows is
	// not part of it.
	if inv := cur.Invariant; inv != nil && inv.Op >= 0 && inv.Op+1 < len(log.Ops) {
		s.accept(&log, withOps(log, log.Ops[:inv.Op+1]))
	}
	for changed := true; changed; {
		changed = false
		for p := log.Procs - 1; p >= 0 && log.Procs > 1; p-- {
			changed = s.accept(&log, dropProc(log, p)) || changed
		}
		for t := log.Threads - 1; t >= 0 && log.Threads > 1; t-- {
			changed = s.accept(&log, dropThread(log, t)) || changed
		}
		changed = s.accept(&log, withOps(log, filter(log.Ops, func(o sim.Op) bool { return o.Kind != sim.OpTime && o.Kind != sim.OpSkew }))) || changed
		// A story without injected faults, or without steps paused
		// between transactions, is simpler when it still fails.
		noFaults, noInterleave := log, log
		noFaults.Faults, noInterleave.Interleave = 0, false
		changed = s.accept(&log, noFaults) || changed
		changed = s.accept(&log, noInterleave) || changed
		changed = s.ddmin(&log) || changed
		changed = s.pairs(&log) || changed
		changed = s.moves(&log) || changed
		changed = s.simplify(&log) || changed
		if s.err != nil {
			return Result{}, s.err
		}
	}
	s.accept(&log, fewerMessages(log))
	if s.err != nil {
		return Result{}, s.err
	}
	final, _, err := s.try(log)
	if err != nil {
		return Result{}, err
	}
	return Result{Log: log, Exec: final, Runs: s.runs}, nil
}

type shrinker struct {
	ctx  context.Context
	want Failure
	runs int
	err  error // the first execution that could not run
	open func(context.Context) (core.Storage, func(), error)
}

// try runs l and reports whether it fails with the wanted failure.
func (s *shrinker) try(l sim.Log) (*Execution, bool, error) {
	s.runs++
	cfg := l.Config()
	if s.open != nil {
		st, done, err := s.open(s.ctx)
		if err != nil {
			return nil, false, err
		}
		defer done()
		cfg.Storage = st
	}
	e, err := Execute(s.ctx, cfg)
	switch {
	case errors.Is(err, sim.ErrBadOp):
		return nil, false, nil // a candidate that no longer fits its config
	case err != nil:
		return nil, false, err
	}
	return e, e.Has(s.want), nil
}

// accept replaces *cur with cand when cand is smaller and still fails.
func (s *shrinker) accept(cur *sim.Log, cand sim.Log) bool {
	if s.err != nil || !smaller(cand, *cur) {
		return false
	}
	_, ok, err := s.try(cand)
	if err != nil {
		s.err = err
		return false
	}
	if ok {
		*cur = cand
	}
	return ok
}

// smaller orders logs: fewer operations, then fewer processes, threads
// and messages (and no faults, no interleaving), then less asked and less
// time jumped.
func smaller(a, b sim.Log) bool {
	if len(a.Ops) != len(b.Ops) {
		return len(a.Ops) < len(b.Ops)
	}
	size := func(l sim.Log) int {
		n := l.Procs + l.Threads + l.Messages
		if l.Faults > 0 {
			n++
		}
		if l.Interleave {
			n++
		}
		return n
	}
	if size(a) != size(b) {
		return size(a) < size(b)
	}
	weight := func(l sim.Log) (w time.Duration) {
		for _, o := range l.Ops {
			w += o.By + time.Duration(o.Asks+o.Steers+o.Thread)*time.Hour
		}
		return w
	}
	return weight(a) < weight(b)
}

// ddmin is delta debugging's minimising loop over the operations: remove
// one of n chunks while the failure remains; refine to single operations.
func (s *shrinker) ddmin(cur *sim.Log) bool {
	return ddmin(func() []sim.Op { return cur.Ops },
		func(cand []sim.Op) bool { return s.accept(cur, withOps(*cur, cand)) },
		func() bool { return s.err == nil })
}

// maxPairs and maxMoves bound the logs whose pairs of operations are
// tried, and whose operations are moved: the tries grow as the square of
// the operations (and each move is shrunk again).
const (
	maxPairs = 40
	maxMoves = 16
)

// pairs removes two operations at once where removing either alone
// loses the failure (a process's claim and its later step, say): ddmin
// leaves a log from which no single operation can go, not one from which
// no two can.
func (s *shrinker) pairs(cur *sim.Log) bool {
	changed := false
	for i := 0; i < len(cur.Ops) && len(cur.Ops) <= maxPairs && s.err == nil; i++ {
		for j := i + 1; j < len(cur.Ops) && s.err == nil; j++ {
			ops := slices.Concat(cur.Ops[:i], cur.Ops[i+1:j], cur.Ops[j+1:])
			if s.accept(cur, withOps(*cur, ops)) {
				changed = true
				j = i // start again from the next pair at i
			}
		}
	}
	return changed
}

// moves moves one operation elsewhere in the log and shrinks again
// (ddmin), keeping the result when it is smaller: deleting alone cannot
// reorder, and a story often gets shorter once time passes earlier (a
// process's first claim and release are no longer needed to wait out a
// lease, say).
func (s *shrinker) moves(cur *sim.Log) bool {
	changed := false
	for i := 0; i < len(cur.Ops) && len(cur.Ops) <= maxMoves && s.err == nil; i++ {
		for j := 0; j < len(cur.Ops) && s.err == nil; j++ {
			if j == i || j == i+1 {
				continue
			}
			ops := slices.Clone(cur.Ops)
			op := ops[i]
			ops = slices.Delete(ops, i, i+1)
			at := j
			if j > i {
				at--
			}
			ops = slices.Insert(ops, at, op)
			moved := withOps(*cur, ops)
			if _, ok, err := s.try(moved); err != nil || !ok {
				s.err = err
				continue
			}
			s.ddmin(&moved)
			if smaller(moved, *cur) {
				*cur, changed = moved, true
				i, j = 0, -1
				continue
			}
		}
	}
	return changed
}

// simplify makes single operations simpler: no question asked, no
// steering taken, a step's
// thread the first one, a time jump halved.
func (s *shrinker) simplify(cur *sim.Log) bool {
	changed := false
	for i := 0; i < len(cur.Ops) && s.err == nil; i++ {
		for _, edit := range []func(*sim.Op){
			func(o *sim.Op) { o.Asks = 0 },
			func(o *sim.Op) { o.Steers = 0 },
			func(o *sim.Op) {
				if o.Kind == sim.OpStep {
					o.Thread = 0
				}
			},
			func(o *sim.Op) { o.By = (o.By / 2).Truncate(time.Second) },
		} {
			ops := slices.Clone(cur.Ops)
			edit(&ops[i])
			if ops[i].By <= 0 && (ops[i].Kind == sim.OpTime || ops[i].Kind == sim.OpSkew) {
				continue
			}
			changed = s.accept(cur, withOps(*cur, ops)) || changed
		}
	}
	return changed
}

func withOps(l sim.Log, ops []sim.Op) sim.Log {
	l.Ops = ops
	return l
}

func filter(ops []sim.Op, keep func(sim.Op) bool) []sim.Op {
	out := []sim.Op{}
	for _, o := range ops {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// usesProc says whether the operation is taken by a process (its Proc
// matters).
func usesProc(o sim.Op) bool { return o.Kind != sim.OpPost && o.Kind != sim.OpTime }

// dropProc removes process p and its operations, renumbering the others.
func dropProc(l sim.Log, p int) sim.Log {
	ops := filter(l.Ops, func(o sim.Op) bool { return !usesProc(o) || o.Proc != p })
	for i := range ops {
		if usesProc(ops[i]) && ops[i].Proc > p {
			ops[i].Proc--
		}
	}
	l.Procs--
	return withOps(l, ops)
}

// dropThread removes thread t: its posts and the steps that name it,
// renumbering the others.
func dropThread(l sim.Log, t int) sim.Log {
	ops := filter(l.Ops, func(o sim.Op) bool {
		return (o.Kind != sim.OpPost && o.Kind != sim.OpStep) || o.Thread != t
	})
	for i := range ops {
		if ops[i].Thread > t {
			ops[i].Thread--
		}
	}
	l.Threads--
	return withOps(l, ops)
}

// fewerMessages sets the messages per thread to the most any thread is
// posted in the log (at least one), so that quiescence posts no more.
func fewerMessages(l sim.Log) sim.Log {
	posts := make([]int, l.Threads)
	most := 1
	for _, o := range l.Ops {
		if o.Kind == sim.OpPost {
			posts[o.Thread]++
			most = max(most, posts[o.Thread])
		}
	}
	l.Messages = min(l.Messages, most)
	return l
}
