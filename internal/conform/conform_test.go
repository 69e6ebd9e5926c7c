package conform

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/specmodel"
	"github.com/threadclaim/threadclaim/store/memory"
	"github.com/threadclaim/threadclaim/store/postgres"
)

func readCfg(t testing.TB, path string) specmodel.Config {
	t.Helper()
	c, err := specmodel.ReadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// small is the fenced cfg with three claims and two messages: every action
// and every refusal occurs, in 7,316 states. Under the race detector (the
// driver runs in one goroutine; it has little to find), two claims.
func small(t testing.TB) *specmodel.Graph {
	c := readCfg(t, "../../spec/ThreadClaimLapse.cfg")
	c.MaxClaims, c.MaxMsgs = 3, 2
	if raceEnabled {
		c.MaxClaims = 2
	}
	return specmodel.New(c).Explore()
}

func runCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func requireConforms(t *testing.T, g *specmodel.Graph, rep Report, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("conform could not run (deadline, or storage): %v", err)
	}
	t.Logf("%d states, %d of %d edges, %d refusals asked, %d divergences, %v", rep.States, rep.Driven, rep.Edges, rep.Refusals, rep.Divergences, rep.Elapsed)
	for _, d := range rep.First {
		t.Error(d)
	}
	if rep.Driven != rep.Edges || rep.Edges != g.Result().Generated-1 {
		t.Errorf("%d of %d edges driven", rep.Driven, rep.Edges)
	}
	if rep.Refusals == 0 {
		t.Error("no refusal asked")
	}
}

// TestConformSmall: Go takes every edge of the small cfg's state graph as
// the spec does, refuses every write the spec does not enable, and ends in
// the spec's successor.
func TestConformSmall(t *testing.T) {
	g := small(t)
	rep, err := Run(runCtx(t, 5*time.Minute), g, Options{})
	requireConforms(t, g, rep, err)
}

// TestConformFenced drives every edge of spec/ThreadClaimLapse.cfg's state
// graph (1,044,026 edges of 228,049 states). Not with -short or -race.
func TestConformFenced(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("-short or -race: the full cfg takes about 20 s, ten times that under -race (TestConformSmall runs)")
	}
	g := specmodel.New(readCfg(t, "../../spec/ThreadClaimLapse.cfg")).Explore()
	rep, err := Run(runCtx(t, 15*time.Minute), g, Options{})
	requireConforms(t, g, rep, err)
}

// TestConformCatchesUnfenced: with the fences off, Go diverges from the
// fenced spec: it starts, replies and abandons where the spec refuses.
func TestConformCatchesUnfenced(t *testing.T) {
	g := small(t)
	rep, err := Run(runCtx(t, 5*time.Minute), g, Options{Unfenced: core.AllFences(), Keep: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergences == 0 {
		t.Fatal("the unfenced Workspace conforms to the fenced spec: conform does not bite")
	}
	seen := map[string]bool{}
	for _, d := range rep.First {
		for _, a := range []string{"StartFenced", "ReplyFenced", "AbandonFenced"} {
			if strings.HasPrefix(d.Step, a+"(") {
				seen[a] = true
			}
		}
	}
	for _, a := range []string{"StartFenced", "ReplyFenced", "AbandonFenced"} {
		if !seen[a] {
			t.Errorf("no divergence at %s with the fences off", a)
		}
	}
	t.Logf("%d divergences; first: %s", rep.Divergences, rep.First[0])
}

// TestConformSample drives a seeded sample of edges, committed.
func TestConformSample(t *testing.T) {
	g := small(t)
	rep, err := Run(runCtx(t, 5*time.Minute), g, Options{Sample: 300, Seed: 7})
	if err != nil || rep.Driven != 300 || rep.Divergences != 0 {
		t.Fatalf("%+v, %v", rep, err)
	}
	rep, err = Run(runCtx(t, 5*time.Minute), g, Options{Sample: 300, Seed: 7, Unfenced: core.AllFences()})
	// (300 edges drawn from a graph where about one in ten is a fenced
	// write: the mutant shows.)
	if err != nil || rep.Divergences == 0 {
		t.Fatalf("unfenced sample: %d divergences, %v", rep.Divergences, err)
	}
}

// TestConformPostgres drives a seeded sample of 1,000 edges of the fenced
// cfg through PostgreSQL storage (DATABASE_URL; run it through
// scripts/with-postgres). Without a server it fails, as the project's
// PostgreSQL tests do.
func TestConformPostgres(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: this test needs a real PostgreSQL server; run it through scripts/with-postgres (scripts/with-postgres go test ./internal/conform)")
	}
	ctx := runCtx(t, 10*time.Minute)
	store, err := postgres.Open(ctx, url, postgres.Options{Schema: "tcconform_" + strings.ReplaceAll(t.Name(), "/", "_") + "_" + time.Now().Format("150405.000000")[7:]})
	if err != nil {
		t.Fatalf("open PostgreSQL: %v", err)
	}
	t.Cleanup(func() { _ = store.DropSchema(context.Background()); store.Close() })
	g := specmodel.New(readCfg(t, "../../spec/ThreadClaimLapse.cfg")).Explore()
	opts := Options{Sample: 1000, Seed: 1, NewStorage: func(context.Context) (core.Storage, error) { return store, nil }}
	rep, err := Run(ctx, g, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL: %d of %d sampled edges, %d divergences, %v", rep.Driven, opts.Sample, rep.Divergences, rep.Elapsed)
	for _, d := range rep.First {
		t.Error(d)
	}
	if rep.Driven != opts.Sample {
		t.Errorf("%d of %d sampled edges driven", rep.Driven, opts.Sample)
	}
}

// TestConformPostgresEveryEdge drives every edge of a small cfg through
// PostgreSQL storage, each as a probe rolled back, as conform -storage does
// by default; then the same with every fence off, which must diverge. A
// probe's first write used to be the PostgreSQL Store's one-statement post
// or claim, which commits as it is sent: the rollback kept it, and the
// next probe from the same state saw a message or a lease too many (25
// divergences in the first 23 edges).
func TestConformPostgresEveryEdge(t *testing.T) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: this test needs a real PostgreSQL server; run it through scripts/with-postgres (scripts/with-postgres go test ./internal/conform)")
	}
	ctx := runCtx(t, 5*time.Minute)
	// A schema for each Run: their threads' names are the same.
	schema := func(name string) func(context.Context) (core.Storage, error) {
		store, err := postgres.Open(ctx, url, postgres.Options{Schema: "tcconform_" + name + "_" + time.Now().Format("150405.000000")[7:]})
		if err != nil {
			t.Fatalf("open PostgreSQL: %v", err)
		}
		t.Cleanup(func() { _ = store.DropSchema(context.Background()); store.Close() })
		return func(context.Context) (core.Storage, error) { return store, nil }
	}
	g := specmodel.New(readCfg(t, "../../spec/ThreadClaimLapseNoFairnessOneMsg.cfg")).Explore()
	rep, err := Run(ctx, g, Options{NewStorage: schema("every")})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.First {
		t.Error(d)
	}
	if rep.Driven != rep.Edges || rep.Refusals == 0 {
		t.Errorf("%d of %d edges driven, %d refusals asked; want every edge and some refusals", rep.Driven, rep.Edges, rep.Refusals)
	}
	rep, err = Run(ctx, g, Options{NewStorage: schema("every_unfenced"), Unfenced: core.AllFences()})
	if err != nil || rep.Divergences == 0 {
		t.Fatalf("every fence off: %d divergences, %v; want the mutant caught", rep.Divergences, err)
	}
}

// TestAbstract: the abstraction names holders by their claims' order and
// sees a lease as expired once a process's clock reached its expiry.
func TestAbstract(t *testing.T) {
	c := readCfg(t, "../../spec/ThreadClaimLapse.cfg")
	th := core.NewThread("t")
	th.Messages = []core.Message{{Seq: 1}, {Seq: 2}, {Seq: 3}}
	th.Taken = 1
	th.Apply(core.Event{Kind: core.RunStarted, Run: 1, Holder: "b", Message: 1})
	now := time.Unix(100, 0)
	o := Observed{
		Thread: th, Lease: core.Lease{Thread: "t", Holder: "b", ExpiresAt: now}, Now: now,
		Procs:   []Proc{{}, {PC: specmodel.Steered, Holder: "b", Run: 1, Steer: 2}},
		Holders: []core.Holder{"a", "b"},
		Given:   []uint8{1, 1, 0},
		Steered: []specmodel.Pair{{Run: 1, Msg: 2}},
	}
	s, err := Abstract(c, o)
	if err != nil {
		t.Fatal(err)
	}
	want := "msgs=3 taken=1 lease=h2(expired) runs=[1:h2/m1/active] reqs=[] consumed=[1 0 0] given=[1 1 0] steered={r1/m2} p1:idle p2:steered/h2/plan=steer(m2)/run=1 nextHolder=3"
	if s.String() != want {
		t.Errorf("got  %s\nwant %s", s.String(), want)
	}
	o.Now = now.Add(-time.Second)
	if s, _ := Abstract(c, o); s.Lease.Expired {
		t.Error("a lease before its expiry is expired")
	}
	o.Holders = []core.Holder{"a"}
	if _, err := Abstract(c, o); !errors.Is(err, ErrNotAState) {
		t.Errorf("a holder that made no claim: %v", err)
	}
	o.Holders, o.Given = []core.Holder{"a", "b"}, []uint8{1}
	if _, err := Abstract(c, o); !errors.Is(err, ErrNotAState) {
		t.Errorf("given for one message of three: %v", err)
	}
}

// renewKeepsExpiry is memory storage that writes a Renew's lease with its
// old expiry: a lapsed claim's renewal leaves the lease lapsed. Every call
// still returns what the spec's does (a Renew checks the holder, not the
// expiry), so only Go's state after the edge shows it.
type renewKeepsExpiry struct{ core.Storage }

func (s renewKeepsExpiry) Update(ctx context.Context, fn func(context.Context, core.Transaction) error) error {
	return s.Storage.Update(ctx, func(ctx context.Context, tx core.Transaction) error {
		return fn(ctx, renewKeepsExpiryTx{tx})
	})
}

type renewKeepsExpiryTx struct{ core.Transaction }

func (tx renewKeepsExpiryTx) PutLease(ctx context.Context, l core.Lease) error {
	old, err := tx.Lease(ctx, l.Thread)
	if err != nil {
		return err
	}
	if old.Holder == l.Holder {
		l.ExpiresAt = old.ExpiresAt
	}
	return tx.Transaction.PutLease(ctx, l)
}

// Issue 26: conform checks Go's state after each edge, not only the
// outcome of the call. Fed a storage whose state after a lapsed claim's
// Renew is not the spec's successor (the lease still lapsed) while every
// call returns as the spec's does, it must diverge there; with that check
// disabled, it does not.
func TestConformCatchesWrongState(t *testing.T) {
	g := small(t)
	rep, err := Run(runCtx(t, 5*time.Minute), g, Options{
		NewStorage: func(context.Context) (core.Storage, error) { return renewKeepsExpiry{memory.New()}, nil },
		Keep:       1 << 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	state := 0
	for _, d := range rep.First {
		if strings.HasPrefix(d.Step, "Renew(") && strings.Contains(d.Detail, "not the spec's successor") {
			state++
		}
	}
	if state == 0 {
		t.Fatalf("no Renew diverged in Go's state after it (%d divergences): conform does not check the state after an edge", rep.Divergences)
	}
	t.Logf("%d divergences, %d of them a Renew's state; first: %s", rep.Divergences, state, rep.First[0])
}
