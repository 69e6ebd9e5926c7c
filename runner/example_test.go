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

// The quick start, on memory and the machine's clock: an agent that
// replies to the person (Session.Output) and asks a question, and a
// service that follows the thread's events (Workspace.Follow), answers
// the question when it is asked, and stops the runner cleanly.
func ExampleRunner_Run() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ws := core.NewWorkspace(memory.New(), core.SystemClock{})
	_ = ws.CreateThread(ctx, "t1")
	r, err := runner.New(runner.Config{
		Workspace: ws, // its clock is the runner's
		ClaimTTL:  30 * time.Second,
		PollEvery: 20 * time.Millisecond, // memory wakes no runner on a post
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			_ = s.Output("deploying " + s.Delivered.Prompt.Text) // the reply the person sees
			req, err := s.Ask(ctx, "which environment?")
			if err == nil {
				_, err = s.Await(ctx, req) // ends the run; the thread's next message answers
			}
			return err
		}),
	})
	if err != nil {
		fmt.Println(err) // a config error names the field
		return
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	_, _ = ws.Post(ctx, "t1", "the web app")
	_ = ws.Follow(ctx, "t1", 0, func(ev core.ThreadEvent) error {
		switch ev.Kind {
		case core.Asked:
			fmt.Println("agent asks:", ev.Text)
			_, _ = ws.Post(ctx, "t1", "staging")
		case core.RunOutput:
			fmt.Println("agent replies:", ev.Text)
		case core.Answered:
			fmt.Println("answered by message", ev.Message)
			stop() // Follow and Run return nil
		}
		return nil
	})
	fmt.Println("Run:", <-done)
	// Output:
	// agent asks: which environment?
	// agent replies: deploying the web app
	// answered by message 2
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
	o, _ := r.TakeTurn(ctx, "t1") // runs the agent, which asks and waits
	fmt.Println("first turn:", o)
	_, _ = ws.Post(ctx, "t1", "staging")
	o, _ = r.TakeTurn(ctx, "t1") // replies: the answer reaches the agent
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

// The answer to a request is the thread's next unconsumed message,
// whatever it says: a message posted before the question was asked (here
// "also, what's the weather?") answers it. That is the spec's rule (Plan
// answers the oldest open request with the oldest unconsumed message).
func ExampleSession_Await_queuedMessageAnswers() {
	ctx := context.Background()
	clock := coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC))
	ws := core.NewWorkspace(memory.New(), clock)
	_ = ws.CreateThread(ctx, "t1")
	_, _ = ws.Post(ctx, "t1", "deploy")
	_, _ = ws.Post(ctx, "t1", "also, what's the weather?") // queued before the question
	heard := make(chan string, 1)
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
			if err == nil {
				heard <- m.Text
			}
			return err
		}),
	})
	_, _ = r.TakeTurn(ctx, "t1") // the run asks; the same turn answers with message 2
	select {
	case text := <-heard:
		fmt.Println("agent heard:", text)
	case <-time.After(10 * time.Second):
		fmt.Println("timed out waiting for the agent to hear the answer")
	}
	// Output:
	// agent heard: also, what's the weather?
}

// An agent hears a message the person posted while it worked: between
// steps of its work it asks Steer for what was posted after its prompt,
// oldest first. Each message it is given is recorded as the run's
// steering, which consumes it: no later run takes it as a prompt.
func ExampleSession_Steer() {
	ctx := context.Background()
	clock := coretest.NewClock(time.Date(2026, 10, 16, 9, 0, 0, 0, time.UTC))
	ws := core.NewWorkspace(memory.New(), clock)
	_ = ws.CreateThread(ctx, "t1")
	_, _ = ws.Post(ctx, "t1", "deploy the web app")

	working, posted := make(chan struct{}), make(chan struct{})
	r, _ := runner.New(runner.Config{
		Workspace: ws,
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			target := "production"
			close(working)
			<-posted // a step of the work, while the person posts
			for {
				m, ok, err := s.Steer(ctx)
				if err != nil {
					return err
				}
				if !ok {
					break // nothing more was posted
				}
				fmt.Println("agent hears:", m.Text)
				target = "staging"
			}
			return s.Output("deployed to " + target)
		}),
	})
	done := make(chan runner.Outcome, 1)
	go func() {
		o, _ := r.TakeTurn(ctx, "t1")
		done <- o
	}()
	select {
	case <-working:
	case <-time.After(10 * time.Second):
		fmt.Println("timed out waiting for the agent to start")
		return
	}
	_, _ = ws.Post(ctx, "t1", "use staging, not production")
	close(posted)
	select {
	case o := <-done:
		fmt.Println("turn:", o)
	case <-time.After(10 * time.Second):
		fmt.Println("timed out waiting for the turn")
		return
	}
	th, _ := ws.Thread(ctx, "t1")
	fmt.Println("run 1:", th.Runs()[0].Output, "- steering", th.Runs()[0].Steering, "- taken", th.Taken)
	// Output:
	// agent hears: use staging, not production
	// turn: done
	// run 1: deployed to staging - steering [2] - taken 2
}
