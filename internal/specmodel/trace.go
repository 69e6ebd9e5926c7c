package specmodel

import (
	"fmt"
	"math/rand/v2"

	"github.com/threadclaim/threadclaim/core"
)

// TraceThread is the thread every line TraceLine makes names.
const TraceThread core.ThreadID = "t1"

// HolderName is the holder string a trace gives the spec's holder h (""
// for 0): "h1", "h2", ...
func HolderName(h uint8) core.Holder {
	if h == 0 {
		return ""
	}
	return core.Holder(fmt.Sprintf("h%d", h))
}

// IsWrite reports whether the step's trace line is a write (it bumps the
// thread's version) in state s, as tracecheck/doc.go's format says: Post,
// Claim, Renew, Abandon, RunStart, Reply, Ask and RunEnd always, Release
// when the lease is the process's; Plan, the refusals and Crash never.
func IsWrite(s *State, st Step) bool {
	switch st.Action {
	case core.ActionPost, core.ActionClaim, core.ActionRenew, core.ActionAbandon,
		core.ActionRunStart, core.ActionReply, core.ActionAsk, core.ActionRunEnd:
		return true
	case core.ActionRelease:
		return HasLease(s, st.P)
	}
	return false
}

// TraceLine is the trace line (tracecheck/doc.go's format) that the Go
// code writes for the step taken in state s, whose version (the count of
// writes so far) is version. For a step the spec does not enable in s, it
// is the line Go would write if it took the step anyway, from the values
// in s (such as the next run's id, the process's planned message): a trace
// checker must refuse it. Lapse has no line; TraceLine panics on it.
func (m *Model) TraceLine(s *State, st Step, version uint64) core.TraceEvent {
	if st.Action == core.ActionLapse {
		panic("specmodel: Lapse is never traced")
	}
	ev := core.TraceEvent{Action: st.Action, Thread: TraceThread, Taken: core.Seq(s.Taken)}
	if IsWrite(s, st) {
		ev.Tick = version + 1
	} else {
		ev.Tick, ev.Read = version, true
	}
	if st.P < 0 {
		ev.Proc = "poster"
	} else {
		ev.Proc = m.cfg.Procs[st.P]
		ev.Holder = HolderName(s.Procs[st.P].Hold)
	}
	var pr Proc
	if st.P >= 0 {
		pr = s.Procs[st.P]
	}
	lease := HolderName(s.Lease.Holder)
	planMsg := pr.Plan.Msg
	if planMsg == 0 {
		planMsg = s.Taken + 1
	}
	switch st.Action {
	case core.ActionPost:
		ev.Msg = core.Seq(s.Msgs + 1)
	case core.ActionClaim:
		ev.Holder = HolderName(s.NextHolder)
		ev.Lease = ev.Holder
	case core.ActionRenew:
		ev.Lease = ev.Holder // core writes the renewed lease's holder, p's
	case core.ActionRelease:
		ev.Lease = lease
		if HasLease(s, st.P) {
			ev.Lease = ""
		}
	case core.ActionAbandon:
		ev.Run = core.RunID(st.R)
		ev.Lease = lease
	case core.ActionAbandonFenced:
		ev.Lease = lease
		for i, r := range s.Runs {
			if r.State == Active && r.Holder != pr.Hold {
				ev.Run = core.RunID(i + 1)
				break
			}
		}
	case core.ActionPlan:
		ev.Msg = core.Seq(s.Taken + 1)
		ev.Kind = core.PlanKindRun
		if q := OldestOpen(s); q != 0 {
			ev.Kind, ev.Req = core.PlanKindReply, core.RequestID(q)
		}
	case core.ActionRunStart:
		ev.Msg, ev.Run, ev.Taken, ev.Lease = core.Seq(planMsg), core.RunID(len(s.Runs)+1), core.Seq(planMsg), lease
	case core.ActionStartFenced:
		ev.Msg, ev.Lease = core.Seq(planMsg), lease
	case core.ActionReply:
		ev.Msg, ev.Req, ev.Taken, ev.Lease = core.Seq(planMsg), core.RequestID(pr.Plan.Req), core.Seq(planMsg), lease
		if ev.Req == 0 {
			ev.Req = core.RequestID(OldestOpen(s))
		}
	case core.ActionReplyFenced:
		ev.Msg, ev.Req, ev.Lease = core.Seq(planMsg), core.RequestID(pr.Plan.Req), lease
	case core.ActionAsk:
		ev.Run, ev.Req = core.RunID(pr.Run), core.RequestID(len(s.Reqs)+1)
	case core.ActionRunEnd, core.ActionEndRefused:
		ev.Run = core.RunID(pr.Run)
	}
	return ev
}

// TraceLines renders a path (Graph.Path) as the trace the Go code writes
// for it: one line per step, Lapse omitted (it is never traced).
func (m *Model) TraceLines(path []TraceStep) []core.TraceEvent {
	var out []core.TraceEvent
	var version uint64
	for k := 1; k < len(path); k++ {
		st := path[k].Step
		if st.Action == core.ActionLapse {
			continue
		}
		prev := path[k-1].State
		ev := m.TraceLine(&prev, st, version)
		if !ev.Read {
			version++
		}
		out = append(out, ev)
	}
	return out
}

// RandomWalk returns a path from Init of up to steps steps, each drawn by
// rng among the steps the spec enables in the state before it (Lapse
// included); it ends early in a state that enables none. Its TraceLines
// are a trace the spec allows, of any corner of the state graph, not only
// of the paths a runner takes: the differential gives such traces, and
// mutants of them, to both trace checkers.
func (m *Model) RandomWalk(rng *rand.Rand, steps int) []TraceStep {
	s := m.Init()
	path := []TraceStep{{State: s}}
	var next []TraceStep
	for range steps {
		next = next[:0]
		for _, st := range m.steps {
			cur := s
			if o := m.Do(&cur, st); o.Enabled {
				next = append(next, TraceStep{Step: st, State: o.Next})
			}
		}
		if len(next) == 0 {
			break
		}
		ts := next[rng.IntN(len(next))]
		path = append(path, ts)
		s = ts.State
	}
	return path
}
