package tlc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Mutator changes a valid trace into one that may or may not be a
// behaviour of the spec, keeping it well-formed, and says what it did.
type Mutator func(rng *rand.Rand, lines []core.TraceEvent) ([]core.TraceEvent, string)

// DiffCase is one trace the differential puts through both checkers.
type DiffCase struct {
	From  string // the trace it was made from
	Desc  string // what the mutator changed
	Lines []core.TraceEvent
}

// DiffResult is both checkers' verdicts on one case: the file line of
// the first line each rejects, 0 when it accepts the trace.
type DiffResult struct {
	Case    DiffCase
	Go, TLC int
	GoErr   string // the Go checker's reason, for the report
}

// Agree reports whether both checkers gave the same verdict at the same
// line.
func (r DiffResult) Agree() bool { return r.Go == r.TLC }

// MakeCases draws n mutants of the given traces (named by names) with
// mutate and rng. The timing fields are cleared first: TLC checks an
// untimed refinement (tla/README.md), so the differential compares the
// checks both make.
func MakeCases(rng *rand.Rand, mutate Mutator, names []string, traces [][]core.TraceEvent, n int) []DiffCase {
	out := make([]DiffCase, 0, n)
	for len(out) < n && len(traces) > 0 {
		i := rng.IntN(len(traces))
		lines := Untimed(traces[i])
		m, desc := mutate(rng, lines)
		if len(m) == 0 {
			continue
		}
		out = append(out, DiffCase{From: names[i], Desc: desc, Lines: m})
	}
	return out
}

// GoVerdict is the Go trace checker's verdict on a trace: the file line
// it rejects, 0 if it accepts; and its reason.
func GoVerdict(lines []core.TraceEvent) (int, string) {
	_, err := tracecheck.Check(lines)
	var v *tracecheck.Violation
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &v):
		return v.Line, v.Error()
	}
	return -1, err.Error()
}

// Differential puts every case through the Go checker and, in one batch
// run, through TLC, and returns both verdicts for each.
func (e Env) Differential(ctx context.Context, b Batch, cases []DiffCase) ([]DiffResult, error) {
	out := make([]DiffResult, len(cases))
	var threads []Thread
	var owner []int
	for i, c := range cases {
		out[i].Case = c
		out[i].Go, out[i].GoErr = GoVerdict(c.Lines)
		for _, th := range SplitThreads(c.Lines) {
			threads = append(threads, th)
			owner = append(owner, i)
		}
	}
	at, err := e.ValidateThreads(ctx, b, threads)
	if err != nil {
		return nil, err
	}
	for k, a := range at {
		r := &out[owner[k]]
		if a > 0 && (r.TLC == 0 || a < r.TLC) {
			r.TLC = a
		}
	}
	return out, nil
}

// Untimed returns a copy of lines without the timing fields.
func Untimed(lines []core.TraceEvent) []core.TraceEvent {
	out := make([]core.TraceEvent, len(lines))
	copy(out, lines)
	for i := range out {
		clearTiming(&out[i])
	}
	return out
}

// LocalMutate is a small mutator for the differential: it changes one
// value (msg, req, run, taken, lease, kind, read, proc), the action, a
// holder, or a tick, or drops, duplicates or swaps lines. (tracecheck's
// Mutate, when present, is the richer one.)
func LocalMutate(rng *rand.Rand, lines []core.TraceEvent) ([]core.TraceEvent, string) {
	out := make([]core.TraceEvent, len(lines))
	copy(out, lines)
	i := rng.IntN(len(out))
	ev := &out[i]
	small := func(v int64) int64 {
		switch rng.IntN(3) {
		case 0:
			return max(v-1, 0)
		case 1:
			return v + 1
		}
		return rng.Int64N(4)
	}
	holders := []core.Holder{""}
	for _, l := range lines {
		if l.Holder != "" {
			holders = append(holders, l.Holder)
		}
	}
	switch k := rng.IntN(12); k {
	case 0:
		ev.Msg = core.Seq(small(int64(ev.Msg)))
		return out, fmt.Sprintf("line %d: msg -> %d", i+1, ev.Msg)
	case 1:
		ev.Req = core.RequestID(small(int64(ev.Req)))
		return out, fmt.Sprintf("line %d: req -> %d", i+1, ev.Req)
	case 2:
		ev.Run = core.RunID(small(int64(ev.Run)))
		return out, fmt.Sprintf("line %d: run -> %d", i+1, ev.Run)
	case 3:
		ev.Taken = core.Seq(small(int64(ev.Taken)))
		return out, fmt.Sprintf("line %d: taken -> %d", i+1, ev.Taken)
	case 4:
		ev.Lease = holders[rng.IntN(len(holders))]
		return out, fmt.Sprintf("line %d: lease -> %q", i+1, ev.Lease)
	case 5:
		kinds := []string{"", "run", "reply"}
		ev.Kind = kinds[rng.IntN(len(kinds))]
		return out, fmt.Sprintf("line %d: kind -> %q", i+1, ev.Kind)
	case 6:
		ev.Read = !ev.Read
		return out, fmt.Sprintf("line %d: read -> %v", i+1, ev.Read)
	case 7:
		acts := core.Actions()
		a := acts[rng.IntN(len(acts))]
		if a == core.ActionLapse {
			a = core.ActionCrash
		}
		ev.Action = a
		return out, fmt.Sprintf("line %d: action -> %s", i+1, a)
	case 8:
		ev.Holder = holders[rng.IntN(len(holders))]
		return out, fmt.Sprintf("line %d: holder -> %q", i+1, ev.Holder)
	case 9:
		ev.Tick = uint64(small(int64(ev.Tick)))
		return out, fmt.Sprintf("line %d: tick -> %d", i+1, ev.Tick)
	case 10:
		if len(out) == 1 {
			return out, "nothing dropped (one line)"
		}
		return append(out[:i:i], out[i+1:]...), fmt.Sprintf("line %d dropped", i+1)
	default:
		if rng.IntN(2) == 0 || i+1 == len(out) {
			dup := append(append(out[:i+1:i+1], out[i]), out[i+1:]...)
			return dup, fmt.Sprintf("line %d duplicated", i+1)
		}
		out[i], out[i+1] = out[i+1], out[i]
		return out, fmt.Sprintf("lines %d and %d swapped", i+1, i+2)
	}
}

// clearTiming keeps only the fields the spec has a value for.
func clearTiming(ev *core.TraceEvent) {
	*ev = core.TraceEvent{Tick: ev.Tick, Read: ev.Read, Action: ev.Action, Thread: ev.Thread,
		Proc: ev.Proc, Holder: ev.Holder, Msg: ev.Msg, Req: ev.Req, Run: ev.Run,
		Taken: ev.Taken, Lease: ev.Lease, Kind: ev.Kind}
}
