// Command quickstart is the README's quick start on PostgreSQL: an agent
// that replies to the person and asks a question, a service that follows
// the thread's events and answers it, and a clean stop. Run it with
// `scripts/with-postgres go run ./internal/quickstart` (it reads
// DATABASE_URL; -schema names the schema, default "threadclaim").
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/postgres"
)

func main() {
	schema := flag.String("schema", "threadclaim", "the PostgreSQL schema to use (created if missing)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Getenv("DATABASE_URL"), *schema, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run is the quick start on the database url names, in schema, on a
// thread of its own; it writes what the service sees to out.
func run(ctx context.Context, url, schema string, out io.Writer) error {
	st, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	wake, err := st.Wakeups(ctx) // a committed post giving a free thread work wakes the runner
	if err != nil {
		return err
	}
	ws := core.NewWorkspace(st, core.SystemClock{})
	thread := core.ThreadID(fmt.Sprintf("quickstart-%d", time.Now().UnixNano()))
	if err := ws.CreateThread(ctx, thread); err != nil {
		return err
	}
	r, err := runner.New(runner.Config{
		Workspace: ws,
		ClaimTTL:  30 * time.Second,
		Wake:      wake,
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
		return err
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if _, err := ws.Post(ctx, thread, "the web app"); err != nil {
		return err
	}
	answered := false
	err = ws.Follow(ctx, thread, 0, func(ev core.ThreadEvent) error {
		switch ev.Kind {
		case core.Asked:
			fmt.Fprintln(out, "agent asks:", ev.Text)
			_, err := ws.Post(ctx, thread, "staging")
			return err
		case core.RunOutput:
			fmt.Fprintln(out, "agent replies:", ev.Text)
		case core.Answered:
			fmt.Fprintln(out, "answered by message", ev.Message)
			answered = true
			stop() // Follow and Run return nil
		}
		return nil
	})
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err == nil && !answered {
		err = fmt.Errorf("the question was not answered before the deadline: %w", context.DeadlineExceeded)
	}
	return err
}
