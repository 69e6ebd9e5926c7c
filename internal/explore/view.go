package explore

import (
	"fmt"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Cell is one line of a thread, drawn in its process's lane.
type Cell struct {
	N     int // line number
	Tick  uint64
	Lane  int
	Text  string
	Class string // consume, refuse, lapse, plain
	Bad   string // the violation's rule, on the rejected line
}

// View is a thread's lines as a timeline: a lane per process, holders
// numbered h1, h2, ... in the order they claim, a Claim that takes a lease
// another holder had marked as an inferred lapse.
type View struct {
	Thread  core.ThreadID
	Lanes   []string
	Holders []string // "h1 = <holder> (proc)"
	Cells   []Cell   // one per line, in trace order
}

// BuildView draws one thread's lines; v, when it is on this thread, marks
// the rejected line.
func BuildView(th tracecheck.ThreadLines, v *tracecheck.Violation) View {
	info := threadInfo(th)
	fl := NewFollower(info, v)
	tv := View{Thread: th.Thread, Lanes: info.Lanes}
	for _, l := range th.Lines {
		tv.Cells = append(tv.Cells, fl.cell(l.N, l.Ev))
	}
	tv.Holders = fl.Holders
	return tv
}

// CellText describes a line by the values its action carries (the action
// table's Carries): the run, the request, the message, Plan's kind, and for
// a refusal what refused it.
func CellText(ev core.TraceEvent, info core.ActionInfo, name func(core.Holder) string) string {
	parts := []string{string(ev.Action)}
	if info.Carries.Has(core.FieldKind) {
		parts = append(parts, ev.Kind)
	}
	if info.Carries.Has(core.FieldRun) && (ev.Run != 0 || info.Consumes) {
		parts = append(parts, fmt.Sprintf("r%d", ev.Run))
	}
	if info.Carries.Has(core.FieldReq) && ev.Req != 0 {
		parts = append(parts, fmt.Sprintf("q%d", ev.Req))
	}
	if info.Carries.Has(core.FieldMsg) && ev.Msg != 0 {
		switch {
		case info.Consumes || ev.Action == core.ActionPlan && ev.Kind == core.PlanKindReply:
			parts = append(parts, "←")
		case ev.Action == core.ActionSteer:
			parts = append(parts, "given") // to the run's agent; its record consumes it
		}
		parts = append(parts, fmt.Sprintf("m%d", ev.Msg))
	}
	if info.Carries&(core.FieldRun|core.FieldMsg|core.FieldReq) == 0 && info.Carries.Has(core.FieldHolder) {
		parts = append(parts, name(ev.Holder))
	}
	switch {
	case info.Refuses != "" && info.Carries.Has(core.FieldLease):
		parts = append(parts, "✗ lease "+name(ev.Lease))
	case info.Refuses != "":
		parts = append(parts, "✗ abandoned")
	case info.Line == core.LineWriteOrRead && ev.Read:
		parts = append(parts, fmt.Sprintf("(lease is %s's)", name(ev.Lease)))
	}
	return strings.Join(parts, " ")
}
