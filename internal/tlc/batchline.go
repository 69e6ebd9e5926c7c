package tlc

import (
	"math"

	"github.com/threadclaim/threadclaim/core"
)

// TLC's JSON reader keeps the low 32 bits of an integer: a line's msg of
// 2^32+1 would reach the trace spec as 1, and a clock reading (Unix
// nanoseconds) as noise. So a batch does not hand TLC the lines as they
// are, but batchLines of them:
//
//   - tick, msg, req, run and taken as they are when they fit in a TLC
//     integer (below 2^31), and as -1, a value no line of the spec can
//     carry, when they do not (the spec's own values stay far below: a
//     thread would need 2^31 lines to reach one);
//   - the timing of Claim and Renew lines (now, ttl, expires, replaced)
//     exactly, each as three limbs (clockValue), in a "clock" field that
//     is there only when one of the four is not zero.
type batchLine struct {
	Tick   int64       `json:"tick"`
	Read   bool        `json:"read"`
	Action core.Action `json:"action"`
	Thread string      `json:"thread"`
	Proc   string      `json:"proc"`
	Holder string      `json:"holder"`
	Msg    int64       `json:"msg"`
	Req    int64       `json:"req"`
	Run    int64       `json:"run"`
	Taken  int64       `json:"taken"`
	Lease  string      `json:"lease"`
	Kind   string      `json:"kind,omitempty"`
	Clock  *batchClock `json:"clock,omitempty"`
	Output bool        `json:"output,omitempty"`
}

// batchClock is a line's timing, each value as clockValue encodes it.
type batchClock struct {
	Now      clockValue `json:"now"`
	TTL      clockValue `json:"ttl"`
	Expires  clockValue `json:"expires"`
	Replaced clockValue `json:"replaced"`
}

// clockValue is an int64 v as three limbs of 22 bits, most significant
// first, of v + 2^63 (so that every value is non-negative and the limbs'
// order is the values' order): v + 2^63 = a*2^44 + b*2^22 + c. The trace
// spec compares and adds them limb by limb, and every limb and every sum
// of two stays below 2^31.
type clockValue [3]int64

// clockLimb is the limbs' base.
const clockLimb = 1 << 22

func encodeClock(v int64) clockValue {
	u := uint64(v) ^ (1 << 63) // v + 2^63, as an unsigned number
	return clockValue{int64(u >> 44), int64(u >> 22 & (clockLimb - 1)), int64(u & (clockLimb - 1))}
}

// tlcInt is an id or tick as the trace spec reads it: itself below 2^31,
// -1 at or above.
func tlcInt(v uint64) int64 {
	if v > math.MaxInt32 {
		return -1
	}
	return int64(v)
}

func toBatchLine(ev core.TraceEvent) batchLine {
	l := batchLine{
		Tick: tlcInt(ev.Tick), Read: ev.Read, Action: ev.Action, Thread: string(ev.Thread), Proc: ev.Proc,
		Holder: string(ev.Holder), Msg: tlcInt(uint64(ev.Msg)), Req: tlcInt(uint64(ev.Req)), Run: tlcInt(uint64(ev.Run)),
		Taken: tlcInt(uint64(ev.Taken)), Lease: string(ev.Lease), Kind: ev.Kind, Output: ev.Output,
	}
	if ev.Now != 0 || ev.TTL != 0 || ev.Expires != 0 || ev.Replaced != 0 {
		l.Clock = &batchClock{encodeClock(ev.Now), encodeClock(ev.TTL), encodeClock(ev.Expires), encodeClock(ev.Replaced)}
	}
	return l
}

func toBatch(traces [][]core.TraceEvent) [][]batchLine {
	out := make([][]batchLine, len(traces))
	for i, t := range traces {
		out[i] = make([]batchLine, len(t))
		for j, ev := range t {
			out[i][j] = toBatchLine(ev)
		}
	}
	return out
}
