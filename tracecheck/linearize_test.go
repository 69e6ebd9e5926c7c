package tracecheck_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// linWorkload runs clients as real goroutines over one store/memory, each
// with its own manual clock that it alone advances (so clocks drift apart and
// leases lapse under live holders), making the runner's calls in rounds:
// claim, read taken, plan, abandon, start or reply, ask, renew, end,
// release. Its lease and fenced-consume calls are recorded in a History
// with a monotonic clock.
type linWorkload struct {
	clients  int
	threads  int
	rounds   int // per client
	seed     uint64
	fences   core.Fences
	minOps   int // stop once the history holds this many (0: run every round)
	hist     *tracecheck.History
	claimTTL time.Duration
}

func (wl *linWorkload) run(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	store := memory.New()
	start := time.Now()
	wl.hist = tracecheck.NewHistory(func() int64 { return time.Since(start).Nanoseconds() })
	wl.claimTTL = 10 * time.Second
	setup := core.NewWorkspace(store, core.SystemClock{})
	var ids []core.ThreadID
	for i := range wl.threads {
		id := core.ThreadID(fmt.Sprintf("t%d", i+1))
		if err := setup.CreateThread(ctx, id); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, id)
	}
	epoch := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	errs := make(chan error, wl.clients)
	var wg sync.WaitGroup
	for c := range wl.clients {
		wg.Go(func() {
			clock := coretest.NewClock(epoch)
			w := core.NewWorkspace(store, clock, core.WithProcess(fmt.Sprintf("c%d", c)), core.WithFencesForTesting(wl.fences))
			lc := &tracecheck.LinClient{ID: c, W: w, H: wl.hist}
			rng := rand.New(rand.NewPCG(wl.seed, uint64(c)))
			for round := 0; round < wl.rounds && (wl.minOps == 0 || wl.hist.Len() < wl.minOps); round++ {
				if err := wl.round(ctx, lc, clock, rng, ids, fmt.Sprintf("c%d-%d", c, round)); err != nil {
					errs <- fmt.Errorf("client %d round %d: %w", c, round, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

func (wl *linWorkload) round(ctx context.Context, lc *tracecheck.LinClient, clock *coretest.Clock, rng *rand.Rand, ids []core.ThreadID, holder string) error {
	id := ids[rng.IntN(len(ids))]
	tick := func() {
		clock.Advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
		if rng.IntN(10) == 0 {
			clock.Advance(wl.claimTTL)
		}
		runtime.Gosched()
	}
	if rng.IntN(2) == 0 {
		if _, err := lc.W.Post(ctx, id, "m"); err != nil {
			return err
		}
	}
	tick()
	cl, err := lc.Claim(ctx, id, core.Holder(holder), wl.claimTTL)
	if errors.Is(err, core.ErrThreadBusy) {
		return nil
	} else if err != nil {
		return err
	}
	for range 4 {
		if _, err := lc.Taken(ctx, id); err != nil {
			return err
		}
		plan, err := lc.W.Plan(ctx, cl)
		if err != nil {
			return err
		}
		tick()
		switch plan.Kind {
		case core.PlanNothing:
			return lc.Release(ctx, cl)
		case core.PlanAbandon:
			for _, r := range plan.Runs {
				if err := lc.W.Abandon(ctx, cl, r); errors.Is(err, core.ErrThreadBusy) {
					return nil
				} else if err != nil && !errors.Is(err, core.ErrRunNotActive) && !errors.Is(err, core.ErrRunAbandoned) {
					return err
				}
			}
		case core.PlanReply:
			err := lc.Reply(ctx, cl, plan.Request, plan.Message)
			if errors.Is(err, core.ErrAlreadyAnswered) {
				return lc.W.Crash(ctx, cl) // unfenced only: the round is given up
			} else if errors.Is(err, core.ErrThreadBusy) {
				return nil
			} else if err != nil {
				return err
			}
		case core.PlanRun:
			run, err := lc.RunStart(ctx, cl, plan.Message)
			if errors.Is(err, core.ErrThreadBusy) {
				return nil
			} else if err != nil {
				return err
			}
			if rng.IntN(3) == 0 {
				if _, err := lc.W.Ask(ctx, cl, run, "q"); err != nil && !errors.Is(err, core.ErrRunAbandoned) {
					return err
				}
			}
			tick()
			if rng.IntN(2) == 0 {
				if err := lc.Renew(ctx, cl, wl.claimTTL); err != nil && !errors.Is(err, core.ErrThreadBusy) {
					return err
				}
			}
			if err := lc.W.RunEnd(ctx, cl, run, ""); errors.Is(err, core.ErrRunAbandoned) {
				return nil
			} else if err != nil {
				return err
			}
		}
	}
	return lc.Release(ctx, cl)
}

func countLin(ops []porcupine.Operation) map[string]int {
	n := map[string]int{}
	for _, op := range ops {
		in, out := op.Input.(tracecheck.LinInput), op.Output.(tracecheck.LinOutput)
		n[in.Kind.String()+"/"+out.Status.String()]++
	}
	return n
}

// TestLinearizableFenced guards the fences under real concurrency: the
// lease and fenced-consume operations of racing clients, whose clocks
// drift so that leases lapse under live holders, are linearizable
// against LeaseModel.
func TestLinearizableFenced(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		wl := &linWorkload{clients: 4, threads: 2, rounds: 150, seed: seed, fences: core.AllFences()}
		wl.run(t)
		ops := wl.hist.Operations()
		counts := countLin(ops)
		if counts["RunStart/busy"]+counts["Reply/busy"] == 0 || counts["Claim/ok"] < 10 {
			t.Logf("seed %d: few lapses under live holders: %v", seed, counts)
		}
		html := filepath.Join(t.TempDir(), "history.html")
		res, err := tracecheck.CheckLinearizable(ops, 30*time.Second, html)
		if res != porcupine.Ok || err != nil {
			t.Fatalf("seed %d: %v (%v); %d operations %v", seed, res, err, len(ops), counts)
		}
		t.Logf("seed %d: %d operations linearizable: %v", seed, len(ops), counts)
	}
}

// TestLinearizableUnfencedMutant guards that the check bites on the same
// concurrent workload with the fences off: the history is Illegal. It
// depends on real-time races, so it is slow (skipped with -short);
// TestUnfencedNotLinearizable is its deterministic twin.
func TestLinearizableUnfencedMutant(t *testing.T) {
	if testing.Short() {
		t.Skip("slow, real-time: TestUnfencedNotLinearizable is its deterministic twin")
	}
	illegal := 0
	for seed := uint64(1); seed <= 3; seed++ {
		wl := &linWorkload{clients: 4, threads: 2, rounds: 150, seed: seed, fences: core.Fences{}}
		wl.run(t)
		res, err := tracecheck.CheckLinearizable(wl.hist.Operations(), 30*time.Second, filepath.Join(t.TempDir(), "mutant.html"))
		switch res {
		case porcupine.Illegal:
			illegal++
		case porcupine.Unknown:
			t.Fatalf("seed %d: %v", seed, err)
		}
		t.Logf("seed %d: %v", seed, res)
	}
	if illegal == 0 {
		t.Fatal("the unfenced workload's histories were all linearizable")
	}
}

// TestUnfencedNotLinearizable guards that the model bites: with the fences
// off, ADR-0069's schedule (two holders both start the same prompt) is
// Illegal, and porcupine's visualisation is written.
func TestUnfencedNotLinearizable(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	var n int64
	hist := tracecheck.NewHistory(func() int64 { n++; return n }) // one call at a time
	epoch := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	clockA, clockB := coretest.NewClock(epoch), coretest.NewClock(epoch)
	a := &tracecheck.LinClient{ID: 0, H: hist, W: core.NewWorkspace(store, clockA, core.WithFencesForTesting(core.Fences{}))}
	b := &tracecheck.LinClient{ID: 1, H: hist, W: core.NewWorkspace(store, clockB, core.WithFencesForTesting(core.Fences{}))}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.W.CreateThread(ctx, "t1"))
	_, err := a.W.Post(ctx, "t1", "hello")
	must(err)
	ttl := 10 * time.Second
	ca, err := a.Claim(ctx, "t1", "hA", ttl)
	must(err)
	pa, err := a.W.Plan(ctx, ca) // A plans m1, then stalls
	must(err)
	clockB.Advance(ttl + time.Second) // B's clock runs ahead: A's lease has expired by it
	cb, err := b.Claim(ctx, "t1", "hB", ttl)
	must(err)
	pb, err := b.W.Plan(ctx, cb)
	must(err)
	_, err = b.RunStart(ctx, cb, pb.Message)
	must(err)
	_, err = a.RunStart(ctx, ca, pa.Message) // unfenced: commits under B's lease
	must(err)
	_, err = a.Taken(ctx, "t1")
	must(err)

	html := filepath.Join(t.TempDir(), "out", "unfenced.html") // its directory made for it
	res, err := tracecheck.CheckLinearizable(hist.Operations(), 10*time.Second, html)
	if res != porcupine.Illegal || !errors.Is(err, tracecheck.ErrNotLinearizable) {
		t.Fatalf("want Illegal, got %v (%v)", res, err)
	}
	if fi, statErr := os.Stat(html); statErr != nil || fi.Size() == 0 {
		t.Fatalf("no visualisation written: %v", statErr)
	}
	t.Log(err)

	// The same schedule fenced: A's start is refused, and the history is
	// linearizable.
	fenced := tracecheck.NewHistory(func() int64 { n++; return n })
	store = memory.New()
	clockA, clockB = coretest.NewClock(epoch), coretest.NewClock(epoch)
	a = &tracecheck.LinClient{ID: 0, H: fenced, W: core.NewWorkspace(store, clockA)}
	b = &tracecheck.LinClient{ID: 1, H: fenced, W: core.NewWorkspace(store, clockB)}
	must(a.W.CreateThread(ctx, "t1"))
	_, err = a.W.Post(ctx, "t1", "hello")
	must(err)
	ca, err = a.Claim(ctx, "t1", "hA", ttl)
	must(err)
	pa, err = a.W.Plan(ctx, ca)
	must(err)
	clockB.Advance(ttl + time.Second)
	cb, err = b.Claim(ctx, "t1", "hB", ttl)
	must(err)
	pb, err = b.W.Plan(ctx, cb)
	must(err)
	_, err = b.RunStart(ctx, cb, pb.Message)
	must(err)
	if _, err := a.RunStart(ctx, ca, pa.Message); !errors.Is(err, core.ErrThreadBusy) {
		t.Fatalf("fenced start under another's lease: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if res, err := tracecheck.CheckLinearizable(fenced.Operations(), 10*time.Second, filepath.Join(dir, "fenced.html")); res != porcupine.Ok {
		t.Fatalf("fenced schedule: %v (%v)", res, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a linearizable history wrote %s: %v", dir, err)
	}
}

// stampedRecorder keeps trace lines that core stamps with call and return
// times (core.TraceClock).
type stampedRecorder struct {
	mu    sync.Mutex
	start time.Time
	lines []core.TraceEvent
}

func (r *stampedRecorder) TraceNow() int64 { return time.Since(r.start).Nanoseconds() }

func (r *stampedRecorder) Trace(ev core.TraceEvent) {
	r.mu.Lock()
	r.lines = append(r.lines, ev)
	r.mu.Unlock()
}

// TestOperationsFromTrace guards the history built from stamped trace
// lines: the fenced generator's concurrent trace is linearizable, the
// mutant's is not.
func TestOperationsFromTrace(t *testing.T) {
	for _, tc := range []struct {
		fences core.Fences
		want   porcupine.CheckResult
	}{{core.AllFences(), porcupine.Ok}, {core.Fences{}, porcupine.Illegal}} {
		rec := &stampedRecorder{start: time.Now()}
		ctx := context.Background()
		store := memory.New()
		epoch := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
		a := core.NewWorkspace(store, coretest.NewClock(epoch), core.WithProcess("p1"), core.WithTracer(rec), core.WithFencesForTesting(tc.fences))
		clockB := coretest.NewClock(epoch)
		b := core.NewWorkspace(store, clockB, core.WithProcess("p2"), core.WithTracer(rec), core.WithFencesForTesting(tc.fences))
		if err := a.CreateThread(ctx, "t1"); err != nil {
			t.Fatal(err)
		}
		_, _ = a.Post(ctx, "t1", "m")
		ca, _ := a.Claim(ctx, "t1", "hA", 10*time.Second)
		pa, _ := a.Plan(ctx, ca)
		clockB.Advance(11 * time.Second)
		cb, _ := b.Claim(ctx, "t1", "hB", 10*time.Second)
		pb, _ := b.Plan(ctx, cb)
		_, _ = b.RunStart(ctx, cb, pb.Message)
		_, _ = a.RunStart(ctx, ca, pa.Message)
		_ = b.RunEnd(ctx, cb, 1, "")
		_ = b.Release(ctx, cb)
		ops := tracecheck.OperationsFromTrace(rec.lines)
		if len(ops) != 5 {
			t.Fatalf("want 5 operations, got %d", len(ops))
		}
		if res, err := tracecheck.CheckLinearizable(ops, 10*time.Second, ""); res != tc.want {
			t.Errorf("fences %+v: want %v, got %v (%v)", tc.fences, tc.want, res, err)
		}
	}
}

// TestOperationsFromTraceKeepsTimes guards the history's real-time
// order: each operation is called and returns when its line says. A's
// second start, called after B's Claim returned, cannot go before it,
// and B holds the lease then: not linearizable. Called before B's Claim,
// it is. (The sixth mutation pass: operations all called at time 0 made
// every pair concurrent, and no test failed.)
func TestOperationsFromTraceKeepsTimes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		startAt int64 // A's second start: called at startAt, returns at startAt+1
		claimB  int64 // B's Claim: the same
		want    porcupine.CheckResult
	}{
		{"A's start after B's claim", 7, 5, porcupine.Illegal},
		{"A's start before B's claim", 5, 7, porcupine.Ok},
	} {
		lines := []core.TraceEvent{
			{Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: "hA", Call: 1, Return: 2},
			{Action: core.ActionRunStart, Thread: "t1", Proc: "p1", Holder: "hA", Msg: 1, Run: 1, Call: 3, Return: 4},
			{Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: "hB", Call: tc.claimB, Return: tc.claimB + 1},
			{Action: core.ActionRunStart, Thread: "t1", Proc: "p1", Holder: "hA", Msg: 2, Run: 2, Call: tc.startAt, Return: tc.startAt + 1},
		}
		ops := tracecheck.OperationsFromTrace(lines)
		if len(ops) != 4 {
			t.Fatalf("%s: want 4 operations, got %d", tc.name, len(ops))
		}
		if res, err := tracecheck.CheckLinearizable(ops, 10*time.Second, ""); res != tc.want {
			t.Errorf("%s: want %v, got %v (%v)", tc.name, tc.want, res, err)
		}
	}
}

// TestOperationsFromTraceRefusals guards what each refusal line is in
// the history: StartFenced and ReplyFenced are fenced writes refused as
// busy, which the holder of the lease cannot be told, and SteerRefused is
// a record refused because its run was abandoned, which consumes
// nothing: the next holder's start of the same message is its first
// consumption. (The sixth mutation pass: a ReplyFenced line left out of
// the history, or a SteerRefused line taken for a record that succeeded,
// failed no test.)
func TestOperationsFromTraceRefusals(t *testing.T) {
	claimA := core.TraceEvent{Action: core.ActionClaim, Thread: "t1", Proc: "p1", Holder: "hA", Call: 1, Return: 2}
	startA := core.TraceEvent{Action: core.ActionRunStart, Thread: "t1", Proc: "p1", Holder: "hA", Msg: 1, Run: 1, Call: 3, Return: 4}
	for _, tc := range []struct {
		name  string
		lines []core.TraceEvent
		want  porcupine.CheckResult
	}{
		{"StartFenced under its own lease", []core.TraceEvent{claimA,
			{Action: core.ActionStartFenced, Thread: "t1", Proc: "p1", Holder: "hA", Msg: 1, Lease: "hA", Call: 3, Return: 4}}, porcupine.Illegal},
		{"ReplyFenced under its own lease", []core.TraceEvent{claimA, startA,
			{Action: core.ActionReplyFenced, Thread: "t1", Proc: "p1", Holder: "hA", Req: 1, Msg: 2, Lease: "hA", Call: 5, Return: 6}}, porcupine.Illegal},
		{"ReplyFenced under another's lease", []core.TraceEvent{claimA, startA,
			{Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: "hB", Call: 5, Return: 6},
			{Action: core.ActionReplyFenced, Thread: "t1", Proc: "p1", Holder: "hA", Req: 1, Msg: 2, Lease: "hB", Call: 7, Return: 8}}, porcupine.Ok},
		{"SteerRefused, then the message started by the next holder", []core.TraceEvent{claimA, startA,
			{Action: core.ActionClaim, Thread: "t1", Proc: "p2", Holder: "hB", Call: 5, Return: 6},
			{Action: core.ActionSteerRefused, Thread: "t1", Proc: "p1", Holder: "hA", Run: 1, Msg: 2, Call: 7, Return: 8},
			{Action: core.ActionRunStart, Thread: "t1", Proc: "p2", Holder: "hB", Msg: 2, Run: 2, Call: 9, Return: 10}}, porcupine.Ok},
	} {
		ops := tracecheck.OperationsFromTrace(tc.lines)
		if len(ops) != len(tc.lines) {
			t.Errorf("%s: want %d operations, got %d", tc.name, len(tc.lines), len(ops))
			continue
		}
		if res, err := tracecheck.CheckLinearizable(ops, 10*time.Second, ""); res != tc.want {
			t.Errorf("%s: want %v, got %v (%v)", tc.name, tc.want, res, err)
		}
	}
}

// unknownCommits is storage whose every write commits and returns
// core.ErrCommitUnknown, as when the reply to COMMIT is lost.
type unknownCommits struct{ core.Storage }

func (s unknownCommits) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	if err := s.Storage.Update(ctx, fn); err != nil {
		return err
	}
	return fmt.Errorf("the reply to COMMIT was lost: %w", core.ErrCommitUnknown)
}

// TestLinClientLeavesOutUnknownOutcomes guards the operations whose
// outcome the model does not know: a Claim whose commit is unknown
// (it committed) is not recorded, since no status says it. (The sixth
// mutation pass: such a Claim recorded as ok failed no test.)
func TestLinClientLeavesOutUnknownOutcomes(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	if err := core.NewWorkspace(store, core.SystemClock{}).CreateThread(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	var n int64
	h := tracecheck.NewHistory(func() int64 { n++; return n })
	c := &tracecheck.LinClient{ID: 0, H: h, W: core.NewWorkspace(unknownCommits{store}, core.SystemClock{})}
	if _, err := c.Claim(ctx, "t1", "hA", 10*time.Second); !errors.Is(err, core.ErrCommitUnknown) {
		t.Fatalf("Claim: want ErrCommitUnknown, got %v", err)
	}
	if got := h.Len(); got != 0 {
		t.Fatalf("a Claim whose commit is unknown was recorded: %d operations %v", got, countLin(h.Operations()))
	}
}

// TestLeaseModel guards the model's specification of each operation.
func TestLeaseModel(t *testing.T) {
	const s = int64(time.Second)
	type op struct {
		in  tracecheck.LinInput
		out tracecheck.LinOutput
	}
	claim := func(h core.Holder, now int64, st tracecheck.LinStatus) op {
		return op{tracecheck.LinInput{Kind: tracecheck.LinClaim, Thread: "t", Holder: h, Now: now, TTL: 10 * time.Second}, tracecheck.LinOutput{Status: st}}
	}
	start := func(h core.Holder, m core.Seq, st tracecheck.LinStatus, run core.RunID) op {
		return op{tracecheck.LinInput{Kind: tracecheck.LinRunStart, Thread: "t", Holder: h, Msg: m}, tracecheck.LinOutput{Status: st, Run: run}}
	}
	reply := func(h core.Holder, q core.RequestID, m core.Seq, st tracecheck.LinStatus) op {
		return op{tracecheck.LinInput{Kind: tracecheck.LinReply, Thread: "t", Holder: h, Req: q, Msg: m}, tracecheck.LinOutput{Status: st}}
	}
	taken := func(m core.Seq) op {
		return op{tracecheck.LinInput{Kind: tracecheck.LinTaken, Thread: "t"}, tracecheck.LinOutput{Taken: m}}
	}
	renew := func(h core.Holder, now int64, st tracecheck.LinStatus) op {
		return op{tracecheck.LinInput{Kind: tracecheck.LinRenew, Thread: "t", Holder: h, Now: now, TTL: 10 * time.Second}, tracecheck.LinOutput{Status: st}}
	}
	release := func(h core.Holder) op {
		return op{tracecheck.LinInput{Kind: tracecheck.LinRelease, Thread: "t", Holder: h}, tracecheck.LinOutput{}}
	}
	steer := func(h core.Holder, r core.RunID, m core.Seq, st tracecheck.LinStatus) op {
		return op{tracecheck.LinInput{Kind: tracecheck.LinSteerRecord, Thread: "t", Holder: h, Run: r, Msg: m}, tracecheck.LinOutput{Status: st}}
	}
	for _, tc := range []struct {
		name string
		ops  []op
		ok   bool
	}{
		{"claim free", []op{claim("a", 0, tracecheck.LinOK)}, true},
		{"claim held", []op{claim("a", 0, tracecheck.LinOK), claim("b", 5*s, tracecheck.LinOK)}, false},
		{"claim held busy", []op{claim("a", 0, tracecheck.LinOK), claim("b", 5*s, tracecheck.LinBusy)}, true},
		{"claim expired", []op{claim("a", 0, tracecheck.LinOK), claim("b", 10*s, tracecheck.LinOK)}, true},
		{"claim expired busy", []op{claim("a", 0, tracecheck.LinOK), claim("b", 10*s, tracecheck.LinBusy)}, false},
		{"renew expired not taken", []op{claim("a", 0, tracecheck.LinOK), renew("a", 20*s, tracecheck.LinOK), claim("b", 25*s, tracecheck.LinBusy)}, true},
		{"renew taken", []op{claim("a", 0, tracecheck.LinOK), claim("b", 20*s, tracecheck.LinOK), renew("a", 20*s, tracecheck.LinOK)}, false},
		{"release frees", []op{claim("a", 0, tracecheck.LinOK), release("a"), claim("b", 1, tracecheck.LinOK)}, true},
		{"release of another's", []op{claim("a", 0, tracecheck.LinOK), release("b"), claim("b", 1, tracecheck.LinOK)}, false},
		{"fenced start", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1), taken(1)}, true},
		{"wrong run id", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 2)}, false},
		{"wrong taken", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1), taken(0)}, false},
		{"start under another's lease", []op{claim("a", 0, tracecheck.LinOK), claim("b", 20*s, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1)}, false},
		{"start refused", []op{claim("a", 0, tracecheck.LinOK), claim("b", 20*s, tracecheck.LinOK), start("a", 1, tracecheck.LinBusy, 0)}, true},
		{"start refused wrongly", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinBusy, 0)}, false},
		{"consumed twice", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1), start("a", 1, tracecheck.LinOK, 2)}, false},
		{"reply", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1), reply("a", 1, 2, tracecheck.LinOK), taken(2)}, true},
		{"reply answered", []op{claim("a", 0, tracecheck.LinOK), reply("a", 1, 2, tracecheck.LinOK), reply("a", 1, 3, tracecheck.LinAnswered)}, true},
		{"reply twice", []op{claim("a", 0, tracecheck.LinOK), reply("a", 1, 2, tracecheck.LinOK), reply("a", 1, 3, tracecheck.LinOK)}, false},
		// I1 for answers: a message a start consumed cannot answer
		// (the sixth mutation pass: a Reply that did not check its
		// message failed no test)
		{"reply with a consumed message", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1), reply("a", 1, 1, tracecheck.LinOK)}, false},
		{"reply under another's lease", []op{claim("a", 0, tracecheck.LinOK), claim("b", 20*s, tracecheck.LinOK), reply("a", 1, 2, tracecheck.LinOK)}, false},
		{"steering recorded", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1), steer("a", 1, 2, tracecheck.LinOK), taken(2)}, true},
		// not fenced: a stalled run's record commits under another's lease
		// (storage refuses it only once its run is abandoned)
		{"steering recorded under another's lease", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1),
			claim("b", 20*s, tracecheck.LinOK), steer("a", 1, 2, tracecheck.LinOK), taken(2)}, true},
		{"steering refused, given again", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1),
			claim("b", 20*s, tracecheck.LinOK), steer("a", 1, 2, tracecheck.LinAbandoned), start("b", 2, tracecheck.LinOK, 2), taken(2)}, true},
		{"steering consumed by the next run, then recorded", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1),
			claim("b", 20*s, tracecheck.LinOK), start("b", 2, tracecheck.LinOK, 2), steer("a", 1, 2, tracecheck.LinOK)}, false},
		{"steering recorded twice", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1),
			steer("a", 1, 2, tracecheck.LinOK), steer("a", 1, 2, tracecheck.LinOK)}, false},
		{"steering refused moves nothing", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1),
			steer("a", 1, 2, tracecheck.LinAbandoned), taken(2)}, false},
		// the record is not fenced: refused as busy under another's lease,
		// it would be a fence the spec does not have
		{"steering record refused as busy", []op{claim("a", 0, tracecheck.LinOK), start("a", 1, tracecheck.LinOK, 1),
			claim("b", 20*s, tracecheck.LinOK), steer("a", 1, 2, tracecheck.LinBusy)}, false},
	} {
		var ops []porcupine.Operation
		for i, o := range tc.ops {
			ops = append(ops, porcupine.Operation{ClientId: 0, Input: o.in, Output: o.out, Call: int64(2 * i), Return: int64(2*i + 1)})
		}
		res, _ := tracecheck.CheckLinearizable(ops, 10*time.Second, "")
		if (res == porcupine.Ok) != tc.ok {
			t.Errorf("%s: got %v, want ok=%v", tc.name, res, tc.ok)
		}
	}
}

// BenchmarkPorcupine measures porcupine with LeaseModel on a history of
// at least 100,000 operations from the concurrent workload (8 clients),
// partitioned per thread: 500 threads, and 50 for longer, more contended
// partitions.
func BenchmarkPorcupine(b *testing.B) {
	for _, threads := range []int{500, 50} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			wl := &linWorkload{clients: 8, threads: threads, rounds: 1 << 30, seed: 7, fences: core.AllFences(), minOps: 100_000}
			wl.run(b)
			ops := wl.hist.Operations()
			b.ResetTimer()
			for b.Loop() {
				res, err := tracecheck.CheckLinearizable(ops, 5*time.Minute, "")
				if res != porcupine.Ok {
					b.Fatal(res, err)
				}
			}
			b.ReportMetric(float64(len(ops)), "ops")
		})
	}
}
