package postgres_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/postgres"
)

// A runner process on PostgreSQL: open the storage, wake the runner on
// every committed post, and work threads until the process is told to
// stop. Every process of the fleet runs the same code against the same
// database; the fence keeps each message consumed once whatever their
// clocks say. (Compiled, not run: it needs a server.)
func ExampleOpen() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	st, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), postgres.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	// Wake-ups are hints: the runner polls as well (Config.PollEvery).
	wake, err := st.Wakeups(ctx)
	if err != nil {
		log.Fatal(err)
	}

	host, _ := os.Hostname()
	ws := core.NewWorkspace(st, core.SystemClock{}, core.WithProcess(host))
	r, err := runner.New(runner.Config{
		Workspace: ws,
		Agent: runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
			log.Printf("run for %q", s.Delivered.Prompt.Text)
			return nil
		}),
		Wake: wake,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Print(err)
	}
}
