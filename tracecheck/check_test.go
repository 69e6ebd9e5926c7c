package tracecheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// traceGen drives core.Workspace over store/memory with several processes,
// one step at a time in a seeded order, and records the trace core writes.
// It is the checker's source of long, realistic traces: claims that lapse
// under live holders (each process has its own clock, advanced at its own
// pace), stalls between a Plan and its write, fenced refusals, abandons,
// asks, replies, crashes and releases. It is not the project's simulation
// (sim.go, which drives the runner); it calls core directly so that every
// action shows up often.
type traceGen struct {
	ctx     context.Context
	rng     *rand.Rand
	rec     *tracecheck.Recorder
	threads []core.ThreadID
	procs   []*genProc
	poster  *core.Workspace
	ttl     time.Duration
	holders int
}

type genProc struct {
	name  string
	ws    *core.Workspace
	clock *coretest.Clock
	st    genState
	claim core.Claim
	plan  core.Plan
	run   core.RunID
	steer core.Seq // the steering given to run and not recorded (genSteered)
}

type genState int

const (
	genIdle genState = iota
	genClaimed
	genPlanned
	genRunning
	genSteered
)

type genConfig struct {
	seed    uint64
	threads int
	procs   int
	fences  core.Fences
}

func newTraceGen(tb testing.TB, cfg genConfig) *traceGen {
	tb.Helper()
	ctx := context.Background()
	store := memory.New()
	rec := &tracecheck.Recorder{}
	start := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	g := &traceGen{ctx: ctx, rng: rand.New(rand.NewPCG(cfg.seed, 0x7ace)), rec: rec, ttl: 10 * time.Second}
	g.poster = core.NewWorkspace(store, coretest.NewClock(start), core.WithProcess("poster"), core.WithTracer(rec))
	for i := range cfg.threads {
		id := core.ThreadID(fmt.Sprintf("t%d", i+1))
		if err := g.poster.CreateThread(ctx, id); err != nil {
			tb.Fatal(err)
		}
		g.threads = append(g.threads, id)
	}
	for i := range cfg.procs {
		clock := coretest.NewClock(start)
		name := fmt.Sprintf("p%d", i+1)
		ws := core.NewWorkspace(store, clock, core.WithProcess(name), core.WithTracer(rec), core.WithFencesForTesting(cfg.fences))
		g.procs = append(g.procs, &genProc{name: name, ws: ws, clock: clock})
	}
	return g
}

// run takes steps until the recorder holds at least lines lines.
func (g *traceGen) run(tb testing.TB, lines int) []core.TraceEvent {
	tb.Helper()
	for g.rec.Len() < lines {
		if err := g.step(); err != nil {
			tb.Fatal(err)
		}
	}
	return g.rec.Lines()
}

func (g *traceGen) step() error {
	if g.rng.IntN(6) == 0 {
		_, err := g.poster.Post(g.ctx, g.threads[g.rng.IntN(len(g.threads))], "m")
		return err
	}
	p := g.procs[g.rng.IntN(len(g.procs))]
	// Each process's clock runs at its own pace: a lease can expire by
	// another's clock while its holder is in the middle of a round.
	p.clock.Advance(time.Duration(g.rng.IntN(3000)) * time.Millisecond)
	if g.rng.IntN(40) == 0 {
		p.clock.Advance(g.ttl)
	}
	if p.st != genIdle {
		switch g.rng.IntN(50) {
		case 0:
			return g.crash(p)
		case 1, 2, 3:
			if err := p.ws.Renew(g.ctx, p.claim, g.ttl); err != nil && !errors.Is(err, core.ErrThreadBusy) {
				return err
			}
			return nil
		}
	}
	switch p.st {
	case genIdle:
		g.holders++
		id := g.threads[g.rng.IntN(len(g.threads))]
		c, err := p.ws.Claim(g.ctx, id, core.Holder(fmt.Sprintf("%s-%x", p.name, g.rng.Uint64()>>16)), g.ttl)
		if errors.Is(err, core.ErrThreadBusy) {
			return nil
		}
		if err != nil {
			return err
		}
		p.claim, p.st = c, genClaimed
	case genClaimed:
		if g.rng.IntN(12) == 0 {
			p.st = genIdle
			return p.ws.Release(g.ctx, p.claim)
		}
		plan, err := p.ws.Plan(g.ctx, p.claim)
		if err != nil {
			return err
		}
		switch plan.Kind {
		case core.PlanNothing:
			p.st = genIdle
			return p.ws.Release(g.ctx, p.claim)
		case core.PlanAbandon:
			err := p.ws.Abandon(g.ctx, p.claim, plan.Runs[0])
			switch {
			case errors.Is(err, core.ErrThreadBusy):
				p.st = genIdle
			case errors.Is(err, core.ErrRunNotActive), errors.Is(err, core.ErrRunAbandoned):
				return g.crash(p) // unfenced only: not a step of the spec; the round is given up
			case err != nil:
				return err
			}
		default:
			p.plan, p.st = plan, genPlanned
		}
	case genPlanned:
		if p.plan.Kind == core.PlanRun {
			run, err := p.ws.RunStart(g.ctx, p.claim, p.plan.Message)
			switch {
			case errors.Is(err, core.ErrThreadBusy):
				p.st = genIdle
			case err != nil:
				return err
			default:
				p.run, p.st = run, genRunning
			}
			return nil
		}
		err := p.ws.Reply(g.ctx, p.claim, p.plan.Request, p.plan.Message)
		switch {
		case errors.Is(err, core.ErrThreadBusy):
			p.st = genIdle
		case errors.Is(err, core.ErrAlreadyAnswered):
			return g.crash(p) // unfenced only
		case err != nil:
			return err
		default:
			p.st = genClaimed
		}
	case genRunning:
		return g.running(p)
	case genSteered:
		err := p.ws.SteerRecord(g.ctx, p.claim, p.run, p.steer)
		switch {
		case errors.Is(err, core.ErrRunAbandoned):
			p.st = genIdle // SteerRefused
		case err != nil:
			return err
		default:
			p.st = genRunning
		}
	}
	return nil
}

// running takes a running process's next step: a question, steering, or
// the run's end.
func (g *traceGen) running(p *genProc) error {
	switch g.rng.IntN(6) {
	case 0, 1:
		_, err := p.ws.Ask(g.ctx, p.claim, p.run, "q")
		if err != nil && !errors.Is(err, core.ErrRunAbandoned) {
			return err
		}
		return nil
	case 2:
		// Steering: none when nothing is left or a request is open;
		// not traced when the run was abandoned (its end is refused
		// next).
		m, ok, err := p.ws.Steer(g.ctx, p.claim, p.run)
		switch {
		case errors.Is(err, core.ErrRunAbandoned):
		case err != nil:
			return err
		case ok:
			p.steer, p.st = m.Seq, genSteered
		}
		return nil
	}
	err := p.ws.RunEnd(g.ctx, p.claim, p.run, "")
	switch {
	case errors.Is(err, core.ErrRunAbandoned):
		p.st = genIdle
	case err != nil:
		return err
	default:
		p.st = genClaimed
	}
	return nil
}

// crash ends p's round where it is and logs Crash, as a runner's death
// would be logged by the simulation: a read at the thread's version.
func (g *traceGen) crash(p *genProc) error {
	p.st = genIdle
	return p.ws.Crash(g.ctx, p.claim)
}

func asViolation(err error, v **tracecheck.Violation) bool { return errors.As(err, v) }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

var updateFixtures = flag.Bool("update-fixtures", false, "rewrite tracecheck/testdata/*.ndjson from their scripts")

// fixtureScript plays one fixture's scenario on core.Workspace over
// store/memory, one call at a time, with processes p1 and p2 (each with its
// own clock) and a poster. A lease lapses by a process's clock running past
// its expiry (ahead). Holders are fixed strings, so the output is stable.
type fixtureScript struct {
	t     *testing.T
	ctx   context.Context
	rec   *tracecheck.Recorder
	post  *core.Workspace
	ws    map[string]*core.Workspace
	clock map[string]*coretest.Clock
	claim map[string]core.Claim
}

const fixtureTTL = 10 * time.Second

func newFixtureScript(t *testing.T, unfenced ...string) *fixtureScript {
	t.Helper()
	return newFixtureScriptWith(t, core.Mutants{}, unfenced...)
}

// newFixtureScriptWith is newFixtureScript with core's mutants m on in
// p1's workspace.
func newFixtureScriptWith(t *testing.T, m core.Mutants, unfenced ...string) *fixtureScript {
	t.Helper()
	s := &fixtureScript{t: t, ctx: context.Background(), rec: &tracecheck.Recorder{},
		ws: map[string]*core.Workspace{}, clock: map[string]*coretest.Clock{}, claim: map[string]core.Claim{}}
	store := memory.New()
	start := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	s.post = core.NewWorkspace(store, coretest.NewClock(start), core.WithProcess("poster"), core.WithTracer(s.rec))
	for _, p := range []string{"p1", "p2"} {
		opts := []core.Option{core.WithProcess(p), core.WithTracer(s.rec)}
		for _, u := range unfenced {
			if u == p {
				opts = append(opts, core.WithFencesForTesting(core.Fences{}))
			}
		}
		if p == "p1" {
			opts = append(opts, core.WithMutantsForTesting(m))
		}
		s.clock[p] = coretest.NewClock(start)
		s.ws[p] = core.NewWorkspace(store, s.clock[p], opts...)
	}
	if err := s.post.CreateThread(s.ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *fixtureScript) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *fixtureScript) Post() { _, err := s.post.Post(s.ctx, "t1", "hello"); s.must(err) }

func (s *fixtureScript) Ahead(p string, d time.Duration) { s.clock[p].Advance(d) }

func (s *fixtureScript) Claim(p string, h core.Holder) {
	c, err := s.ws[p].Claim(s.ctx, "t1", h, fixtureTTL)
	s.must(err)
	s.claim[p] = c
}

func (s *fixtureScript) Renew(p string) error { return s.ws[p].Renew(s.ctx, s.claim[p], fixtureTTL) }

func (s *fixtureScript) Release(p string) { s.must(s.ws[p].Release(s.ctx, s.claim[p])) }

func (s *fixtureScript) Plan(p string) core.Plan {
	pl, err := s.ws[p].Plan(s.ctx, s.claim[p])
	s.must(err)
	return pl
}

func (s *fixtureScript) RunStart(p string, m core.Seq) error {
	_, err := s.ws[p].RunStart(s.ctx, s.claim[p], m)
	return err
}

func (s *fixtureScript) Reply(p string, q core.RequestID, m core.Seq) error {
	return s.ws[p].Reply(s.ctx, s.claim[p], q, m)
}

func (s *fixtureScript) Ask(p string, r core.RunID) {
	_, err := s.ws[p].Ask(s.ctx, s.claim[p], r, "which one?")
	s.must(err)
}

func (s *fixtureScript) RunEnd(p string, r core.RunID) error {
	return s.ws[p].RunEnd(s.ctx, s.claim[p], r, "")
}

// RunEndWith records the end of run r with the run's output.
func (s *fixtureScript) RunEndWith(p string, r core.RunID, output string) error {
	return s.ws[p].RunEnd(s.ctx, s.claim[p], r, output)
}

func (s *fixtureScript) Abandon(p string, r core.RunID) error {
	return s.ws[p].Abandon(s.ctx, s.claim[p], r)
}

// Steer gives p's run r the oldest unconsumed message as steering; it
// fails the test when there is none to give.
func (s *fixtureScript) Steer(p string, r core.RunID) core.Seq {
	s.t.Helper()
	m, ok, err := s.ws[p].Steer(s.ctx, s.claim[p], r)
	s.must(err)
	if !ok {
		s.t.Fatalf("%s: no steering to give run %d", p, r)
	}
	return m.Seq
}

func (s *fixtureScript) SteerRecord(p string, r core.RunID, m core.Seq) error {
	return s.ws[p].SteerRecord(s.ctx, s.claim[p], r, m)
}

// AddRead appends a read line core would not write (a broken core's), at
// the thread's version.
func (s *fixtureScript) AddRead(ev core.TraceEvent) {
	th, err := s.post.Thread(s.ctx, "t1")
	s.must(err)
	ev.Tick, ev.Read, ev.Thread = th.Version, true, "t1"
	s.rec.Trace(ev)
}

// Crash logs p's death as the simulation does: a read at the version.
func (s *fixtureScript) Crash(p string) { s.must(s.ws[p].Crash(s.ctx, s.claim[p])) }

// Add appends a line core would not write (a broken core's), after the
// last one: a write at the next tick.
func (s *fixtureScript) Add(ev core.TraceEvent) {
	th, err := s.post.Thread(s.ctx, "t1")
	s.must(err)
	ev.Tick, ev.Thread = th.Version+1, "t1"
	s.rec.Trace(ev)
}

func (s *fixtureScript) bytes() []byte {
	var b bytes.Buffer
	_, err := s.rec.WriteTo(&b)
	s.must(err)
	return b.Bytes()
}

func busy(t *testing.T, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "thread busy") {
		t.Fatalf("want a fenced refusal, got %v", err)
	}
}

// fixtureScripts makes every fixture under testdata/. Holders are short
// fixed strings standing for core's random ones.
var fixtureScripts = map[string]func(t *testing.T) []byte{
	// One process: a run that asks, the reply that answers it, a renewal.
	"ok-run-ask-reply.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t)
		s.Post()
		s.Claim("p1", "h-7a3f")
		s.must(s.Renew("p1"))
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Ask("p1", 1)
		s.must(s.RunEnd("p1", 1))
		s.Post()
		s.Plan("p1")
		s.must(s.Reply("p1", 1, 2))
		s.Plan("p1") // nothing left: not traced
		s.Release("p1")
		return s.bytes()
	},
	// A run that writes its output (the agent's reply to the person) with
	// its end: the RunEnd line says output.
	"ok-run-output.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t)
		s.Post()
		s.Claim("p1", "h-0a7e")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.must(s.RunEndWith("p1", 1, "deploying"))
		s.Plan("p1") // nothing left: not traced
		s.Release("p1")
		return s.bytes()
	},
	// p1's claim lapses while its run is active; p2 takes the lease and
	// abandons the run; p1's end of it, with its output, is refused and
	// writes nothing (EndRefused).
	"ok-end-refused.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t)
		s.Post()
		s.Claim("p1", "h-e001")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-e002")
		s.Plan("p2")
		s.must(s.Abandon("p2", 1))
		if err := s.RunEndWith("p1", 1, "deploying"); err == nil {
			t.Fatal("the end of an abandoned run was not refused")
		}
		s.Release("p2")
		return s.bytes()
	},
	// p1 dies with its run active; p2 takes the lapsed lease, abandons the
	// run and goes on.
	"ok-crash-takeover.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t)
		s.Post()
		s.Claim("p1", "h-1c0e")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Crash("p1")
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-52bd")
		s.Plan("p2")
		s.must(s.Abandon("p2", 1))
		s.Post()
		s.Plan("p2")
		s.must(s.RunStart("p2", 2))
		s.must(s.RunEnd("p2", 2))
		s.Release("p2")
		return s.bytes()
	},
	// Claims lapse under live holders; every fence refuses once: a start, a
	// reply, an abandon; a run's end is refused once it was abandoned; a
	// Release finds the lease another's.
	"ok-fenced-refusals.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t)
		s.Post()
		s.Claim("p1", "h-0b11")
		s.Plan("p1") // run m1; p1 stalls
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-0b22")
		s.Plan("p2")
		s.must(s.RunStart("p2", 1))
		busy(t, s.RunStart("p1", 1)) // StartFenced
		s.Ask("p2", 1)
		s.must(s.RunEnd("p2", 1))
		s.Post()
		s.Plan("p2") // reply m2 to request 1; p2 stalls
		s.Ahead("p1", 3*fixtureTTL)
		s.Claim("p1", "h-0b33")
		s.Plan("p1")
		s.must(s.Reply("p1", 1, 2))
		busy(t, s.Reply("p2", 1, 2)) // ReplyFenced
		s.Post()
		s.Plan("p1")
		s.must(s.RunStart("p1", 3))
		s.Ahead("p2", 3*fixtureTTL)
		s.Claim("p2", "h-0b44")
		busy(t, s.Renew("p1")) // refused: not traced
		s.Plan("p2")
		s.must(s.Abandon("p2", 2))
		if err := s.RunEnd("p1", 2); err == nil { // EndRefused
			t.Fatal("the end of an abandoned run was not refused")
		}
		s.Ahead("p1", 6*fixtureTTL)
		s.Claim("p1", "h-0b55")
		s.Release("p2") // the lease is p1's now: core logs a read
		s.Release("p1")
		return s.bytes()
	},
	// A claimant whose claim lapsed and was taken cannot abandon the run.
	"ok-abandon-fenced.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t)
		s.Post()
		s.Claim("p1", "h-a001")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Crash("p1")
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-a002")
		s.Plan("p2") // abandon run 1; p2 stalls
		s.Ahead("p1", 3*fixtureTTL)
		s.Claim("p1", "h-a003")
		busy(t, s.Abandon("p2", 1)) // AbandonFenced
		s.Plan("p1")
		s.must(s.Abandon("p1", 1))
		s.Release("p1")
		return s.bytes()
	},
	// A run is given a message posted while it works as steering (Steer),
	// records it (SteerRecord: consumed), then ends.
	"ok-steer-record.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t)
		s.Post()
		s.Claim("p1", "h-5701")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Post()
		m := s.Steer("p1", 1)
		s.must(s.SteerRecord("p1", 1, m))
		s.Post()
		m = s.Steer("p1", 1)
		s.must(s.SteerRecord("p1", 1, m))
		s.must(s.RunEnd("p1", 1))
		s.Release("p1")
		return s.bytes()
	},
	// ADR-0069's one exception: p1's run is given m2 as steering and p1
	// stalls; its claim lapses, p2 takes it and abandons the run; p1's
	// record is refused (SteerRefused), and p2 gives m2 again, as its
	// run's prompt: given twice, consumed once.
	"ok-steer-exception.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t)
		s.Post()
		s.Claim("p1", "h-5e71")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Post()
		m := s.Steer("p1", 1) // p1 stalls
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-5e72")
		s.Plan("p2")
		s.must(s.Abandon("p2", 1))
		if err := s.SteerRecord("p1", 1, m); !errors.Is(err, core.ErrRunAbandoned) {
			t.Fatalf("the record of an abandoned run's steering: want ErrRunAbandoned, got %v", err)
		}
		if p := s.Plan("p2"); p.Message != m {
			t.Fatalf("p2 plans %+v, not the steering m%d", p, m)
		}
		s.must(s.RunStart("p2", m))
		s.must(s.RunEnd("p2", 2))
		s.Release("p2")
		return s.bytes()
	},
	// The mutant (core.Mutants.SteerRecordAfterAbandon in p1): as in
	// ok-steer-exception, but p2 consumes m2 as its run's prompt first,
	// and then p1's stalled record of m2 commits: m2 is consumed twice.
	"bad-steer-then-consumed-by-next.ndjson": func(t *testing.T) []byte {
		s := newFixtureScriptWith(t, core.Mutants{SteerRecordAfterAbandon: true})
		s.Post()
		s.Claim("p1", "h-5c01")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Post()
		m := s.Steer("p1", 1)
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-5c02")
		s.Plan("p2")
		s.must(s.Abandon("p2", 1))
		s.Plan("p2")
		s.must(s.RunStart("p2", m))
		s.must(s.SteerRecord("p1", 1, m))
		return s.bytes()
	},
	// The mutant (core.Mutants.SteerRecordAfterAbandon in p1): p1's record
	// of steering commits after p2 abandoned its run.
	"bad-steer-record-after-abandon.ndjson": func(t *testing.T) []byte {
		s := newFixtureScriptWith(t, core.Mutants{SteerRecordAfterAbandon: true})
		s.Post()
		s.Claim("p1", "h-5a01")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Post()
		m := s.Steer("p1", 1)
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-5a02")
		s.Plan("p2")
		s.must(s.Abandon("p2", 1))
		s.must(s.SteerRecord("p1", 1, m))
		return s.bytes()
	},
	// The mutant (core.Mutants.SteerRecordKeepsCursor in p1): the record
	// of steering leaves the taken cursor where it was.
	"bad-steer-record-keeps-cursor.ndjson": func(t *testing.T) []byte {
		s := newFixtureScriptWith(t, core.Mutants{SteerRecordKeepsCursor: true})
		s.Post()
		s.Claim("p1", "h-5b01")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Post()
		m := s.Steer("p1", 1)
		s.must(s.SteerRecord("p1", 1, m))
		return s.bytes()
	},
	// The mutant (core.Mutants.SteerConsumed in p1): the run is given as
	// steering its own prompt, a message already consumed.
	"bad-steer-consumed-message.ndjson": func(t *testing.T) []byte {
		s := newFixtureScriptWith(t, core.Mutants{SteerConsumed: true})
		s.Post()
		s.Post()
		s.Claim("p1", "h-5d01")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Steer("p1", 1)
		return s.bytes()
	},
	// The mutant (core.Mutants.SteerInactiveRun in p1): p1's run, which
	// p2 abandoned, is given steering.
	"bad-steer-inactive-run.ndjson": func(t *testing.T) []byte {
		s := newFixtureScriptWith(t, core.Mutants{SteerInactiveRun: true})
		s.Post()
		s.Claim("p1", "h-5f01")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Post()
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-5f02")
		s.Plan("p2")
		s.must(s.Abandon("p2", 1))
		s.Steer("p1", 1)
		return s.bytes()
	},
	// A broken core: p1's run is given steering while its request is open
	// (core gives none then: the oldest unconsumed message answers the
	// request; this line is hand-made).
	"bad-steer-request-open.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t)
		s.Post()
		s.Claim("p1", "h-5901")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Ask("p1", 1)
		s.Post()
		if _, ok, err := s.ws["p1"].Steer(s.ctx, s.claim["p1"], 1); err != nil || ok {
			t.Fatalf("steering while a request is open: got ok=%v, %v", ok, err)
		}
		s.AddRead(core.TraceEvent{Action: core.ActionSteer, Proc: "p1", Holder: "h-5901", Msg: 2, Run: 1, Taken: 1})
		return s.bytes()
	},
	// The mutant (p1's fences off): p1's claim lapses and p2 takes it;
	// p1's start commits under p2's lease.
	"bad-start-under-other-lease.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t, "p1")
		s.Post()
		s.Claim("p1", "h-5e01")
		s.Plan("p1")
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-5e02")
		s.must(s.RunStart("p1", 1))
		return s.bytes()
	},
	// The mutant: ADR-0069's counterexample, after p2's run ended. Both
	// planned m1; both starts commit; m1 is a prompt twice.
	"bad-consumed-twice.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t, "p1", "p2")
		s.Post()
		s.Claim("p1", "h-c001")
		s.Plan("p1")
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-c002")
		s.Plan("p2")
		s.must(s.RunStart("p2", 1))
		s.must(s.RunEnd("p2", 1))
		s.must(s.RunStart("p1", 1))
		return s.bytes()
	},
	// The mutant: ADR-0069's counterexample as the ADR tells it: both
	// starts commit while the first run is active.
	"bad-two-active-runs.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t, "p1", "p2")
		s.Post()
		s.Claim("p1", "h-d001")
		s.Plan("p1")
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-d002")
		s.Plan("p2")
		s.must(s.RunStart("p2", 1))
		s.must(s.RunStart("p1", 1))
		return s.bytes()
	},
	// A broken core: p1's stale reply to request 1, which p2 has answered,
	// commits (core refuses it even unfenced; this line is hand-made).
	"bad-reply-already-answered.ndjson": func(t *testing.T) []byte {
		s := newFixtureScript(t)
		s.Post()
		s.Claim("p1", "h-e001")
		s.Plan("p1")
		s.must(s.RunStart("p1", 1))
		s.Ask("p1", 1)
		s.must(s.RunEnd("p1", 1))
		s.Post()
		s.Plan("p1") // reply m2 to request 1; p1 stalls
		s.Ahead("p2", fixtureTTL+time.Second)
		s.Claim("p2", "h-e002")
		s.Plan("p2")
		s.must(s.Reply("p2", 1, 2))
		s.Add(core.TraceEvent{Action: core.ActionReply, Proc: "p1", Holder: "h-e001", Msg: 2, Req: 1, Taken: 2, Lease: "h-e002"})
		return s.bytes()
	},
}

// Fixtures derived by editing another's lines: a tick gap, a line replayed
// with its old tick, a line that is not JSON.
var fixtureEdits = map[string]struct {
	from string
	edit func(t *testing.T, lines []string) []string
}{
	// From line 6 (the Ask) on, every tick is two too high.
	"bad-tick-gap.ndjson": {"ok-run-ask-reply.ndjson", func(t *testing.T, lines []string) []string {
		for i := 5; i < len(lines); i++ {
			lines[i] = editTick(t, lines[i], func(tick uint64) uint64 { return tick + 2 })
		}
		return lines
	}},
	// Line 5 (the RunStart) appended again at the end: a write whose tick
	// goes back.
	"bad-tick-backwards.ndjson": {"ok-run-ask-reply.ndjson", func(t *testing.T, lines []string) []string {
		return append(lines, lines[4])
	}},
	// The EndRefused of p1's abandoned run becomes the write of its output
	// (what core.Mutants.OutputOfAbandonedRun does): a RunEnd, with
	// output, of a run a later claim abandoned. The lines after it go.
	"bad-output-abandoned-run.ndjson": {"ok-end-refused.ndjson", func(t *testing.T, lines []string) []string {
		for i, l := range lines {
			var ev core.TraceEvent
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Action != core.ActionEndRefused {
				continue
			}
			ev.Action, ev.Read, ev.Tick, ev.Output = core.ActionRunEnd, false, ev.Tick+1, true
			b, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			return append(lines[:i], string(b))
		}
		t.Fatal("ok-end-refused.ndjson has no EndRefused")
		return nil
	}},
	// The Ask (line 6) says it wrote an output: only RunEnd does.
	"bad-output-on-ask.ndjson": {"ok-run-ask-reply.ndjson", func(t *testing.T, lines []string) []string {
		lines[5] = strings.TrimSuffix(lines[5], "}") + `,"output":true}`
		return lines
	}},
	// Line 5 cut short.
	"bad-malformed.ndjson": {"ok-run-ask-reply.ndjson", func(t *testing.T, lines []string) []string {
		lines[4] = lines[4][:len(lines[4])/2]
		return lines
	}},
}

func editTick(t *testing.T, line string, f func(uint64) uint64) string {
	t.Helper()
	var ev core.TraceEvent
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatal(err)
	}
	ev.Tick = f(ev.Tick)
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func makeFixtures(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for name, script := range fixtureScripts {
		out[name] = script(t)
	}
	for name, e := range fixtureEdits {
		lines := strings.Split(strings.TrimSuffix(string(out[e.from]), "\n"), "\n")
		out[name] = []byte(strings.Join(e.edit(t, lines), "\n") + "\n")
	}
	return out
}

// TestFixturesAreCoreOutput guards that every fixture is what its script
// makes core write today (run with -update-fixtures to rewrite them).
func TestFixturesAreCoreOutput(t *testing.T) {
	for name, want := range makeFixtures(t) {
		path := filepath.Join("testdata", name)
		if *updateFixtures {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what its script makes core write; rerun with -update-fixtures and review the diff", name)
		}
	}
}

// fixtureTable is what the Go checker says of each fixture: the line it
// rejects, the kind, and the rule, under the fenced spec
// (ThreadClaimLapse.cfg) and under the unfenced one (Fenced = FALSE,
// FenceAbandon = FALSE), where "" means accepted.
var fixtureTable = []struct {
	file       string
	line       int
	kind       error
	rule       string
	unfenced   string   // the rule with the fences off; "" = accepted
	alsoFailed []string // further failing conjuncts or invariants (unfenced for invariants)
}{
	{file: "ok-run-ask-reply.ndjson"},
	{file: "ok-crash-takeover.ndjson"},
	{file: "ok-fenced-refusals.ndjson", unfenced: "Fenced"},
	{file: "ok-abandon-fenced.ndjson", unfenced: "FenceAbandon"},
	{file: "bad-start-under-other-lease.ndjson", line: 5, kind: tracecheck.ErrGuard, rule: "Fenced => HasLease(p)"},
	{file: "bad-consumed-twice.ndjson", line: 8, kind: tracecheck.ErrGuard, rule: "Fenced => HasLease(p)",
		unfenced: core.InvConsumedAtMostOnce},
	{file: "bad-two-active-runs.ndjson", line: 7, kind: tracecheck.ErrGuard, rule: "Fenced => HasLease(p)",
		unfenced: core.InvConsumedAtMostOnce, alsoFailed: []string{core.InvOneActiveRun}},
	{file: "bad-reply-already-answered.ndjson", line: 12, kind: tracecheck.ErrGuard, rule: "Fenced => HasLease(p)",
		unfenced: `reqs[plan[p].req].state = "open"`, alsoFailed: []string{`reqs[plan[p].req].state = "open"`}},
	{file: "bad-tick-gap.ndjson", line: 6, kind: tracecheck.ErrOrder, rule: "tick", unfenced: "tick"},
	{file: "bad-tick-backwards.ndjson", line: 12, kind: tracecheck.ErrOrder, rule: "tick", unfenced: "tick"},
	{file: "bad-malformed.ndjson", line: 5, kind: tracecheck.ErrMalformed},
	{file: "ok-run-output.ndjson"},
	{file: "ok-end-refused.ndjson"},
	{file: "bad-output-abandoned-run.ndjson", line: 7, kind: tracecheck.ErrGuard, rule: `runs[run[p]].state = "active"`, unfenced: `runs[run[p]].state = "active"`},
	{file: "bad-output-on-ask.ndjson", line: 6, kind: tracecheck.ErrLineValue, rule: "line.output", unfenced: "line.output"},
	{file: "ok-steer-record.ndjson"},
	{file: "ok-steer-exception.ndjson"},
	{file: "bad-steer-then-consumed-by-next.ndjson", line: 11, kind: tracecheck.ErrGuard,
		rule: `RefuseSteerAbandoned => runs[run[p]].state = "active"`, unfenced: `RefuseSteerAbandoned => runs[run[p]].state = "active"`},
	{file: "bad-steer-record-after-abandon.ndjson", line: 9, kind: tracecheck.ErrGuard,
		rule: `RefuseSteerAbandoned => runs[run[p]].state = "active"`, unfenced: `RefuseSteerAbandoned => runs[run[p]].state = "active"`},
	{file: "bad-steer-record-keeps-cursor.ndjson", line: 7, kind: tracecheck.ErrLineValue, rule: "line.taken", unfenced: "line.taken"},
	{file: "bad-steer-consumed-message.ndjson", line: 6, kind: tracecheck.ErrLineValue, rule: "line.msg", unfenced: "line.msg"},
	{file: "bad-steer-inactive-run.ndjson", line: 8, kind: tracecheck.ErrGuard,
		rule: `runs[run[p]].state = "active"`, unfenced: `runs[run[p]].state = "active"`},
	{file: "bad-steer-request-open.ndjson", line: 7, kind: tracecheck.ErrGuard, rule: "OpenReqs = {}", unfenced: "OpenReqs = {}"},
}

func TestFixtures(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range fixtureTable {
		seen[tc.file] = true
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			lines, err := tracecheck.ReadFile(path)
			if tc.kind == tracecheck.ErrMalformed {
				le, ok := err.(*tracecheck.LineError)
				if !ok || le.Line != tc.line || le.File != path || !strings.Contains(le.Error(), fmt.Sprintf("%s:%d:", path, tc.line)) {
					t.Fatalf("Read: want a *LineError at %s:%d, got %v", path, tc.line, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if threads := tracecheck.Order(lines); len(threads) != 1 {
				t.Fatalf("a fixture must be one thread, has %d", len(threads))
			}
			for _, mode := range []struct {
				name string
				spec core.Fences
				rule string
			}{
				{"fenced", core.AllFences(), tc.rule},
				{"unfenced", core.Fences{}, tc.unfenced},
			} {
				if tc.line == 0 && mode.name == "unfenced" && tc.unfenced != "" {
					// An ok trace that uses a refusal the unfenced spec lacks.
					_, err := tracecheck.Check(lines, tracecheck.WithFile(path), tracecheck.WithFences(mode.spec))
					var v *tracecheck.Violation
					if !asViolation(err, &v) || v.Rule != tc.unfenced {
						t.Errorf("%s: want the refusal's guard %s to fail, got %v", mode.name, tc.unfenced, err)
					}
					continue
				}
				st, err := tracecheck.Check(lines, tracecheck.WithFile(path), tracecheck.WithFences(mode.spec))
				if mode.rule == "" {
					if err != nil {
						t.Errorf("%s: want accepted, got %v", mode.name, err)
					}
					if st.Lines != len(lines) || st.InvariantChecks != 4*len(lines) {
						t.Errorf("%s: stats %+v for %d lines", mode.name, st, len(lines))
					}
					continue
				}
				var v *tracecheck.Violation
				if !asViolation(err, &v) {
					t.Fatalf("%s: want a *Violation, got %v", mode.name, err)
				}
				if v.Line != tc.line || v.Rule != mode.rule || v.File != path {
					t.Errorf("%s: want %s:%d %q, got %s:%d %q\n%v", mode.name, path, tc.line, mode.rule, v.File, v.Line, v.Rule, v)
				}
				if mode.name == "fenced" && !errorsIs(err, tc.kind) {
					t.Errorf("%s: want kind %v, got %v", mode.name, tc.kind, v.Kind)
				}
				for _, also := range tc.alsoFailed {
					if !contains(v.Failed, also) && !(mode.name == "fenced" && strings.HasPrefix(also, "I")) {
						t.Errorf("%s: want %q among the failed %v", mode.name, also, v.Failed)
					}
				}
				t.Logf("%s: %v", mode.name, v)
			}
		})
	}
	files, _ := filepath.Glob("testdata/*.ndjson")
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s is not in the fixture table", f)
		}
	}
}

// TestCheckAcceptsFencedCoreTraces guards the checker against false
// alarms: traces that the fenced core writes under lapses, stalls and
// crashes are behaviours of ThreadClaimLapse.cfg's spec; every logged
// action shows up.
func TestCheckAcceptsFencedCoreTraces(t *testing.T) {
	total := map[core.Action]int{}
	lapses, live := 0, 0
	for seed := uint64(1); seed <= 20; seed++ {
		g := newTraceGen(t, genConfig{seed: seed, threads: 2, procs: 3, fences: core.AllFences()})
		lines := g.run(t, 3000)
		st, err := tracecheck.Check(lines, tracecheck.WithFile(fmt.Sprintf("seed-%d", seed)))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if st.Lines != len(lines) || st.Threads != 2 {
			t.Fatalf("seed %d: stats %+v for %d lines", seed, st, len(lines))
		}
		for a, n := range st.PerAction {
			total[a] += n
		}
		lapses += st.LapsesInferred
		live += st.LiveLapses
	}
	for _, a := range core.Actions() {
		if a != core.ActionLapse && total[a] == 0 {
			t.Errorf("no %s line in 20 seeds: %v", a, total)
		}
	}
	if live == 0 {
		t.Errorf("no lapse under a live holder was inferred (%d lapses)", lapses)
	}
	t.Logf("actions %v; lapses inferred %d, under live holders %d", total, lapses, live)
}

// TestCheckCatchesUnfencedMutant guards that the checks bite: with every
// fence off, core writes traces the fenced spec rejects at a fenced write,
// and the unfenced spec rejects by an invariant (I1, I3 or NoLiveAbandon).
func TestCheckCatchesUnfencedMutant(t *testing.T) {
	guards, invariants := map[string]int{}, map[string]int{}
	for seed := uint64(1); seed <= 20; seed++ {
		g := newTraceGen(t, genConfig{seed: seed, threads: 2, procs: 3, fences: core.Fences{}})
		lines := g.run(t, 3000)
		var v *tracecheck.Violation
		if _, err := tracecheck.Check(lines); asViolation(err, &v) {
			guards[v.Rule]++
		} else if err != nil {
			t.Fatal(err)
		}
		if _, err := tracecheck.Check(lines, tracecheck.WithFences(core.Fences{})); asViolation(err, &v) {
			if !errors.Is(err, tracecheck.ErrInvariant) {
				t.Errorf("seed %d: the unfenced spec rejects the mutant by a guard, not an invariant: %v", seed, v)
			}
			invariants[v.Rule]++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if guards["Fenced => HasLease(p)"] == 0 || guards["FenceAbandon => HasLease(p)"] == 0 {
		t.Errorf("the fenced spec did not reject the mutant at both fences: %v", guards)
	}
	if invariants[core.InvConsumedAtMostOnce] == 0 || invariants[core.InvNoLiveAbandon] == 0 {
		t.Errorf("the unfenced spec did not catch both I1 and NoLiveAbandon: %v", invariants)
	}
	t.Logf("fenced spec: %v; unfenced spec: %v", guards, invariants)
}

// TestSortRestoresTraceOrder guards the order rule: lines written in any
// interleaving that keeps each process's own order (as concurrent Trace
// calls after their transactions can) are rejected as they stand, at a
// line out of order, and accepted once Sort has put them in trace order.
func TestSortRestoresTraceOrder(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		g := newTraceGen(t, genConfig{seed: seed, threads: 3, procs: 4, fences: core.AllFences()})
		lines := g.run(t, 2000)
		byProc := map[string][]core.TraceEvent{}
		var procs []string
		for _, ev := range lines {
			if _, ok := byProc[ev.Proc]; !ok {
				procs = append(procs, ev.Proc)
			}
			byProc[ev.Proc] = append(byProc[ev.Proc], ev)
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		var mixed []core.TraceEvent
		for len(mixed) < len(lines) {
			p := procs[rng.IntN(len(procs))]
			if q := byProc[p]; len(q) > 0 {
				n := 1 + rng.IntN(min(len(q), 20))
				mixed = append(mixed, q[:n]...)
				byProc[p] = q[n:]
			}
		}
		var v *tracecheck.Violation
		if _, err := tracecheck.Check(mixed); !asViolation(err, &v) || !errors.Is(err, tracecheck.ErrOrder) {
			t.Fatalf("seed %d: an out-of-order file: want an order violation, got %v", seed, err)
		}
		tracecheck.Sort(mixed)
		if _, err := tracecheck.Check(mixed); err != nil {
			t.Fatalf("seed %d: sorted: %v", seed, err)
		}
	}
}

// TestCheckerStep feeds lines one at a time, as a simulation can, and
// checks that a thread stops at its first violation while others go on.
func TestCheckerStep(t *testing.T) {
	good, err := tracecheck.ReadFile("testdata/ok-run-ask-reply.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	bad, err := tracecheck.ReadFile("testdata/bad-two-active-runs.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	for i := range bad {
		bad[i].Thread = "t2"
	}
	c := tracecheck.NewChecker(tracecheck.WithFile("mixed"))
	var errs int
	for i := range max(len(good), len(bad)) {
		if i < len(bad) && c.Step(100+i+1, &bad[i]) != nil {
			errs++
		}
		if i < len(good) {
			if err := c.Step(i+1, &good[i]); err != nil {
				t.Fatalf("thread t1 stopped by t2's violation: %v", err)
			}
		}
	}
	var v *tracecheck.Violation
	if !asViolation(c.Err(), &v) || v.Line != 107 || v.Event.Thread != "t2" || errs != 1 {
		t.Fatalf("want t2's violation at line 107 once, got %v (%d)", c.Err(), errs)
	}
	if st := c.Stats(); st.Threads != 2 || st.Lines != len(good)+len(bad) {
		t.Fatalf("stats %+v", st)
	}
}

// TestViolationFields guards what a violation tells.
func TestViolationFields(t *testing.T) {
	_, err := tracecheck.CheckFile("testdata/bad-consumed-twice.ndjson", tracecheck.WithFences(core.Fences{}))
	var v *tracecheck.Violation
	if !asViolation(err, &v) {
		t.Fatalf("want a *Violation, got %v", err)
	}
	if !errors.Is(err, tracecheck.ErrInvariant) || v.Action != core.ActionRunStart || v.Event.Proc != "p1" ||
		v.File != "testdata/bad-consumed-twice.ndjson" || v.Line != 8 || !strings.Contains(v.State, "runs=[1:h2/m1/ended 2:h1/m1/active]") {
		t.Fatalf("violation %#v", v)
	}
	for _, want := range []string{"bad-consumed-twice.ndjson:8:", "I1_ConsumedAtMostOnce", "m1 consumed 2 times", `"holder":"h-c001"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

// TestCheckValues guards the post-state checks: each field of a good line,
// changed, is rejected at that line with that field named.
func TestCheckValues(t *testing.T) {
	base, err := tracecheck.ReadFile("testdata/ok-fenced-refusals.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line int
		edit func(*core.TraceEvent)
		rule string
	}{
		{1, func(e *core.TraceEvent) { e.Msg = 2 }, "line.msg"},
		{1, func(e *core.TraceEvent) { e.Holder = "x" }, "line.holder"},
		{2, func(e *core.TraceEvent) { e.Lease = "" }, "line.lease"},
		{3, func(e *core.TraceEvent) { e.Kind = "reply" }, "line.kind"},
		{3, func(e *core.TraceEvent) { e.Read = false }, "line.read"},
		{4, func(e *core.TraceEvent) { e.Holder = "h-0b11" }, `hold'[p] = nextHolder (a fresh holder)`},
		{6, func(e *core.TraceEvent) { e.Run = 2 }, "line.run"},
		{6, func(e *core.TraceEvent) { e.Taken = 0 }, "line.taken"},
		{7, func(e *core.TraceEvent) { e.Lease = "" }, "line.lease"},
		{7, func(e *core.TraceEvent) { e.Holder = "h-0b22" }, "line.holder"},
		{8, func(e *core.TraceEvent) { e.Req = 2 }, "line.req"},
		{11, func(e *core.TraceEvent) { e.Req = 0 }, "line.req"},
		{21, func(e *core.TraceEvent) { e.Run = 1 }, "line.run"},
		{23, func(e *core.TraceEvent) { e.Tick = 99 }, "tick"},
		{23, func(e *core.TraceEvent) { e.Lease = "h-0b44" }, "line.lease"},
		// A Release is a write exactly when it clears the lease p holds.
		{23, func(e *core.TraceEvent) { e.Tick, e.Read = 15, false }, "HasLease(p) (a Release that clears the lease)"},
		{24, func(e *core.TraceEvent) { e.Tick, e.Read, e.Lease = 14, true, "h-0b55" }, "~HasLease(p) (a Release that writes nothing)"},
		{5, func(e *core.TraceEvent) { e.Action = core.ActionLapse }, "action"},
		{5, func(e *core.TraceEvent) { e.Proc = "" }, "line.proc"},
	} {
		checkEdited(t, "ok-fenced-refusals.ndjson", slices.Clone(base), tc.line, tc.edit, tc.rule)
	}
}

// checkEdited edits line (1-based) of the accepted trace lines, read from
// file, and requires the checker to reject the trace there for rule.
func checkEdited(t *testing.T, file string, lines []core.TraceEvent, line int, edit func(*core.TraceEvent), rule string) {
	t.Helper()
	edit(&lines[line-1])
	_, err := tracecheck.Check(lines)
	var v *tracecheck.Violation
	if !asViolation(err, &v) || v.Line != line || v.Rule != rule {
		t.Errorf("%s line %d edited: want %q there, got %v", file, line, rule, err)
	}
}

// The values of steering's and Crash's lines are held to the spec's too:
// a Steer of another run, a record or a refusal of another message than
// the one steered, a Crash under another holder.
func TestCheckValuesSteerAndCrash(t *testing.T) {
	for _, tc := range []struct {
		file string
		line int
		edit func(*core.TraceEvent)
		rule string
	}{
		{"ok-steer-record.ndjson", 6, func(e *core.TraceEvent) { e.Run = 2 }, "line.run"},
		{"ok-steer-record.ndjson", 7, func(e *core.TraceEvent) { e.Msg = 1 }, "line.msg"},
		{"ok-steer-exception.ndjson", 9, func(e *core.TraceEvent) { e.Msg = 1 }, "line.msg"},
		{"ok-crash-takeover.ndjson", 5, func(e *core.TraceEvent) { e.Holder = "h-0b66" }, "line.holder"},
	} {
		lines, err := tracecheck.ReadFile("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tracecheck.Check(lines); err != nil {
			t.Fatalf("%s as it is: %v", tc.file, err)
		}
		checkEdited(t, tc.file, lines, tc.line, tc.edit, tc.rule)
	}
}

// BenchmarkCheck measures the Go checker on a long trace that core wrote
// (3 threads, 4 processes, lapses, stalls, refusals, crashes): lines/s.
func BenchmarkCheck(b *testing.B) {
	g := newTraceGen(b, genConfig{seed: 42, threads: 3, procs: 4, fences: core.AllFences()})
	lines := g.run(b, 500_000)
	if _, err := tracecheck.Check(lines); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := tracecheck.Check(lines); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(lines))*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// benchTrace returns a long trace core wrote, as ndjson, and its line
// count; the generator's memory is garbage once it returns.
func benchTrace(b *testing.B, lines int) ([]byte, int) {
	g := newTraceGen(b, genConfig{seed: 42, threads: 3, procs: 4, fences: core.AllFences()})
	n := len(g.run(b, lines))
	var buf bytes.Buffer
	if _, err := g.rec.WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes(), n
}

// BenchmarkReadCheck measures reading the same kind of trace as ndjson
// and checking it as it is read (CheckReader): lines/s end to end.
func BenchmarkReadCheck(b *testing.B) {
	data, n := benchTrace(b, 200_000)
	if _, err := tracecheck.CheckReader(bytes.NewReader(data), "bench.ndjson"); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := tracecheck.CheckReader(bytes.NewReader(data), "bench.ndjson"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	// On a shared machine wall time counts other processes' turns; the
	// process's own CPU time does not.
	b.ReportMetric(float64(n)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "lines/cpu-s")
}

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCheckEveryField guards that every field of every line is checked:
// a field an action does not carry, set, is rejected at that line; and the
// fields the TLC trace spec checked and the Go checker did not (a
// StartFenced's message, a ReplyFenced's message and request) are checked.
func TestCheckEveryField(t *testing.T) {
	base, err := tracecheck.ReadFile("testdata/ok-fenced-refusals.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line int
		edit func(*core.TraceEvent)
		rule string
	}{
		{1, func(e *core.TraceEvent) { e.Run = 1 }, "line.run"},               // Post
		{1, func(e *core.TraceEvent) { e.Lease = "h-0b11" }, "line.lease"},    // Post
		{1, func(e *core.TraceEvent) { e.Kind = "run" }, "line.kind"},         // Post
		{2, func(e *core.TraceEvent) { e.Msg = 1 }, "line.msg"},               // Claim
		{3, func(e *core.TraceEvent) { e.Lease = "h-0b11" }, "line.lease"},    // Plan
		{3, func(e *core.TraceEvent) { e.Run = 1 }, "line.run"},               // Plan
		{3, func(e *core.TraceEvent) { e.Now = 1 }, "line.now"},               // Plan
		{6, func(e *core.TraceEvent) { e.Req = 1 }, "line.req"},               // RunStart
		{6, func(e *core.TraceEvent) { e.Msg = 2 }, "line.msg"},               // RunStart
		{7, func(e *core.TraceEvent) { e.Msg = 2 }, "line.msg"},               // StartFenced: plan[p].msg
		{7, func(e *core.TraceEvent) { e.Msg = 0 }, "line.msg"},               // StartFenced
		{7, func(e *core.TraceEvent) { e.Run = 1 }, "line.run"},               // StartFenced
		{7, func(e *core.TraceEvent) { e.Lease = "" }, "line.lease"},          // StartFenced: as refused
		{8, func(e *core.TraceEvent) { e.Lease = "h-0b22" }, "line.lease"},    // Ask
		{9, func(e *core.TraceEvent) { e.Req = 1 }, "line.req"},               // RunEnd
		{14, func(e *core.TraceEvent) { e.Run = 1 }, "line.run"},              // Reply
		{15, func(e *core.TraceEvent) { e.Msg = 3 }, "line.msg"},              // ReplyFenced: plan[p].msg
		{15, func(e *core.TraceEvent) { e.Req = 2 }, "line.req"},              // ReplyFenced: plan[p].req
		{15, func(e *core.TraceEvent) { e.Req = 0 }, "line.req"},              // ReplyFenced
		{15, func(e *core.TraceEvent) { e.Taken = 1 }, "line.taken"},          // ReplyFenced
		{17, func(e *core.TraceEvent) { e.Req = 1 }, "line.req"},              // a run plan's request is 0
		{20, func(e *core.TraceEvent) { e.Msg = 3 }, "line.msg"},              // Abandon
		{21, func(e *core.TraceEvent) { e.Lease = "h-0b44" }, "line.lease"},   // EndRefused
		{21, func(e *core.TraceEvent) { e.Run = 1 }, "line.run"},              // EndRefused
		{23, func(e *core.TraceEvent) { e.Lease = "" }, "line.lease"},         // a Release that writes nothing
		{23, func(e *core.TraceEvent) { e.Replaced = 5 }, "line.replaced"},    // Release
		{24, func(e *core.TraceEvent) { e.Lease = "h-0b55" }, "line.lease"},   // a Release that clears the lease
		{24, func(e *core.TraceEvent) { e.Kind = "reply" }, "line.kind"},      // Release
		{24, func(e *core.TraceEvent) { e.Holder = "h-0b44" }, "line.holder"}, // Release
		{24, func(e *core.TraceEvent) { e.Proc = "p2" }, `pc[p] = "claimed"`}, // Release by an idle process
		{24, func(e *core.TraceEvent) { e.Read = true }, "tick"},              // a write's tick on a read
		{10, func(e *core.TraceEvent) { e.Holder = "h-0b22" }, "line.holder"}, // Post
		{22, func(e *core.TraceEvent) { e.Lease = "h-0b44" }, "line.lease"},   // Claim: the new holder
		{22, func(e *core.TraceEvent) { e.Holder = "h-0b22" }, `hold'[p] = nextHolder (a fresh holder)`},
	} {
		lines := slices.Clone(base)
		tc.edit(&lines[tc.line-1])
		_, err := tracecheck.Check(lines)
		var v *tracecheck.Violation
		if !asViolation(err, &v) || v.Line != tc.line || v.Rule != tc.rule {
			t.Errorf("line %d (%s) edited: want %q there, got %v", tc.line, base[tc.line-1].Action, tc.rule, err)
		}
	}
}

// TestOrderRuleAtTheLine guards the order rule's messages: the line out of
// order is the one rejected, with ErrOrder and why.
func TestOrderRuleAtTheLine(t *testing.T) {
	base, err := tracecheck.ReadFile("testdata/ok-run-ask-reply.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	swap := func(i, j int) []core.TraceEvent {
		l := slices.Clone(base)
		l[i-1], l[j-1] = l[j-1], l[i-1]
		return l
	}
	for _, tc := range []struct {
		name  string
		lines []core.TraceEvent
		line  int
		says  string
	}{
		// The Plan (a read of tick 3) before the Renew that wrote tick 3.
		{"read runs ahead", swap(3, 4), 3, "the read runs ahead"},
		// The Ask (tick 5) before the RunStart (tick 4).
		{"write ahead", swap(5, 6), 5, "no write of tick 4 before it"},
		// A line replayed: the RunStart again at the end.
		{"write replayed", append(slices.Clone(base), base[4]), len(base) + 1, "out of order (it belongs earlier) or replayed"},
		// A read of tick 3 after the write of tick 4.
		{"read behind", append(slices.Clone(base[:5]), base[3]), 6, "the read is out of order (it belongs before that write)"},
		// The first write must be tick 1.
		{"first write", base[1:], 1, "no write of tick 1 before it"},
	} {
		_, err := tracecheck.Check(tc.lines)
		var v *tracecheck.Violation
		if !asViolation(err, &v) || v.Line != tc.line || !errors.Is(err, tracecheck.ErrOrder) || !strings.Contains(v.Detail, tc.says) {
			t.Errorf("%s: want an order violation at line %d saying %q, got %v", tc.name, tc.line, tc.says, err)
		}
	}
}

// TestTiming guards the Claim and Renew timing checks: expires = now +
// ttl with ttl > 0, replaced is the replaced lease's last stamped expiry,
// and a Claim over another holder's lease only once the claimant's clock
// has reached that expiry (Stats.EarlyClaims); traces without timing skip
// them.
func TestTiming(t *testing.T) {
	base, err := tracecheck.ReadFile("testdata/ok-fenced-refusals.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	st, err := tracecheck.Check(base)
	if err != nil || st.TimedLines != 5 || st.EarlyClaims != 0 || st.LiveLapses == 0 {
		t.Fatalf("the fixture: %+v, %v", st, err)
	}
	sec := int64(time.Second)
	for _, tc := range []struct {
		name string
		line int
		edit func(*core.TraceEvent)
		rule string
	}{
		// p2 takes p1's lease 2 s before it expires by p2's own clock:
		// the claim core must refuse.
		{"early claim", 4, func(e *core.TraceEvent) { e.Now = e.Replaced - 2*sec; e.Expires = e.Now + e.TTL }, "lease.expired by the claimant's clock"},
		{"expiry not now+ttl", 2, func(e *core.TraceEvent) { e.Expires += sec }, "line.expires"},
		{"no ttl", 2, func(e *core.TraceEvent) { e.TTL = 0 }, "line.ttl"},
		{"negative ttl", 2, func(e *core.TraceEvent) { e.TTL, e.Expires = -sec, e.Now-sec }, "line.ttl"},
		{"no now", 2, func(e *core.TraceEvent) { e.Now = 0 }, "line.now"},
		{"replaced a free lease", 2, func(e *core.TraceEvent) { e.Replaced = e.Now }, "line.replaced"},
		{"replaced missing", 4, func(e *core.TraceEvent) { e.Replaced = 0 }, "line.replaced"},
		{"replaced another expiry", 4, func(e *core.TraceEvent) { e.Replaced -= sec }, "line.replaced"},
	} {
		lines := slices.Clone(base)
		tc.edit(&lines[tc.line-1])
		st, err := tracecheck.Check(lines)
		var v *tracecheck.Violation
		if !asViolation(err, &v) || v.Line != tc.line || v.Rule != tc.rule {
			t.Errorf("%s: want %q at line %d, got %v", tc.name, tc.rule, tc.line, err)
		}
		if tc.name == "early claim" && st.EarlyClaims != 1 {
			t.Errorf("early claim: stats %+v", st)
		}
	}
	// A Renew that does not move the expiry (the old expiry written back).
	g, err := tracecheck.ReadFile("testdata/ok-run-ask-reply.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	g[2].Now += 3 * sec
	var v *tracecheck.Violation
	if _, err := tracecheck.Check(g); !asViolation(err, &v) || v.Line != 3 || v.Rule != "line.expires" {
		t.Errorf("a Renew that keeps the old expiry: want line.expires at line 3, got %v", err)
	}
	// Without timing, every check is skipped: an old trace still passes.
	old := slices.Clone(base)
	for i := range old {
		old[i].Now, old[i].TTL, old[i].Expires, old[i].Replaced = 0, 0, 0, 0
	}
	if st, err := tracecheck.Check(old); err != nil || st.TimedLines != 0 {
		t.Errorf("without timing: %+v, %v", st, err)
	}
}

// TestEmptyAndUnreadable guards the input contract's edges in the
// package: an empty trace and /dev/null are ErrEmpty (never a pass); a
// directory and a missing file are a *LineError at line 0.
func TestEmptyAndUnreadable(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.ndjson")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{empty, os.DevNull} {
		if _, err := tracecheck.CheckFile(p); !errors.Is(err, tracecheck.ErrEmpty) || !errors.Is(err, tracecheck.ErrMalformed) {
			t.Errorf("%s: want ErrEmpty, got %v", p, err)
		}
		if _, err := tracecheck.ReadFile(p); !errors.Is(err, tracecheck.ErrEmpty) {
			t.Errorf("ReadFile %s: want ErrEmpty, got %v", p, err)
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, "missing.ndjson")} {
		_, err := tracecheck.CheckFile(p)
		var le *tracecheck.LineError
		if !errors.As(err, &le) || le.Line != 0 || le.File != p || !strings.HasPrefix(err.Error(), p+": ") {
			t.Errorf("%s: want a *LineError at line 0, got %v", p, err)
		}
	}
}

// synthTrace is an io.Reader of a long valid trace made on the fly, so that
// a check of millions of lines needs no file: threads take turns, each
// round a Post, a Claim with a fresh holder, a Plan, a RunStart, an Ask, a
// RunEnd, a Plan and Reply that answer the request after a second Post,
// and a Release.
type synthTrace struct {
	threads, lines, n int
	round             []int // per thread: rounds done
	tick              []uint64
	buf               []byte
}

func (s *synthTrace) Read(p []byte) (int, error) {
	for len(s.buf) < len(p) && s.n < s.lines {
		th := s.n / 10 % s.threads
		r, i := s.round[th], s.n%10
		s.tick[th]++
		tk := s.tick[th]
		m := int64(2*r) + 1 // the round's first message
		h := fmt.Sprintf("h-%d-%d", th, r)
		line := func(read bool, action, proc, holder string, msg, req, run, taken int64, lease, extra string) {
			if read {
				s.tick[th]--
				tk = s.tick[th]
			}
			s.buf = fmt.Appendf(s.buf, `{"tick":%d,"read":%t,"action":%q,"thread":"t%d","proc":%q,"holder":%q,"msg":%d,"req":%d,"run":%d,"taken":%d,"lease":%q%s}`+"\n",
				tk, read, action, th, proc, holder, msg, req, run, taken, lease, extra)
		}
		switch i {
		case 0:
			line(false, "Post", "poster", "", m, 0, 0, m-1, "", "")
		case 1:
			line(false, "Claim", "p1", h, 0, 0, 0, m-1, h, "")
		case 2:
			line(true, "Plan", "p1", h, m, 0, 0, m-1, "", `,"kind":"run"`)
		case 3:
			line(false, "RunStart", "p1", h, m, 0, int64(r+1), m, h, "")
		case 4:
			line(false, "Ask", "p1", h, 0, int64(r+1), int64(r+1), m, "", "")
		case 5:
			line(false, "RunEnd", "p1", h, 0, 0, int64(r+1), m, "", "")
		case 6:
			line(false, "Post", "poster", "", m+1, 0, 0, m, "", "")
		case 7:
			line(true, "Plan", "p1", h, m+1, int64(r+1), 0, m, "", `,"kind":"reply"`)
		case 8:
			line(false, "Reply", "p1", h, m+1, int64(r+1), 0, m+1, h, "")
		case 9:
			line(false, "Release", "p1", h, 0, 0, 0, m+1, "", "")
			s.round[th]++
		}
		s.n++
	}
	if len(s.buf) == 0 {
		return 0, io.EOF
	}
	k := copy(p, s.buf)
	s.buf = s.buf[:copy(s.buf, s.buf[k:])]
	return k, nil
}

func newSynthTrace(threads, lines int) *synthTrace {
	return &synthTrace{threads: threads, lines: lines, round: make([]int, threads), tick: make([]uint64, threads)}
}

// BenchmarkReadCheckLarge streams a 10-million-line trace through
// CheckReader and reports the heap in use at the end and the process's
// peak resident memory: the reader's memory does not grow with the trace;
// the checker's grows with what the spec's state holds (messages, runs,
// requests and claims of each thread), a few bytes a line, never the
// lines themselves. Run it alone: go test ./tracecheck -run '^$' -bench ReadCheckLarge -benchtime 1x
func BenchmarkReadCheckLarge(b *testing.B) {
	const lines = 10_000_000
	for b.Loop() {
		st, err := tracecheck.CheckReader(newSynthTrace(100, lines), "synth.ndjson")
		if err != nil || st.Lines != lines {
			b.Fatalf("%d lines: %v", st.Lines, err)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(ru.Maxrss)/(1<<10), "maxrss-MiB")
	b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// The synthetic trace is a behaviour of the spec (a short one checks).
func TestSynthTraceIsValid(t *testing.T) {
	st, err := tracecheck.CheckReader(newSynthTrace(3, 1000), "synth.ndjson")
	if err != nil || st.Lines != 1000 {
		t.Fatalf("%+v: %v", st, err)
	}
}

// TestCheckManyProcesses runs threads with more processes than the
// checker compares one by one (it looks them up in a map past eight):
// fenced traces are accepted, and with the fences off the checker still
// catches the unfenced writes.
func TestCheckManyProcesses(t *testing.T) {
	caught := 0
	for seed := uint64(1); seed <= 4; seed++ {
		g := newTraceGen(t, genConfig{seed: seed, threads: 2, procs: 12, fences: core.AllFences()})
		lines := g.run(t, 3000)
		if st, err := tracecheck.Check(lines); err != nil || st.Lines != len(lines) {
			t.Fatalf("seed %d, fenced: %d of %d lines: %v", seed, st.Lines, len(lines), err)
		}
		g = newTraceGen(t, genConfig{seed: seed, threads: 2, procs: 12, fences: core.Fences{}})
		if _, err := tracecheck.Check(g.run(t, 3000)); err != nil {
			caught++
		}
	}
	if caught == 0 {
		t.Error("no unfenced trace of 12 processes was rejected")
	}
}
