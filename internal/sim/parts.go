package sim

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
)

// SkewedClock is the machine's clock off by a fixed offset: a process
// whose clock runs ahead of (or behind) the others'.
type SkewedClock struct{ Offset time.Duration }

// Now returns the machine's time plus the offset.
func (c SkewedClock) Now() time.Time { return time.Now().Add(c.Offset) }

// After waits for d on the machine's clock.
func (c SkewedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// StallingAgent returns an agent that asks one question one run in four
// and then runs for a random time in [0, maxStall], or until its context
// ends: a run that may outlast its claim's TTL. Halfway through, one run
// in two of those that asked nothing takes the messages posted since it
// started as steering (Session.Steer), so that the second half of its
// stall lies between a steering's give and its record: where a lapse, a
// takeover and an Abandon make the exception (given twice, consumed
// once). The others leave them waiting, each the prompt of a run of its
// own, which the runner starts with the end of the run before while a
// backlog waits (core.Workspace.RunEndThenStart). Its choices come from
// a source seeded with seed, so the same seed makes the same choices.
func StallingAgent(seed uint64, maxStall time.Duration) runner.Agent {
	rng := rand.New(rand.NewPCG(seed, 2))
	var mu sync.Mutex
	return runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
		mu.Lock()
		stall := time.Duration(rng.Int64N(int64(maxStall) + 1))
		ask := rng.IntN(4) == 0
		steer := rng.IntN(2) == 0
		mu.Unlock()
		out := "done: " + s.Delivered.Prompt.Text
		if ask {
			if _, err := s.Ask(ctx, "which one?"); err != nil {
				return err
			}
		}
		if !sleep(ctx, stall/2) {
			return s.Output(out)
		}
		if !ask && steer {
			steered, err := takeSteering(ctx, s)
			if err != nil {
				return err
			}
			out += steered
		}
		sleep(ctx, stall-stall/2)
		return s.Output(out)
	})
}

// takeSteering takes every message Session.Steer has for the run now,
// oldest first, and says which, for the run's output.
func takeSteering(ctx context.Context, s *runner.Session) (string, error) {
	out := ""
	for {
		m, ok, err := s.Steer(ctx)
		if err != nil || !ok {
			return out, err
		}
		out += "; steered: " + m.Text
	}
}

// sleep waits for d, or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// snapshot reads a thread's state, its log and its lease in one
// transaction.
func snapshot(ctx context.Context, s core.Storage, id core.ThreadID) (th *core.Thread, events []core.Event, lease core.Lease, err error) {
	err = s.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		t, err := tx.Thread(ctx, id)
		if err != nil {
			return err
		}
		th = t.Clone()
		if events, err = tx.Events(ctx, id); err != nil {
			return err
		}
		lease, err = tx.Lease(ctx, id)
		return err
	})
	return th, events, lease, err
}

// recorder keeps an execution's trace lines, in the order its processes
// trace them, and passes each on to next.
type recorder struct {
	mu        sync.Mutex
	lines     []core.TraceEvent
	perThread map[core.ThreadID]int // lines so far, by thread
	next      core.Tracer
}

func (r *recorder) Trace(ev core.TraceEvent) {
	r.mu.Lock()
	r.lines = append(r.lines, ev)
	r.perThread[ev.Thread]++
	r.mu.Unlock()
	if r.next != nil {
		r.next.Trace(ev)
	}
}
