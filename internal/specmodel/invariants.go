package specmodel

import "github.com/threadclaim/threadclaim/core"

// InvGivenAtMostOnce is the spec's GivenAtMostOnce (given[m] <= 1 for
// every message): false in the spec, and negated in a cfg
// (ThreadClaimLapseGivenTwice) to show that ADR-0069's exception, a
// message given twice, is reachable.
const InvGivenAtMostOnce = "GivenAtMostOnce"

// Invariant evaluates the named invariant in s. It reports false for a
// name the model does not know (ParseConfig refuses those).
func (m *Model) Invariant(name string, s *State) bool {
	switch name {
	case core.InvTypeOK:
		return m.TypeOK(s)
	case core.InvConsumedAtMostOnce:
		return ConsumedAtMostOnce(s)
	case core.InvOneActiveRun:
		return ActiveRuns(s) <= 1
	case core.InvNoLiveAbandon:
		return !s.LiveAbandoned
	case core.InvSteeringException:
		return SteeringException(s)
	case InvGivenAtMostOnce:
		return GivenAtMostOnce(s)
	}
	return false
}

// Violated returns the first of the cfg's invariants, in the cfg's order,
// that is false in s, or "" when all hold.
func (m *Model) Violated(s *State) string {
	for _, inv := range m.cfg.Invariants {
		if !m.Invariant(inv, s) {
			return inv
		}
	}
	return ""
}

// ConsumedAtMostOnce is I1_ConsumedAtMostOnce.
func ConsumedAtMostOnce(s *State) bool {
	for _, n := range s.Consumed {
		if n > 1 {
			return false
		}
	}
	return true
}

// SteeringException is the spec's SteeringException: every give of a
// message is the one that consumed it or a steered pair; every pair's run
// exists and has not ended, and an active run's pair is for message
// taken + 1.
func SteeringException(s *State) bool {
	for i, g := range s.Given {
		n := int(s.Consumed[i])
		for _, x := range s.Steered {
			if int(x.Msg) == i+1 {
				n++
			}
		}
		if int(g) != n {
			return false
		}
	}
	for _, x := range s.Steered {
		if x.Run < 1 || int(x.Run) > len(s.Runs) {
			return false
		}
		switch s.Runs[x.Run-1].State {
		case Ended:
			return false
		case Active:
			if x.Msg != s.Taken+1 {
				return false
			}
		}
	}
	return true
}

// GivenAtMostOnce is the spec's GivenAtMostOnce (negated in a cfg, to show
// that the exception is reachable).
func GivenAtMostOnce(s *State) bool {
	for _, g := range s.Given {
		if g > 1 {
			return false
		}
	}
	return true
}

// TypeOK is the spec's TypeOK, conjunct by conjunct.
func (m *Model) TypeOK(s *State) bool {
	c := m.cfg
	maxMsgs, maxClaims := uint8(c.MaxMsgs), uint8(c.MaxClaims)
	if s.Msgs > maxMsgs || s.Taken > maxMsgs || s.Taken > s.Msgs || s.Lease.Holder > maxClaims {
		return false
	}
	for _, r := range s.Runs {
		if r.Holder < 1 || r.Holder > maxClaims || r.Prompt < 1 || r.Prompt > maxMsgs || r.State > Abandoned {
			return false
		}
	}
	for _, q := range s.Reqs {
		if q.Run == 0 || q.State > Answered || q.Answer > maxMsgs {
			return false
		}
	}
	if len(s.Consumed) != c.MaxMsgs || len(s.Given) != c.MaxMsgs || len(s.Procs) != len(c.Procs) {
		return false
	}
	for _, x := range s.Steered {
		if x.Msg < 1 || x.Msg > maxMsgs {
			return false
		}
	}
	for _, p := range s.Procs {
		if p.PC > Steered || p.Hold > maxClaims || p.Plan.Kind > PlanSteer || p.Plan.Msg > maxMsgs {
			return false
		}
	}
	return s.NextHolder >= 1 && s.NextHolder <= maxClaims+1
}

// LiveTakeover is the spec's LiveTakeover for the step from s to t: the
// lease passes to a new holder while it was held and had not expired.
func LiveTakeover(s, t *State) bool {
	return t.Lease.Holder != 0 && t.Lease.Holder != s.Lease.Holder && s.Lease.Holder != 0 && !s.Lease.Expired
}
