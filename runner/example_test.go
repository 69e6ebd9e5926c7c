package runner_test

import (
	"context"
	"fmt"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/core/coretest"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/memory"
)

// A runner over a workspace (the README shows this Example). Run works
// threads until its context ends. Here its one turn claims t1 under a
// fresh holder, plans a run for the posted message, starts it (the
// fenced write that consumes the message), runs the agent, records the
// run's end and releases the thread. OnRun hands over each run's handle
// as soon as it is planned; OnTurn reports each turn, and here ends Run
// after the first.
func ExampleRunner_Run() {
	clock := coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC))
	ws := core.NewWorkspace(memory.New(), clock, core.WithProcess("runner-1"))
	_ = ws.CreateThread(context.Background(), "t1")
	_, _ = ws.Post(context.Background(), "t1", "deploy staging")

	ctx, cancel := context.WithCancel(context.Background())
	r, err := runner.New(runner.Config{
		Workspace: ws, // its clock is the runner's
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			fmt.Println("agent:", s.Delivered.Prompt.Text)
			return nil
		}),
		ClaimTTL: 30 * time.Second,
		OnRun: func(h *runner.RunHandle) {
			fmt.Println("planned a run for message", h.Prompt)
		},
		OnTurn: func(rep runner.TurnReport) {
			fmt.Println("turn:", rep.Thread, rep.Outcome, "consumed", rep.Consumed)
			cancel()
		},
	})
	if err != nil {
		fmt.Println(err) // a config error names the field
		return
	}
	err = r.Run(ctx)
	fmt.Println("Run:", err)
	// Output:
	// planned a run for message 1
	// agent: deploy staging
	// turn: t1 done consumed 1
	// Run: <nil>
}

// An agent asks the person a question and waits for the answer: Await
// records the run's end (a request is answered only while no run is
// active), the runner's next turn answers the request with the next
// message (a fenced Reply), and Await returns that message.
func ExampleSession_Await() {
	ctx := context.Background()
	clock := coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC))
	ws := core.NewWorkspace(memory.New(), clock, core.WithProcess("runner-1"))
	_ = ws.CreateThread(ctx, "t1")
	_, _ = ws.Post(ctx, "t1", "deploy")

	heard := make(chan string)
	r, _ := runner.New(runner.Config{
		Workspace: ws,
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			req, err := s.Ask(ctx, "which environment?")
			if err != nil {
				return err
			}
			actx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			m, err := s.Await(actx, req)
			if err != nil {
				return err
			}
			heard <- m.Text
			return nil
		}),
	})
	o, _ := r.Work(ctx, "t1") // runs the agent, which asks and waits
	fmt.Println("first turn:", o)
	_, _ = ws.Post(ctx, "t1", "staging")
	o, _ = r.Work(ctx, "t1") // replies: the answer reaches the agent
	fmt.Println("second turn:", o)
	select {
	case text := <-heard:
		fmt.Println("agent heard:", text)
	case <-time.After(10 * time.Second):
		fmt.Println("timed out waiting for the agent to hear the answer")
	}
	// Output:
	// first turn: done
	// second turn: done
	// agent heard: staging
}
