package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Config configures one deterministic simulated execution. Zero fields
// take the defaults their comments give.
type Config struct {
	Seed     uint64        // the seed; the same seed replays the same execution
	Procs    int           // runner processes; default 3
	Threads  int           // threads; default 2
	Messages int           // messages posted to each thread; default 4
	Steps    int           // scheduled operations before quiescence; default 300
	ClaimTTL time.Duration // default 10s
	// Unfenced are the fences switched off: the mutant the checks must
	// catch. Default none.
	Unfenced core.Fences
	// Storage is where the processes meet. Default a new memory.Store with copied reads (memory.WithCopiedReads).
	// It must be empty.
	Storage core.Storage
	// Tracer receives every trace line as its process traces it. Default
	// none. TraceLines returns the execution's trace, with the writes
	// injected faults hid from their processes.
	Tracer core.Tracer
	// Interleave lets the scheduler run other operations between any two
	// storage transactions of one process's step (a step pauses before its
	// second transaction and goes on when the process is scheduled again).
	Interleave bool
	// Faults is the probability that a process's Abandon, RunStart, Reply,
	// RunEnd or Release gets a storage fault (FaultKind, drawn from the
	// seed); 0 for none.
	Faults float64
	// Mutants switches deliberate defects on, to show the checks catch
	// them.
	Mutants Mutants
	// Coverage, when set, is marked with the spec states this execution
	// visits, and the scheduler seeks states it has not marked yet (from
	// this execution or earlier ones sharing it). Its cfg's processes must
	// be the execution's (p1, p2, ...).
	Coverage *Coverage
	// Swarm draws, from the seed, which kinds of operation this execution
	// schedules and how often (swarm testing): executions differ more
	// from each other than under the one fixed mix, and reach more of the
	// spec's states.
	Swarm bool
	// Ops, when not nil, are the operations Run applies instead of drawing
	// Steps from the seeded scheduler: a replay of a logged execution
	// (Seeded.Log). The seed then only names the holders and draws the
	// faults.
	Ops []Op
	// NoQuiesce ends Run after the operations: no quiescence and no
	// liveness check. A log that holds its quiescence as operations
	// (Seeded.Log) replays with it; a shrunk story stops where it fails.
	NoQuiesce bool
	// Walks, with Spec, make the execution directed: instead of drawing
	// operations, the scheduler drives thread k's processes along walk k
	// of Spec's state graph (Planner), one walk after the other, choosing
	// for each step the operation that makes the real code take it. A walk
	// whose trace leaves its plan is given up (Stats.Diverged). Threads is
	// then the number of walks, Procs and Messages are Spec's; Steps
	// bounds nothing; there are no faults and no quiescence (NoQuiesce).
	Walks []Walk
	Spec  *specmodel.Model
	// FusedTurns runs the turns of every other process (p2, p4, ...) as a
	// runner runs them by default: a claim and its first plan one
	// transaction, and a run's end, the next plan and that run's start
	// another (runner.Config.SeparatePlans unset), so that the executions
	// and their faults cover those paths too. A fused step is several
	// steps of the specification, which a directed walk cannot steer
	// apart: Walks needs it unset.
	FusedTurns bool
}

// Mutants are the code defects an execution can switch on, beyond
// Unfenced. Each must be caught.
type Mutants struct {
	// FenceInOwnTransaction: fenced writes check the claim in a
	// transaction that ends before the write's begins (a storage wrapper
	// between each process's Workspace and the storage, fenceOwnTx).
	// Caught only with Interleave.
	FenceInOwnTransaction bool
	// RetryCommitUnknown: the runner retries a RunStart or Reply whose
	// commit outcome is unknown (runner.Turn.RetryCommitUnknownForTesting),
	// and core lets it (core.Mutants.DoubtIgnored). Caught only with
	// Faults.
	RetryCommitUnknown bool
	// OutputOfAbandonedRun: a run's output is recorded even when its end
	// is refused because a later claim abandoned the run
	// (core.Mutants.OutputOfAbandonedRun).
	OutputOfAbandonedRun bool
	// The steering mutants, core's of the same names: a steering record
	// accepted after its run was abandoned, a record that does not move
	// the taken cursor, steering given from a message already consumed,
	// and steering given to a run that is not active.
	SteerRecordAfterAbandon bool
	SteerRecordKeepsCursor  bool
	SteerConsumed           bool
	SteerInactiveRun        bool

	// retryInRunner: the runner's retry of RetryCommitUnknown with core's
	// protection on (core refuses the retry with ErrOutOfOrder). A test's:
	// no name, no flag.
	retryInRunner bool
}

// core returns the core mutants m switches on in each process's
// Workspace.
func (m Mutants) core() core.Mutants {
	return core.Mutants{
		// Core refuses the retry itself (a round whose write's commit is
		// unknown takes only Crash): the mutant is the runner's defect
		// with that protection off too.
		DoubtIgnored:            m.RetryCommitUnknown,
		OutputOfAbandonedRun:    m.OutputOfAbandonedRun,
		SteerRecordAfterAbandon: m.SteerRecordAfterAbandon,
		SteerRecordKeepsCursor:  m.SteerRecordKeepsCursor,
		SteerConsumed:           m.SteerConsumed,
		SteerInactiveRun:        m.SteerInactiveRun,
	}
}

// codeMutants names each code mutant, as a log's header and tracecheck
// run's -mutant name it, with the field of Mutants it switches on.
var codeMutants = [...]struct {
	name string
	on   func(*Mutants) *bool
}{
	{"fence-own-tx", func(m *Mutants) *bool { return &m.FenceInOwnTransaction }},
	{"retry-commit-unknown", func(m *Mutants) *bool { return &m.RetryCommitUnknown }},
	{"output-abandoned", func(m *Mutants) *bool { return &m.OutputOfAbandonedRun }},
	{"steer-after-abandon", func(m *Mutants) *bool { return &m.SteerRecordAfterAbandon }},
	{"steer-keeps-cursor", func(m *Mutants) *bool { return &m.SteerRecordKeepsCursor }},
	{"steer-consumed", func(m *Mutants) *bool { return &m.SteerConsumed }},
	{"steer-inactive", func(m *Mutants) *bool { return &m.SteerInactiveRun }},
}

// MutantNames returns the code mutants' names, in a fixed order.
func MutantNames() []string {
	out := make([]string, len(codeMutants))
	for i, c := range codeMutants {
		out[i] = c.name
	}
	return out
}

// ParseMutant returns the Mutants that the code mutant named name
// switches on, and false for a name that is none.
func ParseMutant(name string) (Mutants, bool) {
	var m Mutants
	ok := m.set(name)
	return m, ok
}

// set switches the mutant named name on; false for an unknown name.
func (m *Mutants) set(name string) bool {
	for _, c := range codeMutants {
		if c.name == name {
			*c.on(m) = true
			return true
		}
	}
	return false
}

// names returns the names of the mutants m switches on.
func (m Mutants) names() []string {
	var out []string
	for _, c := range codeMutants {
		if *c.on(&m) {
			out = append(out, c.name)
		}
	}
	return out
}

// storage returns the storage a process's Workspace writes through, s
// with the storage mutants switched on.
func (m Mutants) storage(s core.Storage) core.Storage {
	if m.FenceInOwnTransaction {
		return fenceOwnTx{s}
	}
	return s
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Procs, 3)
	def(&c.Threads, 2)
	def(&c.Messages, 4)
	def(&c.Steps, 300)
	if c.ClaimTTL == 0 {
		c.ClaimTTL = 10 * time.Second
	}
	if c.Storage == nil {
		c.Storage = memory.New(memory.WithCopiedReads())
	}
	return c
}

// OpKind is what the scheduler does in one operation.
type OpKind int

// The scheduler's operations.
const (
	OpStep  OpKind = iota // a process takes its turn's next step, or starts a turn
	OpPost                // a person posts a message
	OpRenew               // a process renews its claim
	OpTime                // time passes on every process's clock
	OpSkew                // one process's clock jumps ahead of the others
	OpCrash               // a process dies; it restarts idle with a new holder next time
	// OpYield asks a process's turn to release its claim at its next plan
	// (runner.Turn.Stop), work left or not. Only directed executions
	// schedule it: the seeded draw picks among the kinds before it.
	OpYield
	numOps
)

// numDrawn is the number of kinds the seeded draw (and swarm) picks from.
const numDrawn = OpYield

var opNames = [...]string{"step", "post", "renew", "time", "skew", "crash", "yield"}

func (k OpKind) String() string {
	if k >= 0 && k < numOps {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Op is one scheduled operation.
type Op struct {
	Kind   OpKind
	Proc   int
	Thread int
	Asks   int           // OpStep: questions the agent asks if this step runs it
	Steers int           // OpStep: messages the agent takes as steering, before it asks, if this step runs it
	By     time.Duration // OpTime, OpSkew
}

func (o Op) String() string {
	switch o.Kind {
	case OpPost:
		return fmt.Sprintf("post t%d", o.Thread+1)
	case OpTime:
		return fmt.Sprintf("time +%v", o.By)
	case OpSkew:
		return fmt.Sprintf("skew p%d +%v", o.Proc+1, o.By)
	case OpStep:
		if o.Steers > 0 {
			return fmt.Sprintf("step p%d (t%d, asks %d, steers %d)", o.Proc+1, o.Thread+1, o.Asks, o.Steers)
		}
		return fmt.Sprintf("step p%d (t%d, asks %d)", o.Proc+1, o.Thread+1, o.Asks)
	}
	return fmt.Sprintf("%s p%d", o.Kind, o.Proc+1)
}

// InvariantError is a broken invariant found in storage after an operation,
// or, at the end, the spec's state of a process disagreeing with Go's
// (InvRoundsAgree).
type InvariantError struct {
	Invariant string // I1_ConsumedAtMostOnce, I3_OneActiveRun, NoLiveAbandon, Liveness, RoundsAgree (InvRoundsAgree)
	Thread    core.ThreadID
	Op        int // the operation's index, -1 in quiescence
	Detail    string
}

func (e *InvariantError) Error() string {
	return fmt.Sprintf("%s violated on thread %s after op %d: %s", e.Invariant, e.Thread, e.Op, e.Detail)
}

// Stats counts what a simulation did.
type Stats struct {
	Ops             [numOps]int
	Steps           map[runner.Step]int // turn steps taken, by step
	Outcomes        map[runner.Outcome]int
	InvariantChecks int
	Paused          int            // steps paused between two transactions (Interleave)
	Faults          map[string]int // faults injected, by kind
	// Lapses counts the leases seen to expire: a time operation took some
	// process's clock past the expiry of a lease still held (the spec's
	// Lapse, which no trace line shows).
	Lapses int
	// Walks and Diverged count a directed execution's walks and those
	// whose trace left the plan.
	Walks, Diverged int
}

type simProc struct {
	name    string
	clock   *coretest.Clock
	ws      *core.Workspace
	r       *runner.Runner
	turn    *runner.Turn
	asks    int
	steers  int
	holders int
	co      *coroutine    // the step in flight, when the execution interleaves
	thread  core.ThreadID // the thread of the turn, when there is one
	// shared: ws, r and turn are those of the execution this one was
	// forked from, until the process acts (Seeded.own).
	shared bool
}

// Seeded is one deterministic execution: a seeded scheduler interleaves the
// steps of several real runner processes (runner.Turn over core.Workspace
// over a real storage), each with its own manual clock, with posts,
// renewals, time passing, clock jumps and crashes. A process not scheduled
// is stalled: its planned write waits while leases lapse. After every
// operation it checks the invariants in storage; at the end it stops the
// faults, lets every clock pass the TTL and runs the processes fairly until
// every posted message is consumed (liveness).
type Seeded struct {
	cfg Config
	// rng draws the operations, holderRNG the holders' names; src and
	// holderSrc are their sources, which a fork copies.
	rng, holderRNG *rand.Rand
	src, holderSrc *rand.PCG
	procs          []*simProc
	poster         *core.Workspace
	threads        []core.ThreadID
	posted         []int
	seen           map[core.ThreadID]int // events already checked, per thread
	stats          Stats
	rec            *recorder
	faults         *faults
	swarm          *swarm
	guide          *guide
	dir            *director // the directed scheduler, with Config.Walks
	// procStore is the storage the processes' workspaces use; posterShared:
	// poster is that of the execution this one was forked from, until it
	// posts (ownPoster).
	procStore    core.Storage
	posterShared bool
	// defect is the first turn that ended with an error only a defect
	// explains (turnDefect); Run returns it.
	defect *InvariantError
	// lapses are the Lapse steps seen (Stats.Lapses), where they fell in
	// the trace; lapsed is, per thread, the lease last seen to lapse.
	lapses []lapse
	lapsed map[core.ThreadID]core.Lease
	// log is every operation Run applied, in order: with the config, the
	// execution written down (Log), replayed through Config.Ops.
	log []Op
	// quiesceAt is len(log) when Quiesce began, -1 before; liveness is
	// true when Quiesce found liveness broken.
	quiesceAt int
	liveness  bool
}

// NewSeeded builds the execution's processes and threads.
func NewSeeded(ctx context.Context, cfg Config) (*Seeded, error) {
	if cfg.Walks != nil {
		if cfg.Spec == nil || cfg.Faults != 0 || cfg.Ops != nil || len(cfg.Walks) == 0 || cfg.FusedTurns {
			return nil, errors.New("sim config: Walks need Spec, and no Faults, Ops or FusedTurns")
		}
		known := map[specmodel.Step]bool{}
		for _, st := range cfg.Spec.Steps() {
			known[st] = true
		}
		for k, w := range cfg.Walks {
			for i, st := range w {
				if !known[st] {
					return nil, fmt.Errorf("sim config: walk %d, step %d: %v is not a step of the spec's model", k, i, st)
				}
			}
		}
		sc := cfg.Spec.Config()
		cfg.Procs, cfg.Threads, cfg.Messages, cfg.NoQuiesce = len(sc.Procs), len(cfg.Walks), sc.MaxMsgs, true
	}
	cfg = cfg.withDefaults()
	if cfg.Procs < 1 || cfg.Threads < 1 || cfg.Messages < 0 || cfg.Steps < 0 || cfg.ClaimTTL <= 0 {
		return nil, fmt.Errorf("sim config: procs %d, threads %d, messages %d, steps %d, ttl %v: counts must be positive",
			cfg.Procs, cfg.Threads, cfg.Messages, cfg.Steps, cfg.ClaimTTL)
	}
	// Holders come from a source of their own, so that a replayed log,
	// which draws no operations, names them as the original did.
	src, holderSrc := rand.NewPCG(cfg.Seed, 0x7468726561640a), rand.NewPCG(cfg.Seed, 0x686f6c646572)
	s := &Seeded{
		cfg:       cfg,
		src:       src,
		rng:       rand.New(src),
		holderSrc: holderSrc,
		holderRNG: rand.New(holderSrc),
		seen:      map[core.ThreadID]int{},
		lapsed:    map[core.ThreadID]core.Lease{},
		quiesceAt: -1,
		stats:     Stats{Steps: map[runner.Step]int{}, Outcomes: map[runner.Outcome]int{}},
	}
	epoch := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	if cfg.Swarm {
		s.swarm = newSwarm(cfg.Seed)
	}
	if cfg.Coverage != nil {
		s.guide = newGuide(cfg.Coverage)
	}
	if cfg.Walks != nil {
		s.dir = newDirector(cfg.Spec, cfg.Walks)
	}
	s.rec = &recorder{next: cfg.Tracer, perThread: map[core.ThreadID]int{}}
	opts := []core.Option{core.WithTracer(s.rec)}
	if cm := cfg.Mutants.core(); cm != (core.Mutants{}) {
		opts = append(opts, core.WithMutantsForTesting(cm))
	}
	var procStore core.Storage = cfg.Storage
	if cfg.Interleave || cfg.Faults > 0 {
		ps := &procStorage{Storage: cfg.Storage}
		if cfg.Faults > 0 {
			s.faults = &faults{rate: cfg.Faults, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6661756c7473))}
			ps.faults = s.faults
		}
		procStore = ps
	}
	procStore = cfg.Mutants.storage(procStore)
	if cfg.Unfenced != (core.Fences{}) {
		opts = append(opts, core.WithFencesForTesting(core.AllFences().Without(cfg.Unfenced)))
	}
	s.poster = core.NewWorkspace(cfg.Storage, coretest.NewClock(epoch), append(opts, core.WithProcess("poster"))...)
	for i := range cfg.Threads {
		id := core.ThreadID(fmt.Sprintf("t%d", i+1))
		if err := s.poster.CreateThread(ctx, id); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		s.threads = append(s.threads, id)
		s.posted = append(s.posted, 0)
	}
	for i := range cfg.Procs {
		p := &simProc{name: fmt.Sprintf("p%d", i+1), clock: coretest.NewClock(epoch)}
		p.co = newCoroutine()
		p.ws = core.NewWorkspace(procStore, p.clock, append(opts, core.WithProcess(p.name))...)
		r, err := runner.New(runner.Config{
			Workspace: p.ws,
			Clock:     p.clock,
			ClaimTTL:  cfg.ClaimTTL,
			// Turns as long as their thread has messages: the scheduler,
			// not a bound, decides how long a process keeps a thread.
			MaxTurnDuration: math.MaxInt64,
			// Each step of a turn one step of the specification, so that
			// the scheduler may put any other process's step after it;
			// with FusedTurns, every other process's as a runner's are by
			// default.
			SeparatePlans: !cfg.FusedTurns || i%2 == 0,
			Agent:         p.agent(),
			NewHolder:     s.newHolder(p),
			Logger:        slog.New(slog.DiscardHandler), // the checks report what the turns did
		})
		if err != nil {
			return nil, err
		}
		p.r = r
		s.procs = append(s.procs, p)
	}
	return s, nil
}

// agent is p's agent: it takes as steering (Session.Steer) as many of the
// messages posted since its run started as the operation that runs it
// asks for (Op.Steers), each recorded by its next call, then asks the
// questions the operation asks for (Op.Asks), then returns. Steering not
// recorded by a question is recorded by the turn's next step
// (StepSteerRecord), which the scheduler may put off past a lapse, a
// takeover and an Abandon: the exception, given twice and consumed once.
func (p *simProc) agent() runner.Agent {
	return runner.AgentFunc(func(ctx context.Context, sess *runner.Session) error {
		out := "done: " + sess.Delivered.Prompt.Text
		for range p.steers {
			m, ok, err := sess.Steer(ctx)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			out += "; steered: " + m.Text
		}
		for range p.asks {
			if _, err := sess.Ask(ctx, "which one?"); err != nil {
				return err
			}
		}
		return sess.Output(out)
	})
}

// agentWrites is how many transactions an agent that takes steers messages
// as steering and asks asks questions makes: a Steer each, the record of
// each but a last one that no question follows, and a question each.
func agentWrites(steers, asks int) int {
	n := 2*steers + asks
	if steers > 0 && asks == 0 {
		n--
	}
	return n
}

// newHolder names p's claims' holders.
func (s *Seeded) newHolder(p *simProc) func() (core.Holder, error) {
	return func() (core.Holder, error) {
		p.holders++
		// The scheduler's source still advances as it did when it named
		// the holders, so that each seed draws the operations it always
		// drew.
		_ = s.rng.Uint32()
		return core.Holder(fmt.Sprintf("%s.%d.%x", p.name, p.holders, s.holderRNG.Uint32())), nil
	}
}

// Stats returns what the simulation did so far.
func (s *Seeded) Stats() Stats {
	st := s.stats
	if s.dir != nil {
		st.Walks, st.Diverged = s.dir.walked, s.dir.diverged
	}
	if s.faults != nil {
		st.Faults = map[string]int{}
		for k, n := range s.faults.injected {
			if n > 0 {
				st.Faults[FaultKind(k).String()] = n
			}
		}
	}
	return st
}

// Run schedules cfg.Steps operations (or applies cfg.Ops), checking the
// invariants after each, then quiesces and checks liveness, and at the
// end that the spec's state of each process agrees with Go's rounds
// (InvRoundsAgree). It returns the first violation; an error a defect
// explains is one too (InvNoDefectError).
func (s *Seeded) Run(ctx context.Context) error {
	// A step still paused between its transactions when the execution
	// ends (a broken invariant, the end of a replayed log) is ended too:
	// its goroutine would wait for a resume that never comes.
	defer s.endPausedSteps()
	for i := 0; ; i++ {
		next, ok := s.next(i)
		if !ok {
			break
		}
		next = next.normal()
		s.log = append(s.log, next)
		if err := s.Apply(ctx, next); err != nil {
			return asDefect(err, s.opThread(next), i)
		}
		if err := s.Check(ctx, i); err != nil {
			return asDefect(err, s.opThread(next), i)
		}
		if s.defect != nil {
			return s.defect
		}
	}
	var err error
	if !s.cfg.NoQuiesce {
		err = asDefect(s.Quiesce(ctx), "", -1)
		var inv *InvariantError
		s.liveness = errors.As(err, &inv) && inv.Invariant == "Liveness"
	}
	if err == nil && s.defect != nil {
		err = s.defect
	}
	if err == nil {
		err = s.checkRounds(s.TraceLines())
	}
	if s.guide != nil {
		s.guide.feed(s.rec.lines)
	}
	return err
}

// opThread is the thread op acts on: its process's turn's, for the
// operations of a process that name none.
func (s *Seeded) opThread(op Op) core.ThreadID {
	switch op.Kind {
	case OpStep, OpPost:
		return s.threads[op.Thread]
	case OpRenew, OpYield, OpCrash:
		return s.procs[op.Proc].thread
	}
	return ""
}

// next returns operation i: the log's, the directed scheduler's, or the
// seeded draw's; false once there is none.
func (s *Seeded) next(i int) (Op, bool) {
	switch {
	case s.cfg.Ops != nil:
		if i >= len(s.cfg.Ops) {
			return Op{}, false
		}
		return s.cfg.Ops[i], true
	case s.dir != nil:
		return s.nextDirected()
	case i >= s.cfg.Steps:
		return Op{}, false
	}
	return s.NextOp(), true
}

// endPausedSteps ends every process's step in flight, as a crash would,
// without writing anything.
func (s *Seeded) endPausedSteps() {
	for _, p := range s.procs {
		p.co.end()
	}
}

// NextOp draws the next operation from the seeded scheduler.
func (s *Seeded) NextOp() Op {
	op := Op{Proc: s.rng.IntN(len(s.procs)), Thread: s.rng.IntN(len(s.threads))}
	ttl := s.cfg.ClaimTTL
	if s.guide != nil && s.rng.IntN(10) < 9 {
		if c := s.candidates(); len(c) > 0 {
			return c[s.rng.IntN(len(c))]
		}
	}
	if s.swarm != nil {
		return s.swarm.next(s.rng, op, ttl)
	}
	switch n := s.rng.IntN(100); {
	case n < 55:
		op.Kind = OpStep
		if s.rng.IntN(4) == 0 {
			op.Asks = 1
		}
		if s.rng.IntN(2) == 0 {
			op.Steers = 1
		}
	case n < 67:
		op.Kind = OpPost
	case n < 82:
		op.Kind = OpRenew
	case n < 92:
		op.Kind, op.By = OpTime, time.Duration(1+s.rng.IntN(int(ttl/time.Second)))*time.Second
	case n < 97:
		op.Kind, op.By = OpSkew, ttl+time.Duration(s.rng.IntN(int(ttl/time.Second)))*time.Second
	default:
		op.Kind = OpCrash
	}
	return op
}

// ErrBadOp: an operation names a process, a thread or a kind the
// execution does not have.
var ErrBadOp = errors.New("operation out of range")

// Apply carries out one operation.
func (s *Seeded) Apply(ctx context.Context, op Op) error {
	if op.Kind < 0 || op.Kind >= numOps || op.Proc < 0 || op.Proc >= len(s.procs) || op.Thread < 0 || op.Thread >= len(s.threads) || op.By < 0 {
		return fmt.Errorf("%w: %v (%d processes, %d threads)", ErrBadOp, op, len(s.procs), len(s.threads))
	}
	s.stats.Ops[op.Kind]++
	p := s.procs[op.Proc]
	switch op.Kind {
	case OpStep, OpRenew, OpYield, OpCrash:
		s.own(ctx, p)
	}
	switch op.Kind {
	case OpPost:
		t := op.Thread
		if s.posted[t] >= s.cfg.Messages {
			return nil
		}
		s.posted[t]++
		_, err := s.ownPoster().Post(ctx, s.threads[t], fmt.Sprintf("message %d", s.posted[t]))
		return err
	case OpStep:
		p.asks, p.steers = op.Asks, op.Steers
		s.step(ctx, p, s.threads[op.Thread])
	case OpRenew:
		if p.turn != nil {
			if err := p.turn.Renew(ctx); err != nil && !errors.Is(err, core.ErrThreadBusy) {
				return err
			}
		}
	case OpTime:
		for _, q := range s.procs {
			q.clock.Advance(op.By)
		}
		return s.seeLapses(ctx)
	case OpSkew:
		p.clock.Advance(op.By)
		return s.seeLapses(ctx)
	case OpYield:
		if p.turn != nil {
			p.turn.Stop()
		}
	case OpCrash:
		p.co.kill()
		if p.turn != nil && p.turn.Claim() != (core.Claim{}) {
			// A round that already ended (the turn's refusal, Release or
			// crash) has nothing to crash: core refuses with ErrRoundOver.
			if err := p.ws.Crash(ctx, p.turn.Claim()); err != nil && !errors.Is(err, core.ErrRoundOver) {
				return err
			}
		}
		p.turn = nil
	}
	return nil
}

// step takes p's next step and returns its turn's outcome if it ended.
func (s *Seeded) step(ctx context.Context, p *simProc, thread core.ThreadID) runner.Outcome {
	s.own(ctx, p)
	if p.turn == nil {
		s.newTurn(p, thread)
	}
	if !p.co.active {
		s.stats.Steps[p.turn.Next()]++
	}
	var over bool
	// A directed execution pauses only where its walk needs a pause: an
	// agent asking several questions, with others' steps between them.
	// Its other steps run inline, on the scheduler's goroutine, with the
	// coroutine in their context all the same: the agent's questions go
	// out under the context the claim's step was given, and pause in the
	// coroutine it names.
	pause := s.cfg.Interleave && (s.dir == nil || p.co.active || p.turn.Next() == runner.StepAgent && agentWrites(p.steers, p.asks) > 1)
	switch {
	case pause:
		var finished bool
		if finished, over = p.co.run(ctx, p.turn.Step); !finished {
			s.stats.Paused++
			return ""
		}
	case s.cfg.Interleave:
		over = p.turn.Step(context.WithValue(ctx, coroutineKey{}, p.co))
	default:
		over = p.turn.Step(ctx)
	}
	if !over {
		return ""
	}
	o, err := p.turn.Outcome()
	if d := turnDefect(err, thread, len(s.log)-1); d != nil && s.defect == nil {
		d.Detail = fmt.Sprintf("a turn of %s ended: %v", p.name, err)
		s.defect = d
	}
	s.stats.Outcomes[o]++
	p.turn = nil
	return o
}

// newTurn starts p's next turn, on thread.
func (s *Seeded) newTurn(p *simProc, thread core.ThreadID) {
	p.turn, p.thread = p.r.NewTurn(thread), thread
	if s.cfg.Mutants.RetryCommitUnknown || s.cfg.Mutants.retryInRunner {
		p.turn.RetryCommitUnknownForTesting()
	}
}

// TraceLines returns the execution's trace so far, in trace order
// (tracecheck.Sort: a process's Crash carries the version it last saw,
// which others' writes may have passed by the time it is traced): every
// line its processes traced, and the writes that committed although an
// injected fault told their process otherwise (as a storage that keeps
// trace lines would have them).
func (s *Seeded) TraceLines() []core.TraceEvent {
	out := append([]core.TraceEvent(nil), s.rec.lines...)
	if s.faults != nil {
		out = append(out, s.faults.unseen...)
	}
	tracecheck.Sort(out)
	return out
}

// Check reads every thread's new events from storage and checks the
// invariants: no message consumed twice (I1_ConsumedAtMostOnce), at most
// one active run (I3_OneActiveRun), no run abandoned while its own claim
// holds the lease (NoLiveAbandon). op is the operation's index, for the
// report.
func (s *Seeded) Check(ctx context.Context, op int) error {
	threads := s.threads
	if s.dir != nil {
		threads = s.dir.touched(s)
	}
	for _, id := range threads {
		// Checked inside the transaction, on storage's own copy: nothing
		// is cloned.
		var broken error
		err := s.cfg.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
			th, err := tx.Thread(ctx, id)
			if err != nil {
				return err
			}
			evs, err := tx.Events(ctx, id)
			if err != nil {
				return err
			}
			lease, err := tx.Lease(ctx, id)
			if err != nil {
				return err
			}
			broken = checkThread(th, evs[s.seen[id]:], lease, op)
			s.seen[id] = len(evs)
			return nil
		})
		if err != nil {
			return err
		}
		s.stats.InvariantChecks++
		if broken != nil {
			return broken
		}
	}
	return nil
}

// checkThread checks th's invariants; fresh are the events written since
// the last check, lease the lease now (an abandon does not change it).
func checkThread(th *core.Thread, fresh []core.Event, lease core.Lease, op int) error {
	// The least message consumed more than once, if any: the same story
	// whatever the map's order.
	twice, times := core.Seq(0), 0
	for m, n := range th.Consumed() {
		if n > 1 && (times == 0 || m < twice) {
			twice, times = m, n
		}
	}
	if times > 0 {
		return &InvariantError{Invariant: core.InvConsumedAtMostOnce, Thread: th.ID, Op: op, Detail: fmt.Sprintf("message %d consumed %d times", twice, times)}
	}
	if active := th.ActiveRuns(); len(active) > 1 {
		return &InvariantError{Invariant: core.InvOneActiveRun, Thread: th.ID, Op: op, Detail: fmt.Sprintf("%d runs active: %v", len(active), active)}
	}
	for _, e := range fresh {
		if e.Kind != core.RunAbandoned {
			continue
		}
		if r, _ := th.Run(e.Run); r.Holder == lease.Holder {
			return &InvariantError{Invariant: core.InvNoLiveAbandon, Thread: th.ID, Op: op, Detail: fmt.Sprintf("run %d abandoned while its holder %s held the lease", e.Run, r.Holder)}
		}
	}
	return nil
}

// Quiesce ends the faults: every message is posted, every clock is set
// past the latest one by twice the TTL (a crashed holder's lease expires
// for all), and the processes run fairly, in turn, until no thread has work
// and every process is idle. A message still unconsumed then breaks
// liveness. What it does is logged as operations too (posts, each clock's
// jump as a skew, the fair steps), so that the log replays the whole
// execution with NoQuiesce.
func (s *Seeded) Quiesce(ctx context.Context) error {
	s.quiesceAt = len(s.log)
	for t := range s.threads {
		for s.posted[t] < s.cfg.Messages {
			op := Op{Kind: OpPost, Thread: t}
			s.log = append(s.log, op)
			if err := s.Apply(ctx, op); err != nil {
				return err
			}
		}
	}
	latest := s.procs[0].clock.Now()
	for _, p := range s.procs {
		if now := p.clock.Now(); now.After(latest) {
			latest = now
		}
	}
	for i, p := range s.procs {
		by := latest.Sub(p.clock.Now()) + 2*s.cfg.ClaimTTL
		s.log = append(s.log, Op{Kind: OpSkew, Proc: i, By: by})
		p.clock.Advance(by)
	}
	// A livelock (steps that go on without consuming anything, as when a
	// mutant's writes are refused for ever) fails after stallRounds rounds
	// in which no message was taken and no run ended, rather than after
	// all the rounds: a healthy drain takes a message or ends a run every
	// few rounds.
	const rounds, stallRounds, every = 10000, 1000, 100
	done, since := -1, 0
	for round := range rounds {
		if round%every == 0 {
			d, err := s.drained(ctx)
			if err != nil {
				return err
			}
			if d != done {
				done, since = d, round
			} else if round-since >= stallRounds {
				return &InvariantError{Invariant: "Liveness", Op: -1, Detail: fmt.Sprintf("no message taken and no run ended in %d fair rounds", stallRounds)}
			}
		}
		busy, progress := false, false
		for i, p := range s.procs {
			thread := 0
			if p.turn == nil {
				t, ok, err := s.work(ctx)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				thread = t
				s.newTurn(p, s.threads[t])
			}
			s.log = append(s.log, Op{Kind: OpStep, Proc: i, Thread: thread})
			busy = true
			p.asks, p.steers = 0, 0
			if s.step(ctx, p, "") != runner.OutcomeBusy {
				progress = true
			}
			if err := s.Check(ctx, -1); err != nil {
				return err
			}
		}
		if !busy {
			return s.checkLiveness(ctx)
		}
		if !progress {
			// Every claim found a lease held: its holder crashed. Let
			// time pass so it expires.
			s.log = append(s.log, Op{Kind: OpTime, By: 2 * s.cfg.ClaimTTL})
			for _, p := range s.procs {
				p.clock.Advance(2 * s.cfg.ClaimTTL)
			}
		}
	}
	return &InvariantError{Invariant: "Liveness", Op: -1, Detail: fmt.Sprintf("work left after %d fair rounds", rounds)}
}

// drained measures how far the drain has gone: the messages taken and the
// runs over, on every thread.
func (s *Seeded) drained(ctx context.Context) (int, error) {
	n := 0
	for _, id := range s.threads {
		th, err := s.ownPoster().Thread(ctx, id)
		if err != nil {
			return 0, err
		}
		n += int(th.Taken) + len(th.Runs()) - len(th.ActiveRuns())
	}
	return n, nil
}

// work returns the index of a thread with a message to consume or an
// active run.
func (s *Seeded) work(ctx context.Context) (int, bool, error) {
	for i, id := range s.threads {
		th, err := s.ownPoster().Thread(ctx, id)
		if err != nil {
			return 0, false, err
		}
		if th.Unconsumed() || len(th.ActiveRuns()) > 0 {
			return i, true, nil
		}
	}
	return 0, false, nil
}

func (s *Seeded) checkLiveness(ctx context.Context) error {
	for _, id := range s.threads {
		th, err := s.ownPoster().Thread(ctx, id)
		if err != nil {
			return err
		}
		if th.Taken != th.Last() {
			return &InvariantError{Invariant: "Liveness", Thread: id, Op: -1, Detail: fmt.Sprintf("taken %d of %d messages", th.Taken, th.Last())}
		}
	}
	return nil
}
