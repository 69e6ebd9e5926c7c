package sim

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/threadclaim/threadclaim/core"
)

// InvRoundsAgree names the check that the spec's state of each process,
// as the trace leaves it, agrees with Go's rounds at the end of an
// execution (Seeded.checkRounds). It is reported as an InvariantError.
const InvRoundsAgree = "RoundsAgree"

// specRound is one process's state on one thread in the spec, as its
// trace lines leave it: pc[p] and the holder its claim holds.
type specRound struct {
	pc     string
	holder core.Holder
	line   int // the index in the trace of the line that left it so
}

// specRounds folds the trace's lines, in trace order, into each process's
// pc[p] and holder on each thread, by the action table's NextPC: what the
// Go trace checker's pc[p] is after the same lines, for a trace it
// accepts. A process absent from a thread is idle there.
func specRounds(lines []core.TraceEvent) map[string]map[core.ThreadID]specRound {
	out := map[string]map[core.ThreadID]specRound{}
	for i, ev := range lines {
		info, ok := core.Info(ev.Action)
		if !ok || !info.ByProcess || info.NextPC == "" {
			continue
		}
		if out[ev.Proc] == nil {
			out[ev.Proc] = map[core.ThreadID]specRound{}
		}
		r := specRound{pc: info.NextPC, holder: ev.Holder, line: i}
		if r.pc == core.PCIdle {
			r.holder = ""
		}
		out[ev.Proc][ev.Thread] = r
	}
	return out
}

// checkRounds compares, at the end of the execution, each process's state
// in the spec (specRounds of the trace) with Go's: a process with no turn
// has no open round, so the spec must have it idle on every thread; a
// process with a turn has no round open on any other thread, nor on its
// turn's thread before it claims. A disagreement (a refusal that left no
// trace line, a round Go ended without its Crash) is an InvariantError
// naming InvRoundsAgree, the thread and the process. A turn with its claim
// or a step in flight is not compared on its thread: its round may be
// anywhere.
func (s *Seeded) checkRounds(lines []core.TraceEvent) error {
	spec := specRounds(lines)
	for _, p := range s.procs {
		open, thread := false, core.ThreadID("")
		if p.turn != nil {
			// A step in flight (paused between its transactions) may
			// have claimed already.
			open, thread = p.turn.Claim() != (core.Claim{}) || p.co.active, p.thread
		}
		threads := make([]core.ThreadID, 0, len(spec[p.name]))
		for th := range spec[p.name] {
			threads = append(threads, th)
		}
		sort.Slice(threads, func(i, j int) bool { return threads[i] < threads[j] })
		for _, th := range threads {
			r := spec[p.name][th]
			if r.pc == core.PCIdle || open && th == thread {
				continue
			}
			goSide := "no open round"
			if p.turn != nil {
				goSide = fmt.Sprintf("its turn on %s, not yet claimed", thread)
				if th != thread {
					goSide = fmt.Sprintf("its only turn on %s", thread)
				}
			}
			return &InvariantError{Invariant: InvRoundsAgree, Thread: th, Op: -1, Detail: fmt.Sprintf(
				"at the end, the spec has %s at pc %q holding %q (trace line %d, %s %s) but Go has %s on %s",
				p.name, r.pc, r.holder, r.line+1, lines[r.line].Action, lines[r.line].Holder, goSide, th)}
		}
	}
	return nil
}

// InvNoDefectError names the check that no call of the execution fails
// with an error only a defect in the code under test explains: one of
// core's errors for a call the spec allows (ErrInvalidArgument,
// ErrHolderReused, ErrOutOfOrder, ErrRoundOver, an unknown run, ...) or a
// stored log that no longer folds (ErrInconsistentLog). The scheduler makes
// only calls the spec allows, so such an error is a check failure
// (an InvariantError), with its execution's story. ErrThreadBusy and
// ErrCommitUnknown are the spec's refusals and storage's faults, and
// other errors (storage unreachable, a deadline, a bad operation in a
// replayed log) end the execution as errors: it could not run.
const InvNoDefectError = "NoDefectError"

// defectErrors are core's errors a call the spec allows never returns
// from a correct implementation.
var defectErrors = [...]error{
	core.ErrInvalidArgument, core.ErrOutOfOrder, core.ErrRoundOver, core.ErrUnknownThread,
	core.ErrThreadExists, core.ErrUnknownMessage, core.ErrUnknownRun, core.ErrUnknownRequest,
	core.ErrRunAbandoned, core.ErrRunNotActive, core.ErrAlreadyAnswered, core.ErrInconsistentLog,
}

// asDefect returns err as an InvNoDefectError failure of operation op on
// thread when a defect explains it (InvNoDefectError), else err.
func asDefect(err error, thread core.ThreadID, op int) error {
	var inv *InvariantError
	if err == nil || errors.As(err, &inv) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	for _, d := range defectErrors {
		if errors.Is(err, d) {
			return &InvariantError{Invariant: InvNoDefectError, Thread: thread, Op: op, Detail: "a call failed: " + err.Error()}
		}
	}
	return err
}

// turnDefect returns err, the error a turn (or one of its transactions)
// ended with, as an InvNoDefectError failure when only a defect explains
// it, else nil. A turn is not one call the scheduler chose but the
// runner's way through a round, and it meets the spec's refusals as
// errors: a run's end refused because a later claim abandoned it
// (ErrRunAbandoned), a takeover's abandon of a run that ended meanwhile
// (ErrRunNotActive), a step after the turn crashed its round
// (ErrRoundOver). Those are not defects here; a call out of the round's
// order (ErrOutOfOrder: a write retried after its commit was unknown) is.
func turnDefect(err error, thread core.ThreadID, op int) *InvariantError {
	if errors.Is(err, core.ErrRunAbandoned) || errors.Is(err, core.ErrRunNotActive) || errors.Is(err, core.ErrRoundOver) {
		return nil
	}
	var inv *InvariantError
	if !errors.As(asDefect(err, thread, op), &inv) {
		return nil
	}
	return inv
}
