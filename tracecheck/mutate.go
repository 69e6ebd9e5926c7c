package tracecheck

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/threadclaim/threadclaim/core"
)

// MutationKind is one way Mutate changes a trace.
type MutationKind string

// The kinds of mutation: a field's value, the action, the holder, the
// tick; a line dropped, duplicated, or swapped with another of its thread.
const (
	MutValue     MutationKind = "value"
	MutAction    MutationKind = "action"
	MutHolder    MutationKind = "holder"
	MutTick      MutationKind = "tick"
	MutDrop      MutationKind = "drop"
	MutDuplicate MutationKind = "duplicate"
	MutSwap      MutationKind = "swap"
)

// mutationKinds returns every kind, in a fixed order.
func mutationKinds() []MutationKind {
	return []MutationKind{MutValue, MutAction, MutHolder, MutTick, MutDrop, MutDuplicate, MutSwap}
}

// Mutation says what Mutate changed: the kind, the line (1-based, in the
// input), the field for a value, the other line of a swap, and a short
// description.
type Mutation struct {
	Kind  MutationKind
	Line  int
	Field string // MutValue: the field's JSON name
	Other int    // MutSwap: the other line
	Desc  string
}

func (m Mutation) String() string { return m.Desc }

// Mutate returns a copy of lines with one change drawn from rng, and what
// it was. The result is well-formed (it writes and reads back: every
// action a logged one, kinds valid, numbers in range) so that it tests a
// checker, not the reader; it may or may not be a behaviour of the spec,
// and occasionally equals the input (swapping two reads at one tick, say).
// Mutate never changes lines in place. An empty trace is returned as is.
func Mutate(rng *rand.Rand, lines []core.TraceEvent) ([]core.TraceEvent, Mutation) {
	if len(lines) == 0 {
		return nil, Mutation{Desc: "nothing to mutate"}
	}
	if rng == nil {
		panic("tracecheck: Mutate needs a *rand.Rand, not nil")
	}
	kinds := mutationKinds()
	return MutateKind(rng, lines, kinds[rng.IntN(len(kinds))])
}

// MutateKind is Mutate with the kind of change chosen by the caller.
func MutateKind(rng *rand.Rand, lines []core.TraceEvent, kind MutationKind) ([]core.TraceEvent, Mutation) {
	if len(lines) == 0 {
		return nil, Mutation{Desc: "nothing to mutate"}
	}
	if rng == nil {
		panic("tracecheck: Mutate needs a *rand.Rand, not nil")
	}
	out := slices.Clone(lines)
	i := rng.IntN(len(out))
	m := Mutation{Kind: kind, Line: i + 1}
	ev := &out[i]
	switch kind {
	case MutValue:
		m.Field, m.Desc = mutateValue(rng, lines, ev, i)
	case MutAction:
		acts := loggedActionList()
		old := ev.Action
		ev.Action = acts[rng.IntN(len(acts))]
		if rng.IntN(2) == 0 {
			// Keep read consistent with the new action now and then, so
			// that the change reaches the guards.
			ev.Read = isRead(ev.Action)
		}
		m.Desc = fmt.Sprintf("line %d: action %s -> %s", i+1, old, ev.Action)
	case MutHolder:
		old := ev.Holder
		ev.Holder = pickHolder(rng, lines, old)
		m.Desc = fmt.Sprintf("line %d: holder %q -> %q", i+1, old, ev.Holder)
	case MutTick:
		old := ev.Tick
		switch rng.IntN(3) {
		case 0:
			ev.Tick++
		case 1:
			if ev.Tick > 0 {
				ev.Tick--
			} else {
				ev.Tick = 2
			}
		default:
			ev.Tick = lines[rng.IntN(len(lines))].Tick
		}
		m.Desc = fmt.Sprintf("line %d: tick %d -> %d", i+1, old, ev.Tick)
	case MutDrop:
		out = slices.Delete(out, i, i+1)
		m.Desc = fmt.Sprintf("line %d dropped", i+1)
	case MutDuplicate:
		j := i + rng.IntN(len(out)-i) + 1 // the copy goes after line i, up to the end
		out = slices.Insert(out, j, lines[i])
		m.Desc = fmt.Sprintf("line %d duplicated as line %d", i+1, j+1)
	case MutSwap:
		j := swapPartner(rng, lines, i)
		out[i], out[j] = out[j], out[i]
		m.Other = j + 1
		m.Desc = fmt.Sprintf("lines %d and %d swapped", i+1, j+1)
	default:
		panic(fmt.Sprintf("tracecheck: unknown mutation kind %q", kind))
	}
	return out, m
}

// swapPartner picks another line of i's thread, near it more often than
// not; i itself when the thread has one line.
func swapPartner(rng *rand.Rand, lines []core.TraceEvent, i int) int {
	var same []int
	for j := range lines {
		if j != i && lines[j].Thread == lines[i].Thread {
			same = append(same, j)
		}
	}
	if len(same) == 0 {
		return i
	}
	if rng.IntN(2) == 0 {
		// The nearest line of the thread after i, or before it.
		for _, j := range same {
			if j > i {
				return j
			}
		}
		return same[len(same)-1]
	}
	return same[rng.IntN(len(same))]
}

// mutateValue changes one field other than action, holder and tick.
func mutateValue(rng *rand.Rand, lines []core.TraceEvent, ev *core.TraceEvent, i int) (string, string) {
	fields := []string{"read", "thread", "proc", "msg", "req", "run", "taken", "lease", "kind"}
	if ev.Now != 0 {
		fields = append(fields, "now", "ttl", "expires", "replaced")
	}
	f := fields[rng.IntN(len(fields))]
	num := func(v int64) int64 { // another non-negative value, near v
		switch rng.IntN(3) {
		case 0:
			return v + 1
		case 1:
			if v > 0 {
				return v - 1
			}
			return v + 2
		}
		if w := rng.Int64N(4); w != v {
			return w
		}
		return v + 3
	}
	var from, to string
	switch f {
	case "read":
		ev.Read = !ev.Read
		from, to = strconv.FormatBool(!ev.Read), strconv.FormatBool(ev.Read)
	case "thread":
		from = string(ev.Thread)
		ev.Thread = core.ThreadID(pickOther(rng, lines, func(e *core.TraceEvent) string { return string(e.Thread) }, from, "t-mutant"))
		if ev.Thread == "" {
			ev.Thread = "t-mutant" // a line needs a thread to be well-formed
		}
		to = string(ev.Thread)
	case "proc":
		from = ev.Proc
		ev.Proc = pickOther(rng, lines, func(e *core.TraceEvent) string { return e.Proc }, from, "p-mutant")
		to = ev.Proc
	case "msg":
		from = strconv.FormatInt(int64(ev.Msg), 10)
		ev.Msg = core.Seq(num(int64(ev.Msg)))
		to = strconv.FormatInt(int64(ev.Msg), 10)
	case "req":
		from = strconv.FormatInt(int64(ev.Req), 10)
		ev.Req = core.RequestID(num(int64(ev.Req)))
		to = strconv.FormatInt(int64(ev.Req), 10)
	case "run":
		from = strconv.FormatInt(int64(ev.Run), 10)
		ev.Run = core.RunID(num(int64(ev.Run)))
		to = strconv.FormatInt(int64(ev.Run), 10)
	case "taken":
		from = strconv.FormatInt(int64(ev.Taken), 10)
		ev.Taken = core.Seq(num(int64(ev.Taken)))
		to = strconv.FormatInt(int64(ev.Taken), 10)
	case "lease":
		from = string(ev.Lease)
		ev.Lease = pickHolder(rng, lines, ev.Lease)
		to = string(ev.Lease)
	case "kind":
		from = ev.Kind
		kinds := []string{"", core.PlanKindRun, core.PlanKindReply}
		for ev.Kind == from {
			ev.Kind = kinds[rng.IntN(len(kinds))]
		}
		to = ev.Kind
	default: // timing: a second either way, or the other field's value
		p := map[string]*int64{"now": &ev.Now, "ttl": &ev.TTL, "expires": &ev.Expires, "replaced": &ev.Replaced}[f]
		from = strconv.FormatInt(*p, 10)
		switch rng.IntN(3) {
		case 0:
			*p += 1e9
		case 1:
			*p -= 1e9
		default:
			*p = ev.Now
		}
		if *p == 0 || strconv.FormatInt(*p, 10) == from {
			*p = 1 // absent is 0: 1 keeps the field present and changed
		}
		to = strconv.FormatInt(*p, 10)
	}
	return f, fmt.Sprintf("line %d: %s %s -> %s", i+1, f, from, to)
}

// pickHolder returns a holder other than old: another of the trace's
// holders or leases, "", or a string no line has.
func pickHolder(rng *rand.Rand, lines []core.TraceEvent, old core.Holder) core.Holder {
	return core.Holder(pickOther(rng, lines, func(e *core.TraceEvent) string {
		if rng.IntN(2) == 0 {
			return string(e.Lease)
		}
		return string(e.Holder)
	}, string(old), "h-mutant"))
}

// pickOther returns a value of get over lines that differs from old, or
// "" or fresh, whichever differs from old.
func pickOther(rng *rand.Rand, lines []core.TraceEvent, get func(*core.TraceEvent) string, old, fresh string) string {
	for range 8 {
		if v := get(&lines[rng.IntN(len(lines))]); v != old {
			return v
		}
	}
	if old != "" && rng.IntN(2) == 0 {
		return ""
	}
	if fresh == old {
		return fresh + "2"
	}
	return fresh
}

// loggedActionList returns the actions a line may name, in the spec's
// order.
func loggedActionList() []core.Action {
	var out []core.Action
	for _, a := range core.Actions() {
		if a != core.ActionLapse {
			out = append(out, a)
		}
	}
	return out
}
