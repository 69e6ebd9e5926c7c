package cli

import (
	"testing"

	"github.com/threadclaim/threadclaim/core"
)

func TestGivenTwice(t *testing.T) {
	line := func(a core.Action, thread core.ThreadID, m core.Seq) core.TraceEvent {
		return core.TraceEvent{Action: a, Thread: thread, Msg: m}
	}
	for _, tc := range []struct {
		name         string
		lines        []core.TraceEvent
		twice, again int
	}{
		{"a prompt given once", []core.TraceEvent{line(core.ActionRunStart, "t", 1)}, 0, 0},
		{"steering recorded", []core.TraceEvent{line(core.ActionRunStart, "t", 1), line(core.ActionSteer, "t", 2), line(core.ActionSteerRecord, "t", 2)}, 0, 0},
		{"the exception: steering lost, given again as a prompt", []core.TraceEvent{
			line(core.ActionRunStart, "t", 1), line(core.ActionSteer, "t", 2), line(core.ActionSteerRefused, "t", 2), line(core.ActionRunStart, "t", 2)}, 1, 1},
		{"the exception, given again as steering", []core.TraceEvent{
			line(core.ActionSteer, "t", 2), line(core.ActionSteer, "t", 2), line(core.ActionSteerRecord, "t", 2)}, 1, 1},
		{"a prompt given twice is no exception", []core.TraceEvent{line(core.ActionRunStart, "t", 1), line(core.ActionRunStart, "t", 1)}, 1, 0},
		{"steering recorded, then given again", []core.TraceEvent{
			line(core.ActionSteer, "t", 2), line(core.ActionSteerRecord, "t", 2), line(core.ActionRunStart, "t", 2)}, 1, 0},
		{"threads apart", []core.TraceEvent{line(core.ActionRunStart, "t", 1), line(core.ActionRunStart, "u", 1)}, 0, 0},
	} {
		twice, again := givenTwice(tc.lines)
		if twice != tc.twice || again != tc.again {
			t.Errorf("%s: given twice %d, again after lost steering %d; want %d, %d", tc.name, twice, again, tc.twice, tc.again)
		}
	}
}
