package sim

import (
	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/runner"
)

// guide steers a seeded scheduler towards spec states no execution has
// visited yet. It follows each thread's trace through the spec model as
// the execution goes (the same walk Coverage makes), predicts for each
// operation it could schedule the spec step that operation would take —
// a process's next runner step as the spec's action, a post, a renewal, a
// crash — and, when some operation leads to a state Coverage has not
// seen, schedules one of those. Time passing and clock jumps it leaves to
// the random draw, which still makes every other choice.
type guide struct {
	cov     *Coverage
	threads map[core.ThreadID]*follower
	fed     int // trace lines already followed
}

func newGuide(cov *Coverage) *guide {
	return &guide{cov: cov, threads: map[core.ThreadID]*follower{}}
}

// feed follows the lines traced since the last call.
func (g *guide) feed(lines []core.TraceEvent) {
	for _, l := range lines[g.fed:] {
		f := g.threads[l.Thread]
		if f == nil {
			f = g.cov.newFollower(nil)
			g.threads[l.Thread] = f
		}
		f.line(l)
	}
	g.fed = len(lines)
}

// novel reports whether taking the steps from the thread's current state
// reaches a state Coverage has not marked. A step that is not enabled is
// replaced by its alternative (a refusal for a fenced write), if any.
func (g *guide) novel(thread core.ThreadID, steps ...specmodel.Step) bool {
	f := g.threads[thread]
	if f == nil {
		f = g.cov.newFollower(nil)
		g.threads[thread] = f
	}
	if f.lost {
		return false
	}
	m := g.cov.model
	s := f.state.Clone()
	for _, st := range steps {
		out := m.Do(&s, st)
		if !out.Enabled {
			alt, ok := refusalOf(st)
			if !ok {
				return false
			}
			if out = m.Do(&s, alt); !out.Enabled {
				return false
			}
		}
		s = out.Next
	}
	j, ok := g.cov.graph.Lookup(s.Key())
	return ok && !g.cov.Visited(j)
}

// refusalOf is the spec's refusal of a fenced write, the step a process
// takes instead when the fence says no (or, for RunEnd, the run was
// abandoned).
func refusalOf(st specmodel.Step) (specmodel.Step, bool) {
	for _, info := range core.ActionTable() {
		if info.Refuses == st.Action {
			return specmodel.Step{Action: info.Action, P: st.P}, true
		}
	}
	return specmodel.Step{}, false
}

// candidates returns the operations whose predicted spec step reaches an
// unvisited state.
func (s *Seeded) candidates() []Op {
	g := s.guide
	g.feed(s.rec.lines)
	var out []Op
	for ti, id := range s.threads {
		if g.novel(id, specmodel.Step{Action: core.ActionPost, P: -1}) && s.posted[ti] < s.cfg.Messages {
			out = append(out, Op{Kind: OpPost, Thread: ti})
		}
	}
	for pi, p := range s.procs {
		if p.co.active {
			continue // paused inside a step: what it does next is the storage's to say
		}
		if p.turn == nil {
			for ti, id := range s.threads {
				f := g.threads[id]
				lease := f != nil && f.state.Lease.Holder != 0 && !f.state.Lease.Expired
				steps := []specmodel.Step{{Action: core.ActionClaim, P: pi}}
				if lease {
					steps = append([]specmodel.Step{{Action: core.ActionLapse, P: -1}}, steps...)
				}
				if g.novel(id, steps...) {
					out = append(out, Op{Kind: OpStep, Proc: pi, Thread: ti})
				}
			}
			continue
		}
		ti := s.threadIndex(p.thread)
		if p.turn.Claim() != (core.Claim{}) {
			if g.novel(p.thread, specmodel.Step{Action: core.ActionCrash, P: pi}) {
				out = append(out, Op{Kind: OpCrash, Proc: pi, Thread: ti})
			}
			if g.novel(p.thread, specmodel.Step{Action: core.ActionRenew, P: pi}) {
				out = append(out, Op{Kind: OpRenew, Proc: pi, Thread: ti})
			}
		}
		var st core.Action
		asks, steers := 0, 0
		switch p.turn.Next() {
		case runner.StepPlan:
			st = core.ActionPlan
		case runner.StepRunStart:
			st = core.ActionRunStart
		case runner.StepReply:
			st = core.ActionReply
		case runner.StepAgent:
			st, asks = core.ActionAsk, 1
			if g.novel(p.thread, specmodel.Step{Action: core.ActionSteer, P: pi}) {
				st, asks, steers = core.ActionSteer, 0, 1
			}
		case runner.StepSteerRecord:
			st = core.ActionSteerRecord
		case runner.StepRunEnd:
			st = core.ActionRunEnd
		case runner.StepRelease:
			st = core.ActionRelease
		case runner.StepAbandon:
			if f := g.threads[p.thread]; f != nil {
				for r, run := range f.state.Runs {
					if run.State == specmodel.Active && g.novel(p.thread, specmodel.Step{Action: core.ActionAbandon, P: pi, R: r + 1}) {
						out = append(out, Op{Kind: OpStep, Proc: pi, Thread: ti})
						break
					}
				}
			}
			continue
		default:
			continue
		}
		if g.novel(p.thread, specmodel.Step{Action: st, P: pi}) {
			out = append(out, Op{Kind: OpStep, Proc: pi, Thread: ti, Asks: asks, Steers: steers})
		}
	}
	return out
}

func (s *Seeded) threadIndex(id core.ThreadID) int {
	for i, t := range s.threads {
		if t == id {
			return i
		}
	}
	return 0
}
