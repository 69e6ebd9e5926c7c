package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/sim"
	"github.com/threadclaim/threadclaim/store/postgres"
	"github.com/threadclaim/threadclaim/tracecheck"
)

const workerUsage = `usage: tracecheck worker -storage URL -schema NAME -name NAME -history FILE [flags]

One runner process of a many-process run (tracecheck fleet starts them):
it works every thread of the schema until SIGTERM or SIGINT, with its lease
clock skewed by -skew, an agent that runs up to -agent-max and sometimes
asks, and writes every action it takes, with call and return times, to the
history file. Its committed writes' trace lines are also kept by the
storage (postgres KeepTrace).

Flags:
`

func cmdWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	url := fs.String("storage", os.Getenv("DATABASE_URL"), "PostgreSQL URL (default $DATABASE_URL)")
	schema := fs.String("schema", "", "the run's schema")
	name := fs.String("name", "", "the process's name in traces")
	history := fs.String("history", "", "the history file to append to")
	skew := fs.Duration("skew", 0, "offset of this process's lease clock")
	ttl := fs.Duration("ttl", 300*time.Millisecond, "claim TTL")
	poll := fs.Duration("poll", 50*time.Millisecond, "poll period, the fallback of LISTEN/NOTIFY wake-ups")
	agentMax := fs.Duration("agent-max", 200*time.Millisecond, "longest agent run")
	seed := fs.Uint64("seed", 1, "seed of the agent's choices")
	unfenced := fs.Bool("unfenced", false, "switch every fence off: the mutant")
	if err := parse(fs, args, stdout, stderr, workerUsage); err != nil {
		return err
	}
	if *url == "" || *schema == "" || *name == "" || *history == "" {
		return usageError{"-storage (or DATABASE_URL), -schema, -name and -history are required"}
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	store, err := postgres.Open(ctx, *url, postgres.Options{Schema: *schema, KeepTrace: true})
	if err != nil {
		return err
	}
	defer store.Close()
	f, err := os.OpenFile(*history, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return usageError{err.Error()}
	}
	defer f.Close()
	hw := tracecheck.NewHistoryWriter(f)
	clock := sim.SkewedClock{Offset: *skew}
	opts := []core.Option{core.WithProcess(*name), core.WithTracer(hw)}
	if *unfenced {
		opts = append(opts, core.WithFencesForTesting(core.Fences{}))
	}
	ws := core.NewWorkspace(store, clock, opts...)
	wake, err := store.Wakeups(ctx)
	if err != nil {
		return err
	}
	r, err := runner.New(runner.Config{
		Workspace:  ws,
		Clock:      clock,
		ClaimTTL:   *ttl,
		RenewEvery: *ttl / 3,
		PollEvery:  *poll,
		Wake:       wake,
		Agent:      sim.StallingAgent(*seed, *agentMax),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "worker %s: pid %d, skew %v, ttl %v\n", *name, os.Getpid(), *skew, *ttl)
	_ = r.Run(ctx)
	return hw.Err()
}
