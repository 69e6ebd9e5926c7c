package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/threadclaim/threadclaim/core"
)

// errKilled is what a crashed process's step gets from storage: the step
// was paused between two transactions when its process died, and nothing
// it does from then on reaches storage.
var errKilled = errors.New("sim: the process crashed")

// coroutine runs one process's step in a goroutine of its own and hands
// control back to the scheduler between any two storage transactions of
// the step, so that the scheduler can run other operations there: a write
// whose check and effect are two transactions shows its gap. Only one of
// the scheduler and the step runs at a time, so an execution stays
// determined by its seed.
type coroutine struct {
	resume chan bool     // scheduler → step: true to go on, false to die
	paused chan struct{} // step → scheduler: waiting before a transaction
	done   chan bool     // step → scheduler: the step returned its result
	// start hands a step to the coroutine's goroutine, which lives from
	// the first step to end: one goroutine for every step, whose stack
	// has grown once, instead of a new one for each.
	start  chan func()
	worker bool // the goroutine is running
	active bool // a step is in flight (paused), scheduler's view
	// inside is true while a step runs in the coroutine. A step run on
	// the scheduler's goroutine instead (inline) may still carry the
	// coroutine in its context, and its transactions then pass the gate
	// without pausing: nobody would resume them.
	inside bool
	txns   int // transactions the step in flight has begun
	killed bool
}

// newCoroutine returns a coroutine with no step in flight. Its channels
// and goroutine are made by its first step: most processes' steps never
// pause, and a forked execution (Seeded.fork) makes one for each process.
func newCoroutine() *coroutine { return &coroutine{} }

type coroutineKey struct{}

// run starts a step (fn) or resumes the one in flight, and returns once the
// step pauses before a transaction (finished false) or returns (finished
// true, with its result).
func (c *coroutine) run(ctx context.Context, fn func(ctx context.Context) bool) (finished, result bool) {
	c.inside = true
	defer func() { c.inside = false }()
	if c.active {
		c.resume <- true
	} else {
		c.active, c.txns = true, 0
		ctx = context.WithValue(ctx, coroutineKey{}, c)
		if !c.worker {
			if c.resume == nil {
				c.resume, c.paused, c.done = make(chan bool), make(chan struct{}), make(chan bool)
			}
			start := make(chan func())
			c.start, c.worker = start, true
			go func() {
				for step := range start {
					step()
				}
			}()
		}
		c.start <- func() { c.done <- fn(ctx) }
	}
	select {
	case <-c.paused:
		return false, false
	case r := <-c.done:
		c.active = false
		return true, r
	}
}

// end kills the step in flight, if any, and ends the goroutine. A later
// run starts another.
func (c *coroutine) end() {
	c.kill()
	if c.worker {
		close(c.start)
		c.start, c.worker = nil, false
	}
}

// kill ends the step in flight, if any: its paused transaction, and every
// one it begins after, fails with errKilled without reaching storage.
func (c *coroutine) kill() {
	if !c.active {
		return
	}
	c.killed = true
	c.resume <- false
	<-c.done
	c.active, c.killed = false, false
}

// gate is called by the step before each transaction: the first goes
// ahead; before each later one the step pauses until the scheduler
// resumes it.
func (c *coroutine) gate() error {
	if c.killed {
		return errKilled
	}
	if !c.inside {
		return nil
	}
	if c.txns > 0 {
		c.paused <- struct{}{}
		if !<-c.resume {
			return errKilled
		}
	}
	c.txns++
	return nil
}

// FaultKind is a storage fault the seeded scheduler injects into a
// process's consuming or run-ending write.
type FaultKind int

// The faults.
const (
	// FaultCommitUnknown: the write commits, and the process is told
	// core.ErrCommitUnknown (the reply to COMMIT was lost).
	FaultCommitUnknown FaultKind = iota
	// FaultRollbackUnknown: the write does not commit, and the process is
	// told core.ErrCommitUnknown (the connection died before COMMIT).
	FaultRollbackUnknown
	// FaultWriteFailed: the write does not commit, and the process is told
	// a plain storage error.
	FaultWriteFailed
	numFaults
)

var faultNames = [...]string{"commit-unknown", "rollback-unknown", "write-failed"}

func (k FaultKind) String() string {
	if k >= 0 && k < numFaults {
		return faultNames[k]
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// faultable says which writes get faults: those whose unknown outcome the
// runner gives the round up on (traced as Crash, or for a Release that
// committed, ended by its own line, which core learns from the faults'
// log: loggingTx.LoggedTrace). Claim is left alone: whether its Crash is
// traced depends on its lease too; the fleet's PostgreSQL runs fault it.
func faultable(a core.Action) bool {
	switch a {
	case core.ActionAbandon, core.ActionRunStart, core.ActionReply, core.ActionRunEnd, core.ActionRelease:
		return true
	}
	return false
}

// faults injects storage faults into the processes' writes, drawn from the
// execution's seeded source, and keeps the lines of the writes that
// committed although their process was told otherwise: the process never
// traces them, and storage would (core.TraceLog), so the trace gets them
// from here.
type faults struct {
	rate     float64
	rng      *rand.Rand
	mu       sync.Mutex
	unseen   []core.TraceEvent // committed writes their process was not told of
	injected [numFaults]int
}

// procStorage is one process's view of the shared storage: its steps'
// transactions pass through the process's coroutine (when the execution
// interleaves) and may be faulted (when it injects faults).
type procStorage struct {
	core.Storage
	faults *faults // nil: none
}

var _ core.Viewer = (*procStorage)(nil)

func gate(ctx context.Context) error {
	if c, ok := ctx.Value(coroutineKey{}).(*coroutine); ok {
		return c.gate()
	}
	return nil
}

// Update runs fn in a transaction of the shared storage, after the
// coroutine's gate, and injects a fault when one is drawn.
func (s *procStorage) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if err := gate(ctx); err != nil {
		return err
	}
	if s.faults == nil {
		return s.Storage.Update(ctx, fn)
	}
	f := s.faults
	var lines []core.TraceEvent
	fault := FaultKind(-1)
	errRolledBack := errors.New("sim: injected rollback")
	err := s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		lines, fault = lines[:0], -1
		if err := fn(ctx, &loggingTx{Transaction: tx, lines: &lines, faults: f}); err != nil {
			return err
		}
		if len(lines) == 0 || !faultable(lines[0].Action) {
			return nil
		}
		f.mu.Lock()
		if f.rng.Float64() < f.rate {
			fault = FaultKind(f.rng.IntN(int(numFaults)))
			f.injected[fault]++
		}
		f.mu.Unlock()
		if fault == FaultRollbackUnknown || fault == FaultWriteFailed {
			return errRolledBack
		}
		return nil
	})
	switch {
	case fault == FaultCommitUnknown && err == nil:
		f.mu.Lock()
		for _, l := range lines {
			// The writes: the read a write of the transaction went by
			// (RunEndThenStart's Plan), which a storage keeps too for a
			// process killed after the commit, is the process's own here:
			// its Crash traces it (no simulated process dies untraced).
			if !l.Read {
				f.unseen = append(f.unseen, l)
			}
		}
		f.mu.Unlock()
		return fmt.Errorf("sim: injected fault: %w", core.ErrCommitUnknown)
	case fault == FaultRollbackUnknown && errors.Is(err, errRolledBack):
		return fmt.Errorf("sim: injected fault: %w", core.ErrCommitUnknown)
	case fault == FaultWriteFailed && errors.Is(err, errRolledBack):
		return errors.New("sim: injected fault: the write failed")
	}
	return err
}

// View runs fn read-only, after the coroutine's gate.
func (s *procStorage) View(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if err := gate(ctx); err != nil {
		return err
	}
	if v, ok := s.Storage.(core.Viewer); ok {
		return v.View(ctx, fn)
	}
	return s.Storage.Update(ctx, fn)
}

// loggingTx keeps the trace lines its transaction logs (core.TraceLog:
// a write's, or RunEndThenStart's RunEnd, Plan and RunStart), and passes
// them on to the storage's own log if it keeps one.
type loggingTx struct {
	core.Transaction
	lines  *[]core.TraceEvent
	faults *faults
}

// LoggedTrace reads back the line of the write at tick on thread id when
// a fault told its process otherwise than that it committed
// (core.TraceLogReader): the Crash after a write whose commit is unknown
// learns from it whether the write committed, as from a storage that
// keeps trace lines. A committed Release's line then ends its round.
func (t *loggingTx) LoggedTrace(ctx context.Context, id core.ThreadID, tick uint64) (core.TraceEvent, bool, error) {
	t.faults.mu.Lock()
	for _, ev := range t.faults.unseen {
		if ev.Thread == id && ev.Tick == tick && !ev.Read {
			t.faults.mu.Unlock()
			return ev, true, nil
		}
	}
	t.faults.mu.Unlock()
	return loggedTrace(ctx, t.Transaction, id, tick)
}

// loggedTrace reads a committed write's line back from tx when it keeps
// them (core.TraceLogReader), and finds none when it does not.
func loggedTrace(ctx context.Context, tx core.Transaction, id core.ThreadID, tick uint64) (core.TraceEvent, bool, error) {
	if r, ok := tx.(core.TraceLogReader); ok {
		return r.LoggedTrace(ctx, id, tick)
	}
	return core.TraceEvent{}, false, nil
}

func (t *loggingTx) LogTrace(ctx context.Context, ev core.TraceEvent) error {
	*t.lines = append(*t.lines, ev)
	if log, ok := t.Transaction.(core.TraceLog); ok {
		return log.LogTrace(ctx, ev)
	}
	return nil
}
