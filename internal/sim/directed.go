package sim

import (
	"context"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/runner"
)

// lapse is a Lapse step an execution saw: time took some process's clock
// past the expiry of a lease still held. at is the number of trace lines
// recorded then, n the number of the thread's lines (its place in the
// thread's trace).
type lapse struct {
	thread core.ThreadID
	at, n  int
}

// seeLapses notes, after time passed, every lease still held whose expiry
// some process's clock has passed: from then on another process may take
// it over. The spec calls this Lapse; no trace line shows it.
func (s *Seeded) seeLapses(ctx context.Context) error {
	threads := s.threads
	if s.dir != nil {
		threads = s.dir.current(s)
	}
	for _, id := range threads {
		var lease core.Lease
		err := s.cfg.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
			var err error
			lease, err = tx.Lease(ctx, id)
			return err
		})
		if err != nil {
			return err
		}
		if lease.Holder == "" || lease == s.lapsed[id] {
			continue
		}
		for _, p := range s.procs {
			if lease.Expired(p.clock.Now()) {
				s.lapsed[id] = lease
				n := s.rec.perThread[id]
				if s.faults != nil {
					for _, l := range s.faults.unseen {
						if l.Thread == id {
							n++
						}
					}
				}
				s.lapses = append(s.lapses, lapse{thread: id, at: len(s.rec.lines), n: n})
				s.stats.Lapses++
				break
			}
		}
	}
	return nil
}

// CoverageLines returns the execution's trace (TraceLines) with the Lapse
// steps it saw put where they fell, as lines of action Lapse that name
// only their thread: what Coverage follows. They are not trace lines; no
// checker reads them.
func (s *Seeded) CoverageLines() []core.TraceEvent {
	lines := s.TraceLines()
	if len(s.lapses) == 0 {
		return lines
	}
	pending := map[core.ThreadID][]lapse{}
	for _, l := range s.lapses {
		pending[l.thread] = append(pending[l.thread], l)
	}
	seen := map[core.ThreadID]int{}
	out := make([]core.TraceEvent, 0, len(lines)+len(s.lapses))
	flush := func(id core.ThreadID) {
		for len(pending[id]) > 0 && pending[id][0].n <= seen[id] {
			out = append(out, core.TraceEvent{Action: core.ActionLapse, Thread: id})
			pending[id] = pending[id][1:]
		}
	}
	for _, l := range lines {
		flush(l.Thread)
		out = append(out, l)
		seen[l.Thread]++
	}
	for _, id := range s.threads {
		seen[id] = int(^uint(0) >> 1)
		flush(id)
	}
	return out
}

// director is a directed execution's scheduler: it drives thread k's
// processes along walk k, step by step, and follows the thread's trace to
// see each step taken.
type director struct {
	m     *specmodel.Model
	walks []Walk
	k, i  int  // walk k's step i is next
	begun bool // walk k's processes are idle and its state is Init
	state specmodel.State
	// fedLines and fedLapses are the trace lines and lapses followed.
	fedLines, fedLapses int
	tries               int  // operations scheduled for step i so far
	yielded             bool // an OpYield was scheduled for step i
	checks              []core.ThreadID
	walked, diverged    int
}

// maxTries bounds the operations one step may take: a Release takes up to
// three (a yield, the plan that gives up, the release).
const maxTries = 4

func newDirector(m *specmodel.Model, walks []Walk) *director {
	return &director{m: m, walks: walks}
}

// current returns the thread of the walk under way.
func (d *director) current(s *Seeded) []core.ThreadID {
	if d.k >= len(d.walks) {
		return nil
	}
	return s.threads[d.k : d.k+1]
}

// touched returns the threads the last operation may have changed: what
// Check reads.
func (d *director) touched(*Seeded) []core.ThreadID { return d.checks }

// nextDirected returns the operation that takes the walk under way its
// next step, and false once every walk is over.
func (s *Seeded) nextDirected() (Op, bool) {
	d := s.dir
	for d.k < len(d.walks) {
		id := s.threads[d.k]
		if !d.begun {
			// A process still in a turn from the last walk crashes: the
			// walk starts from Init, every process idle.
			for pi, p := range s.procs {
				if p.turn != nil {
					d.checks = []core.ThreadID{p.thread}
					return Op{Kind: OpCrash, Proc: pi}, true
				}
			}
			d.begun, d.state, d.i, d.tries, d.yielded = true, d.m.Init(), 0, 0, false
			d.fedLines, d.fedLapses = len(s.rec.lines), len(s.lapses)
		}
		walk := d.walks[d.k]
		ok := d.follow(s, id)
		switch {
		case ok && d.i == len(walk):
			d.walked++
		case !ok || d.tries >= maxTries:
			d.walked++
			d.diverged++
		default:
			d.tries++
			d.checks = s.threads[d.k : d.k+1]
			return s.opFor(walk, d.i, d.k), true
		}
		d.k++
		d.begun = false
	}
	return Op{}, false
}

// follow takes the walk's state along the thread's new trace lines and
// lapses, and reports false when one is not the walk's next step.
func (d *director) follow(s *Seeded, id core.ThreadID) bool {
	walk := d.walks[d.k]
	procs := d.m.Config().Procs
	for d.fedLines < len(s.rec.lines) || d.fedLapses < len(s.lapses) {
		var st specmodel.Step
		if d.fedLapses < len(s.lapses) && s.lapses[d.fedLapses].at <= d.fedLines {
			l := s.lapses[d.fedLapses]
			d.fedLapses++
			if l.thread != id {
				continue
			}
			st = specmodel.Step{Action: core.ActionLapse, P: -1}
		} else {
			l := s.rec.lines[d.fedLines]
			d.fedLines++
			if l.Thread != id {
				continue
			}
			var known bool
			if st, known = stepOf(l, procs); !known {
				return false
			}
		}
		if d.i >= len(walk) || st != walk[d.i] {
			return false
		}
		out := d.m.Do(&d.state, st)
		if !out.Enabled {
			return false
		}
		d.state, d.i, d.tries, d.yielded = out.Next, d.i+1, 0, false
	}
	return true
}

// opFor returns the operation that makes the real code take step i of the
// walk on thread k.
func (s *Seeded) opFor(walk Walk, i, k int) Op {
	st := walk[i]
	op := Op{Proc: max(st.P, 0), Thread: k}
	switch st.Action {
	case core.ActionPost:
		op.Kind = OpPost
	case core.ActionLapse:
		// Every clock passes the expiry: any process may claim.
		op.Kind, op.By = OpTime, s.cfg.ClaimTTL+time.Second
	case core.ActionRenew:
		op.Kind = OpRenew
	case core.ActionCrash:
		op.Kind = OpCrash
	case core.ActionRelease:
		// The runner releases when its plan finds no work; a turn asked to
		// stop releases at its next plan whatever the work.
		p := s.procs[st.P]
		op.Kind = OpStep
		if p.turn != nil && !p.co.active && p.turn.Next() == runner.StepPlan && !s.dir.yielded {
			op.Kind = OpYield
			s.dir.yielded = true
		}
	case core.ActionAsk, core.ActionSteer:
		// The agent takes as much steering, then asks as many questions,
		// as the walk has the process take and ask before it ends the
		// run; each transaction after the first is one the step pauses
		// before (Interleave). A steering's record is the agent's next
		// call (a Steer or an Ask), or the turn's step after it.
		op.Kind = OpStep
		op.Steers, op.Asks = agentCalls(walk[i:], st.P)
	default:
		op.Kind = OpStep
	}
	return op
}

// agentCalls counts the Steer steps, then the Ask steps, that process p
// takes in walk (from the agent's first) before it does anything else:
// the calls one run of the agent makes. A steering's record between them
// is the next call's; one after the last Steer with no Ask after it is the
// turn's step after the agent.
func agentCalls(walk Walk, p int) (steers, asks int) {
	pending := false
	for _, next := range walk {
		if next.P != p || next.Action == core.ActionRenew {
			continue
		}
		switch {
		case next.Action == core.ActionSteer && asks == 0 && !pending:
			steers, pending = steers+1, true
		case next.Action == core.ActionSteerRecord && pending:
			pending = false
		case next.Action == core.ActionAsk && !pending:
			asks++
		default:
			return steers, asks
		}
	}
	return steers, asks
}

// RunnerSkips names the steps no plan can steer the runner along: a
// refused abandon (AbandonFenced) when the state has no active run of
// another holder. The spec lets a claimed process without the lease be
// refused an abandon at any time, but the runner abandons only the runs
// its plan found active; it is refused with none active only when the run
// ended between its plan and its abandon, a past the spec's state does
// not keep. So the skip is conservative: random schedules do reach a few
// of these edges (3 in the default run -cfg of the fenced cfg).
func RunnerSkips(from *specmodel.State, st specmodel.Step) bool {
	if st.Action != core.ActionAbandonFenced {
		return false
	}
	hold := from.Procs[st.P].Hold
	for _, r := range from.Runs {
		if r.State == specmodel.Active && r.Holder != hold {
			return false
		}
	}
	return true
}
