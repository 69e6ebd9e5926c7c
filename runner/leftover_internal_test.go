package runner

import (
	"context"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/store/memory"
)

// A turn's end that finds the leftover's first thread held by another
// holder (a claim of this Run found it so) or worked by a turn of this
// Run passes over it to the next, and claims that one: it does not stop
// at the thread it skips. Sweep 3 of the mutation passes: a leftover
// that stopped there left the next thread for a later turn's end or poll,
// and no test failed.
func TestLeftoverPassesOverHeldAndBusy(t *testing.T) {
	for _, why := range []string{"held", "busy"} {
		t.Run(why, func(t *testing.T) {
			clock := coretest.NewClock(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
			ws := core.NewWorkspace(memory.New(), clock)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for _, id := range []core.ThreadID{"x", "y"} {
				if err := ws.CreateThread(ctx, id); err != nil {
					t.Fatal(err)
				}
				if _, err := ws.Post(ctx, id, "m"); err != nil {
					t.Fatal(err)
				}
			}
			turned := make(chan core.ThreadID, 2)
			r, err := New(Config{Workspace: ws, MaxConcurrentTurns: 1,
				Agent:  AgentFunc(func(context.Context, *Session) error { return nil }),
				OnTurn: func(rep TurnReport) { turned <- rep.Thread }})
			if err != nil {
				t.Fatal(err)
			}
			s := r.newScheduler(ctx)
			s.leftover, s.leftAt = []core.ThreadID{"x", "y"}, clock.Now()
			if why == "held" {
				s.held["x"] = clock.Now()
			} else {
				s.busy["x"] = true
			}
			s.launchLeftover()
			if len(s.leftover) != 0 {
				t.Fatalf("the leftover after the turn's end: %v, want none (y claimed, x passed over)", s.leftover)
			}
			select {
			case id := <-turned:
				if id != "y" {
					t.Fatalf("a turn on %s, want one on y", id)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("timed out after 10s waiting for the turn on y")
			}
			cancel()
			s.wg.Wait()
			if len(turned) != 0 {
				t.Fatalf("a turn more, on %s", <-turned)
			}
		})
	}
}
