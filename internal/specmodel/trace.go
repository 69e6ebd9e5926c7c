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
// thread's version) in state s, as the action table's Line says: a
// LineWrite always, Release (LineWriteOrRead) when the lease is the
// process's.
func IsWrite(s *State, st Step) bool {
	info, _ := core.Info(st.Action)
	switch info.Line {
	case core.LineWrite:
		return true
	case core.LineWriteOrRead:
		return HasLease(s, st.P)
	}
	return false
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
