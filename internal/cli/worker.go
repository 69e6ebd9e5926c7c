package cli

import (
	"context"
	"flag"
	"io"
	"os"
	"time"

	"github.com/threadclaim/threadclaim/internal/fleet"
)

const workerUsage = `usage: tracecheck worker -schema NAME -name NAME -history FILE [flags]

One runner process of a many-process run (tracecheck fleet starts them):
it works every thread of the schema until SIGTERM or SIGINT, with its lease
clock skewed by -skew (and set again whenever -clock-file changes: a
clock jump), an agent that runs up to -agent-max and sometimes asks, and writes
every action it takes, with call and return times, to the history file.
Its committed writes' trace lines are also kept by the storage (postgres
KeepTrace). It reconnects by itself when the database goes away.

The database is DATABASE_URL's, from the environment (never the command
line, where ps would show its password).

Flags:
`

func cmdWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := fleet.WorkerConfig{URL: os.Getenv("DATABASE_URL")}
	var unfenced fleet.UnfencedFlag
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.StringVar(&cfg.Schema, "schema", "", "the run's schema")
	fs.StringVar(&cfg.Name, "name", "", "the process's name in traces")
	fs.StringVar(&cfg.History, "history", "", "the history file to append to")
	fs.DurationVar(&cfg.Skew, "skew", 0, "offset of this process's lease clock")
	fs.StringVar(&cfg.ClockFile, "clock-file", "", "a file holding the lease clock's offset, read every 5ms")
	fs.DurationVar(&cfg.TTL, "ttl", 300*time.Millisecond, "claim TTL (at least 10ms)")
	fs.DurationVar(&cfg.Poll, "poll", 50*time.Millisecond, "poll period, the fallback of LISTEN/NOTIFY wake-ups")
	fs.IntVar(&cfg.Turns, "turns", 0, "turns at once (0: the runner's default, 4)")
	fs.DurationVar(&cfg.AgentMax, "agent-max", 200*time.Millisecond, "longest agent run")
	fs.StringVar(&cfg.Agent, "agent", fleet.AgentStalling, "the agent: stalling (runs up to -agent-max, asks, steers, outputs) or none (returns at once)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the agent's choices")
	fs.Float64Var(&cfg.Ask, "ask", 0, "the chance a run asks a question, besides the agent's one in four")
	fs.Var(&unfenced, "unfenced", "switch fences off, the mutant: alone every fence, or a list of start, reply, abandon")
	if err := parse(fs, args, stdout, stderr, workerUsage); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"unexpected argument " + fs.Arg(0)}
	}
	cfg.Unfenced = unfenced.Off
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	return fleet.RunWorker(ctx, cfg, stdout)
}
