package shrink

import (
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// LeaseShrinking returns ShrinkHistory's options for
// tracecheck.LeaseModel: what its operations need, and its run ids
// renumbered.
func LeaseShrinking() []HistoryOption {
	return []HistoryOption{WithNeeds(leaseNeeds), WithRenumber(leaseRenumber)}
}

type leaseKey struct {
	thread core.ThreadID
	holder core.Holder
	n      uint64
}

// leaseNeeds: a Renew, RunStart or Reply that succeeded (or a Reply
// refused as already answered) needs its holder's Claim, when the history
// has it; a read of the cursor at message m needs a write that consumed
// m; a Reply refused as already answered needs a Reply that answered.
// Without them each would fail alone, a failure the history never had.
func leaseNeeds(ops []porcupine.Operation) [][][]int {
	claims := map[leaseKey][]int{}
	consumed := map[leaseKey][]int{}
	answered := map[leaseKey][]int{}
	for i, op := range ops {
		in, out := op.Input.(tracecheck.LinInput), op.Output.(tracecheck.LinOutput)
		if out.Status != tracecheck.LinOK {
			continue
		}
		switch in.Kind {
		case tracecheck.LinClaim:
			k := leaseKey{thread: in.Thread, holder: in.Holder}
			claims[k] = append(claims[k], i)
		case tracecheck.LinRunStart, tracecheck.LinReply:
			k := leaseKey{thread: in.Thread, n: uint64(in.Msg)}
			consumed[k] = append(consumed[k], i)
			if in.Kind == tracecheck.LinReply {
				k := leaseKey{thread: in.Thread, n: uint64(in.Req)}
				answered[k] = append(answered[k], i)
			}
		}
	}
	needs := make([][][]int, len(ops))
	add := func(i int, group []int) {
		if len(group) > 0 {
			needs[i] = append(needs[i], group)
		}
	}
	for i, op := range ops {
		in, out := op.Input.(tracecheck.LinInput), op.Output.(tracecheck.LinOutput)
		switch {
		case in.Kind == tracecheck.LinTaken && out.Taken != 0:
			add(i, consumed[leaseKey{thread: in.Thread, n: uint64(out.Taken)}])
		case in.Kind == tracecheck.LinReply && out.Status == tracecheck.LinAnswered:
			add(i, claims[leaseKey{thread: in.Thread, holder: in.Holder}])
			add(i, answered[leaseKey{thread: in.Thread, n: uint64(in.Req)}])
		case out.Status == tracecheck.LinOK && (in.Kind == tracecheck.LinRenew || in.Kind == tracecheck.LinRunStart || in.Kind == tracecheck.LinReply):
			add(i, claims[leaseKey{thread: in.Thread, holder: in.Holder}])
		}
	}
	return needs
}

// leaseRenumber gives the RunStarts that succeeded run ids 1, 2, ... per
// thread in the order of the ids they had: the model's RunStart returns
// the next id, so a history without an earlier run is one whose later
// runs have lower ids.
func leaseRenumber(cand []porcupine.Operation) []porcupine.Operation {
	ids := map[core.ThreadID][]core.RunID{}
	for _, op := range cand {
		in, out := op.Input.(tracecheck.LinInput), op.Output.(tracecheck.LinOutput)
		if in.Kind == tracecheck.LinRunStart && out.Status == tracecheck.LinOK {
			ids[in.Thread] = append(ids[in.Thread], out.Run)
		}
	}
	for _, s := range ids {
		slices.Sort(s)
	}
	out := slices.Clone(cand)
	for i, op := range out {
		in, o := op.Input.(tracecheck.LinInput), op.Output.(tracecheck.LinOutput)
		if in.Kind == tracecheck.LinRunStart && o.Status == tracecheck.LinOK {
			n, _ := slices.BinarySearch(ids[in.Thread], o.Run)
			o.Run = core.RunID(n + 1)
			out[i].Output = o
		}
	}
	return out
}
