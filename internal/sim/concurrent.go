package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// ConcurrentConfig configures one concurrent execution: real goroutines,
// real time, short TTLs. Zero fields take the defaults their comments give.
type ConcurrentConfig struct {
	Seed     uint64        // seeds the random choices; the interleaving is the scheduler's
	Procs    int           // runner processes; default 3
	Threads  int           // default 2
	Messages int           // messages posted to each thread; default 6
	ClaimTTL time.Duration // default 40ms
	// MaxSkew bounds each process's clock offset, drawn in [0, MaxSkew].
	// Default 2*ClaimTTL: a process can see another's fresh claim expired.
	MaxSkew time.Duration
	// MaxStall bounds how long an agent runs and how long a delayed write
	// stays in flight before it reaches storage. Default 2*ClaimTTL.
	MaxStall time.Duration
	// Timeout bounds the execution; every message must be consumed before
	// it. Default 10s.
	Timeout  time.Duration
	Unfenced core.Fences  // the fences switched off, the mutant; default none
	Mutants  Mutants      // the code mutants switched on (core's; the others have no effect here); default none
	Storage  core.Storage // default a new memory.Store with copied reads (memory.WithCopiedReads); must be empty
	// Tracer, when set, also receives every trace line as it is traced
	// (from the processes' goroutines: it must be safe for concurrent
	// use), e.g. to count the execution's steps. Default none.
	Tracer core.Tracer
}

func (c ConcurrentConfig) withDefaults() ConcurrentConfig {
	if c.Procs == 0 {
		c.Procs = 3
	}
	if c.Threads == 0 {
		c.Threads = 2
	}
	if c.Messages == 0 {
		c.Messages = 6
	}
	if c.ClaimTTL == 0 {
		c.ClaimTTL = 40 * time.Millisecond
	}
	if c.MaxSkew == 0 {
		c.MaxSkew = 2 * c.ClaimTTL
	}
	if c.MaxStall == 0 {
		c.MaxStall = 2 * c.ClaimTTL
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Storage == nil {
		c.Storage = memory.New(memory.WithCopiedReads())
	}
	return c
}

// ConcurrentResult is what a concurrent execution left: its trace lines,
// each stamped with its call and return times for porcupine.
type ConcurrentResult struct {
	Lines   []core.TraceEvent
	Threads []core.ThreadID
	Elapsed time.Duration
	// Defect is the first turn or transaction that failed with an error
	// only a defect explains (InvNoDefectError), nil when none did.
	Defect *ConcurrentDefect
}

// ConcurrentDefect is a turn or a transaction of a concurrent execution
// that failed with an error only a defect explains: its process, thread
// and holder ("" when not known), and when the failure was seen, on the
// lines' clock (TraceEvent.Call, Return).
type ConcurrentDefect struct {
	Proc   string
	Thread core.ThreadID
	Holder core.Holder
	At     int64
	Err    error
}

// firstDefect keeps the first ConcurrentDefect of an execution.
type firstDefect struct {
	mu sync.Mutex
	d  *ConcurrentDefect
}

// note keeps the failure of a turn or a transaction as the first defect
// when only a defect explains its error (turnDefect).
func (f *firstDefect) note(proc string, thread core.ThreadID, holder core.Holder, err error, at int64) {
	if turnDefect(err, thread, -1) == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.d == nil {
		f.d = &ConcurrentDefect{Proc: proc, Thread: thread, Holder: holder, At: at, Err: err}
	}
}

// timedRecorder keeps lines and stamps them with a monotonic clock.
type timedRecorder struct {
	start time.Time
	mu    sync.Mutex
	lines []core.TraceEvent
	next  core.Tracer // ConcurrentConfig.Tracer, or nil
}

func (r *timedRecorder) TraceNow() int64 { return int64(time.Since(r.start)) }

func (r *timedRecorder) Trace(ev core.TraceEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, ev)
	if r.next != nil {
		r.next.Trace(ev)
	}
}

// delayingStorage holds some transactions back before they reach storage:
// a write in flight past the TTL.
type delayingStorage struct {
	core.Storage
	mu       sync.Mutex
	rng      *rand.Rand
	maxStall time.Duration
	// proc, defect and now note a transaction that failed with an error
	// only a defect explains (firstDefect), on the lines' clock.
	proc   string
	defect *firstDefect
	now    func() int64
}

func (d *delayingStorage) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	d.mu.Lock()
	var stall time.Duration
	if d.rng.IntN(8) == 0 {
		stall = time.Duration(d.rng.Int64N(int64(d.maxStall)))
	}
	d.mu.Unlock()
	if stall > 0 {
		select {
		case <-time.After(stall):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var thread core.ThreadID
	err := d.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		if optionalTx(tx) {
			return fn(ctx, tx) // a wrapper would hide what the Workspace asks of it
		}
		return fn(ctx, threadTx{tx, &thread})
	})
	if err != nil && d.defect != nil {
		d.defect.note(d.proc, thread, "", err, d.now())
	}
	return err
}

// optionalTx says whether tx implements one of the interfaces the
// Workspace asks a transaction for (core.TraceLog, core.TraceLogReader,
// the one-statement post).
func optionalTx(tx core.Transaction) bool {
	_, log := tx.(core.TraceLog)
	_, reader := tx.(core.TraceLogReader)
	_, post := tx.(interface {
		PostMessage(context.Context, core.ThreadID, time.Time, string) (core.Seq, uint64, core.Seq, error)
	})
	return log || reader || post
}

// threadTx notes the thread a transaction reads (every write of the
// Workspace reads its thread first): the thread of a failed transaction.
type threadTx struct {
	core.Transaction
	thread *core.ThreadID
}

func (tx threadTx) Thread(ctx context.Context, id core.ThreadID) (*core.Thread, error) {
	*tx.thread = id
	return tx.Transaction.Thread(ctx, id)
}

// RunConcurrent runs runner processes as goroutines (Runner.Run) over one
// storage, each with a skewed clock, agents that stall and ask, writes
// delayed in flight, and a poster, until every message is consumed; then
// it checks the invariants in storage. Its lines go to the Go trace
// checker and, with their times, to porcupine.
func RunConcurrent(ctx context.Context, cfg ConcurrentConfig) (ConcurrentResult, error) {
	cfg = cfg.withDefaults()
	rec := &timedRecorder{start: time.Now(), next: cfg.Tracer}
	opts := []core.Option{core.WithTracer(rec)}
	if cfg.Unfenced != (core.Fences{}) {
		opts = append(opts, core.WithFencesForTesting(core.AllFences().Without(cfg.Unfenced)))
	}
	if cm := cfg.Mutants.core(); cm != (core.Mutants{}) {
		opts = append(opts, core.WithMutantsForTesting(cm))
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x636f6e63))
	poster := core.NewWorkspace(cfg.Storage, core.SystemClock{}, append(opts, core.WithProcess("poster"))...)
	res := ConcurrentResult{}
	for i := range cfg.Threads {
		id := core.ThreadID(fmt.Sprintf("t%d", i+1))
		if err := poster.CreateThread(ctx, id); err != nil {
			return res, fmt.Errorf("concurrent: %w", err)
		}
		res.Threads = append(res.Threads, id)
	}

	runCtx, stop := context.WithTimeout(ctx, cfg.Timeout)
	defer stop()
	var wg sync.WaitGroup
	var defect firstDefect
	for i := range cfg.Procs {
		name := fmt.Sprintf("p%d", i+1)
		clock := SkewedClock{Offset: time.Duration(rng.Int64N(int64(cfg.MaxSkew) + 1))}
		store := &delayingStorage{Storage: cfg.Storage, rng: rand.New(rand.NewPCG(rng.Uint64(), 1)), maxStall: cfg.MaxStall,
			proc: name, defect: &defect, now: rec.TraceNow}
		ws := core.NewWorkspace(store, clock, append(opts, core.WithProcess(name))...)
		r, err := runner.New(runner.Config{
			Workspace:  ws,
			Clock:      clock,
			ClaimTTL:   cfg.ClaimTTL,
			RenewEvery: cfg.ClaimTTL / 3,
			PollEvery:  time.Millisecond,
			Agent:      StallingAgent(rng.Uint64(), cfg.MaxStall),
			Logger:     slog.New(slog.DiscardHandler), // the checks report what the turns did
			OnTurn: func(rep runner.TurnReport) {
				defect.note(name, rep.Thread, rep.Holder, rep.Err, rec.TraceNow())
			},
		})
		if err != nil {
			return res, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = r.Run(runCtx)
		}()
	}

	postRng := rand.New(rand.NewPCG(rng.Uint64(), 3))
	err := func() error {
		for m := range cfg.Messages {
			for _, id := range res.Threads {
				if _, err := poster.Post(runCtx, id, fmt.Sprintf("message %d", m+1)); err != nil {
					defect.note("poster", id, "", err, rec.TraceNow())
					return fmt.Errorf("post: %w", err)
				}
			}
			time.Sleep(time.Duration(postRng.Int64N(int64(cfg.ClaimTTL))))
		}
		// Wait until every message is consumed and no run is active.
		for {
			done := true
			for _, id := range res.Threads {
				th, err := poster.Thread(runCtx, id)
				if err != nil {
					defect.note("poster", id, "", err, rec.TraceNow())
					return err
				}
				if th.Unconsumed() || len(th.ActiveRuns()) > 0 {
					done = false
				}
			}
			if done {
				return nil
			}
			select {
			case <-runCtx.Done():
				return &InvariantError{Invariant: "Liveness", Op: -1, Detail: fmt.Sprintf("messages left unconsumed after %v", cfg.Timeout)}
			case <-time.After(time.Millisecond):
			}
		}
	}()
	stop()
	wg.Wait()
	res.Elapsed = time.Since(rec.start)
	rec.mu.Lock()
	res.Lines = rec.lines
	// Processes trace after their transactions end, so the lines came in
	// any order the scheduler made; the checkers take them in trace order.
	tracecheck.Sort(res.Lines)
	rec.mu.Unlock()

	err = checkAtEnd(ctx, cfg, &res, &defect, rec, err)
	return res, err
}

// checkAtEnd checks a concurrent execution once its runners stopped: the
// invariants in storage, whatever the liveness outcome (err, the posting's
// and the wait's); then a call that failed with an error only a defect
// explains, a turn's, a transaction's or the poster's, is a check failure
// (InvNoDefectError), as in the seeded executions; then err. It sets
// res.Defect.
func checkAtEnd(ctx context.Context, cfg ConcurrentConfig, res *ConcurrentResult, defect *firstDefect, rec *timedRecorder, err error) error {
	for _, id := range res.Threads {
		th, _, lease, uerr := snapshot(ctx, cfg.Storage, id)
		if uerr != nil {
			defect.note("the check at the end", id, "", uerr, rec.TraceNow())
			err = uerr
			break
		}
		// NoLiveAbandon needs the lease at each abandon: the trace
		// checker follows it; here only I1 and I3 are read from storage.
		if ierr := checkThread(th, nil, lease, -1); ierr != nil {
			return ierr
		}
	}
	defect.mu.Lock()
	res.Defect = defect.d
	defect.mu.Unlock()
	if d := res.Defect; d != nil {
		return &InvariantError{Invariant: InvNoDefectError, Thread: d.Thread, Op: -1,
			Detail: fmt.Sprintf("a call of %s failed: %v", d.Proc, d.Err)}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
