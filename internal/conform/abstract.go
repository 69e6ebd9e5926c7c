package conform

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
)

// ErrNotAState: what Go holds is not a state of the cfg's spec (a holder no
// Claim made, more messages than MaxMsgs, a plan of a kind the spec has
// not...).
var ErrNotAState = errors.New("not a state of the spec")

// Proc is what one runner process knows of its round, the part of the
// spec's state that lives in a process and not in storage: pc[p] and the
// claim, plan and run it holds.
type Proc struct {
	PC     specmodel.PC
	Holder core.Holder // the claim's holder; "" when idle
	Plan   core.Plan   // when planned: a PlanRun or PlanReply
	Run    core.RunID  // when running or steered
	Steer  core.Seq    // when steered: the message given, not recorded yet
}

// Observed is a thread as Go holds it, with what the spec's variables need
// beyond storage.
type Observed struct {
	Thread *core.Thread // the thread's state in storage
	Lease  core.Lease   // the thread's lease in storage
	// Now is the latest clock reading among the processes: the lease has
	// expired (lease.expired) when its ExpiresAt is not after Now, since
	// then some process may claim it.
	Now time.Time
	// Procs holds each process's round, indexed as Config.Procs.
	Procs []Proc
	// Holders lists the claims made on the thread in the order they were
	// made: Holders[k-1] is the spec's holder k, and nextHolder is
	// len(Holders)+1.
	Holders []core.Holder
	// LiveAbandoned is the spec's ghost: some run was abandoned while its
	// own holder had the lease. Storage does not keep it; the observer
	// sets it when it sees such an Abandon.
	LiveAbandoned bool
	// Given and Steered are the spec's ghosts given (Given[m-1] is
	// given[m]: how many times message m was given to a model) and
	// steered (the steering given and not recorded, any order). The
	// observer counts them from the Go calls that give.
	Given   []uint8
	Steered []specmodel.Pair
}

// Abstract maps a thread as Go holds it onto the spec's variables for cfg:
// msgs, taken, lease, runs, reqs and consumed from storage, liveAbandoned
// and the processes' variables from what the observer knows, nextHolder
// from the claims made. It returns an error wrapping ErrNotAState when Go
// holds something the spec's state has no place for.
func Abstract(cfg specmodel.Config, o Observed) (specmodel.State, error) {
	bad := func(format string, args ...any) (specmodel.State, error) {
		return specmodel.State{}, fmt.Errorf("%w: %s", ErrNotAState, fmt.Sprintf(format, args...))
	}
	holder := func(h core.Holder) (uint8, bool) {
		if h == "" {
			return 0, true
		}
		i := slices.Index(o.Holders, h)
		return uint8(i + 1), i >= 0
	}
	t := o.Thread
	if len(o.Holders) > cfg.MaxClaims || len(t.Messages) > cfg.MaxMsgs || len(o.Procs) != len(cfg.Procs) {
		return bad("%d claims, %d messages, %d processes for MaxClaims %d, MaxMsgs %d, %d processes",
			len(o.Holders), len(t.Messages), len(o.Procs), cfg.MaxClaims, cfg.MaxMsgs, len(cfg.Procs))
	}
	runs := t.Runs()
	if len(runs) > 250 || len(t.Requests) > 250 || t.Taken < 0 || int(t.Taken) > len(t.Messages) {
		return bad("taken %d, %d runs, %d requests", t.Taken, len(runs), len(t.Requests))
	}
	s := specmodel.State{
		Msgs:          uint8(len(t.Messages)),
		Taken:         uint8(t.Taken),
		LiveAbandoned: o.LiveAbandoned,
		NextHolder:    uint8(len(o.Holders) + 1),
		Consumed:      make([]uint8, cfg.MaxMsgs),
		Runs:          make([]specmodel.Run, 0, len(runs)+1),
		Reqs:          make([]specmodel.Req, 0, len(t.Requests)+1),
		Procs:         make([]specmodel.Proc, len(cfg.Procs)),
	}
	if o.Lease.Holder != "" {
		h, ok := holder(o.Lease.Holder)
		if !ok {
			return bad("the lease's holder %q made no claim", o.Lease.Holder)
		}
		s.Lease = specmodel.Lease{Holder: h, Expired: o.Lease.Expired(o.Now)}
	}
	for _, r := range runs {
		h, ok := holder(r.Holder)
		if !ok || h == 0 {
			return bad("run %d's holder %q made no claim", r.ID, r.Holder)
		}
		var st specmodel.RunState
		switch r.State {
		case core.StateActive:
			st = specmodel.Active
		case core.StateEnded:
			st = specmodel.Ended
		case core.StateAbandoned:
			st = specmodel.Abandoned
		default:
			return bad("run %d is %q", r.ID, r.State)
		}
		s.Runs = append(s.Runs, specmodel.Run{Holder: h, Prompt: uint8(r.Prompt), State: st})
	}
	for _, q := range t.Requests {
		r := specmodel.Req{Run: uint8(q.Run), Answer: uint8(q.Answer)}
		if q.State == core.RequestAnswered {
			r.State = specmodel.Answered
		}
		s.Reqs = append(s.Reqs, r)
	}
	for m, n := range t.Consumed() {
		if m < 1 || int(m) > cfg.MaxMsgs || n > 250 {
			return bad("message %d consumed %d times", m, n)
		}
		s.Consumed[m-1] = uint8(n)
	}
	if len(o.Given) != cfg.MaxMsgs {
		return bad("given has %d messages for MaxMsgs %d", len(o.Given), cfg.MaxMsgs)
	}
	s.Given = slices.Clone(o.Given)
	s.Steered = slices.Clone(o.Steered)
	slices.SortFunc(s.Steered, func(a, b specmodel.Pair) int {
		if a.Run != b.Run {
			return int(a.Run) - int(b.Run)
		}
		return int(a.Msg) - int(b.Msg)
	})
	for i, p := range o.Procs {
		h, ok := holder(p.Holder)
		if !ok {
			return bad("process %s's holder %q made no claim", cfg.Procs[i], p.Holder)
		}
		sp := specmodel.Proc{PC: p.PC, Hold: h, Run: uint8(p.Run)}
		if p.PC == specmodel.Planned {
			switch p.Plan.Kind {
			case core.PlanRun:
				sp.Plan = specmodel.Plan{Kind: specmodel.PlanRun, Msg: uint8(p.Plan.Message)}
			case core.PlanReply:
				sp.Plan = specmodel.Plan{Kind: specmodel.PlanReply, Msg: uint8(p.Plan.Message), Req: uint8(p.Plan.Request)}
			default:
				return bad("process %s is planned with a %s plan", cfg.Procs[i], p.Plan.Kind)
			}
		}
		if p.PC == specmodel.Steered {
			sp.Plan = specmodel.Plan{Kind: specmodel.PlanSteer, Msg: uint8(p.Steer)}
		}
		s.Procs[i] = sp
	}
	return s, nil
}
