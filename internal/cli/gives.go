package cli

import "github.com/threadclaim/threadclaim/core"

// givenTwice counts, in an execution's trace lines, the messages given to
// a model more than once, by the lines that give one (RunStart's prompt,
// Reply's answer, Steer's steering), thread by thread: twice. again counts
// those of them given again after steering that no SteerRecord line
// recorded: the exception, a steered run abandoned before its record and
// its message given again by the next holder.
func givenTwice(lines []core.TraceEvent) (twice, again int) {
	type msg struct {
		thread core.ThreadID
		seq    core.Seq
	}
	type gives struct {
		n          int
		unrecorded bool // the last give was a Steer no SteerRecord followed yet
		lost       bool // a give came after such a Steer
	}
	seen := map[msg]*gives{}
	for _, l := range lines {
		switch l.Action {
		case core.ActionRunStart, core.ActionReply, core.ActionSteer, core.ActionSteerRecord:
		default:
			continue
		}
		k := msg{l.Thread, l.Msg}
		g := seen[k]
		if g == nil {
			g = &gives{}
			seen[k] = g
		}
		if l.Action == core.ActionSteerRecord {
			g.unrecorded = false
			continue
		}
		if g.unrecorded {
			g.lost = true
		}
		g.unrecorded = l.Action == core.ActionSteer
		g.n++
		if g.n == 2 {
			twice++
			if g.lost {
				again++
			}
		}
	}
	return twice, again
}
