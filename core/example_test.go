package core_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
)

// printer prints each trace line's action.
type printer struct{}

func (printer) Trace(ev core.TraceEvent) { fmt.Println(ev.Tick, ev.Action) }

// One claim's round, call by call: claim with a fresh holder, plan, start
// the planned run (fenced), end it, release. Each call is one of the
// specification's actions and traces one line.
func ExampleWorkspace() {
	ctx := context.Background()
	clock := coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC))
	ws := core.NewWorkspace(memory.New(), clock, core.WithProcess("runner-1"), core.WithTracer(printer{}))
	_ = ws.CreateThread(ctx, "t1")
	_, _ = ws.Post(ctx, "t1", "deploy staging")

	c, err := ws.Claim(ctx, "t1", "9f3c2a", 30*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := ws.Plan(ctx, c)
	fmt.Println("plan:", p.Kind, p.Posted.Text)
	run, _ := ws.RunStart(ctx, c, p.Message)
	_ = ws.RunEnd(ctx, c, run, "")
	_ = ws.Release(ctx, c)
	// Output:
	// 1 Post
	// 2 Claim
	// 2 Plan
	// plan: run deploy staging
	// 3 RunStart
	// 4 RunEnd
	// 5 Release
}

// A claim's round ends when a fenced write is refused: another claim has
// the thread. Whatever the caller does with the claim next, a deferred
// Release say, is refused too, and writes and traces nothing.
func ExampleWorkspace_refusedRound() {
	ctx := context.Background()
	s := memory.New()
	start := time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC)
	a := core.NewWorkspace(s, coretest.NewClock(start), core.WithProcess("a"))
	b := core.NewWorkspace(s, coretest.NewClock(start.Add(time.Minute)), core.WithProcess("b")) // b's clock runs ahead
	_ = a.CreateThread(ctx, "t1")
	_, _ = a.Post(ctx, "t1", "hello")

	ca, _ := a.Claim(ctx, "t1", "ha", 30*time.Second)
	p, _ := a.Plan(ctx, ca)
	_, _ = b.Claim(ctx, "t1", "hb", 30*time.Second) // by b's clock, a's lease expired
	_, err := a.RunStart(ctx, ca, p.Message)
	fmt.Println(errors.Is(err, core.ErrThreadBusy))
	err = a.Release(ctx, ca)
	fmt.Println(errors.Is(err, core.ErrRoundOver))
	_, err = a.RunStart(ctx, ca, p.Message)
	fmt.Println(errors.Is(err, core.ErrRoundOver))
	// Output:
	// true
	// true
	// true
}
