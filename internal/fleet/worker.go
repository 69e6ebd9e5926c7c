package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/runner"
	"github.com/threadclaim/threadclaim/store/postgres"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// WorkerConfig configures one runner process of a fleet.
type WorkerConfig struct {
	URL     string        // the database; the fleet passes it in the environment, never on the command line
	Schema  string        // the fleet's schema
	Name    string        // the process's name in traces
	History string        // the history file to append to; the writes in doubt go next to it, ending .doubts
	Skew    time.Duration // initial offset of the lease clock
	// ClockFile, when set, holds the lease clock's offset as a duration:
	// the worker reads it every ClockPoll, and a new value is a clock
	// jump. (A file, not a signal: a signal sent before the process has
	// installed its handler would kill it.)
	ClockFile string
	TTL       time.Duration // claim TTL; at least MinTTL
	Poll      time.Duration // poll period; positive
	Turns     int           // turns at once (runner.Config's MaxConcurrentTurns); 0: the runner's default
	AgentMax  time.Duration // longest agent run; not negative
	Agent     string        // AgentStalling (or "") or AgentNone
	Seed      uint64        // seeds the agent's choices
	// Ask is the chance that a run asks a question before the stalling
	// agent's own choices (which ask one run in four): more questions,
	// more Replies to fence. 0 to 1.
	Ask      float64
	Unfenced core.Fences // the fences switched off, a mutant; default none
}

// The workers' agents (-agent).
const (
	// AgentStalling runs for up to AgentMax, asks a question one run in
	// four and takes the steering half the time otherwise, and outputs
	// (sim.StallingAgent).
	AgentStalling = "stalling"
	// AgentNone returns at once, with no output, question or steering,
	// as the benchmarks' agent does: each message is a RunStart of its
	// own (with -ask 0), a claim's start among them.
	AgentNone = "none"
)

func validAgent(a string) bool { return a == AgentStalling || a == AgentNone }

// workerAgent is the agent cfg.Agent names.
func workerAgent(cfg WorkerConfig) runner.Agent {
	if cfg.Agent == AgentNone {
		return runner.AgentFunc(func(context.Context, *runner.Session) error { return nil })
	}
	return sim.StallingAgent(cfg.Seed, cfg.AgentMax)
}

// turns is how many turns a worker of the setting n keeps going at once:
// n, or the runner's default for 0.
func turns(n int) int {
	if n == 0 {
		return runner.DefaultMaxConcurrentTurns
	}
	return n
}

// MinTTL is the shortest claim TTL a fleet or a worker accepts: renewals
// come every TTL/3, and below a few milliseconds a round trip to the
// database outlasts the lease.
const MinTTL = 10 * time.Millisecond

// ErrConfig is wrapped by every error about a configuration: bad usage.
var ErrConfig = errors.New("bad configuration")

func configErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// Validate returns an error wrapping ErrConfig naming the first field
// that is wrong.
func (c WorkerConfig) Validate() error {
	switch {
	case c.URL == "":
		return configErrorf("no database: set DATABASE_URL")
	case badURL(c.URL) != nil:
		// Reconnecting would never mend it: the worker would retry for ever.
		return configErrorf("DATABASE_URL: %v", badURL(c.URL))
	case c.Schema == "":
		return configErrorf("-schema is required")
	case c.Name == "":
		return configErrorf("-name is required")
	case c.History == "":
		return configErrorf("-history is required")
	case c.TTL < MinTTL:
		return configErrorf("-ttl %v: must be at least %v", c.TTL, MinTTL)
	case c.Poll <= 0:
		return configErrorf("-poll %v: must be positive", c.Poll)
	case c.Turns < 0:
		return configErrorf("-turns %d: must not be negative", c.Turns)
	case c.AgentMax < 0:
		return configErrorf("-agent-max %v: must not be negative", c.AgentMax)
	case c.Agent != "" && !validAgent(c.Agent):
		return configErrorf("-agent %q: must be %s or %s", c.Agent, AgentStalling, AgentNone)
	case !(c.Ask >= 0 && c.Ask <= 1): // NaN too
		return configErrorf("-ask %v: must be between 0 and 1", c.Ask)
	}
	return nil
}

// jumpClock is the machine's clock off by an offset that changes while
// the process runs: a clock stepped forward or back (by NTP, by hand).
// sim.SkewedClock's offset is fixed, so it cannot model the jump.
type jumpClock struct{ offset atomic.Int64 }

func (c *jumpClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *jumpClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// ClockPoll is how often a worker reads its clock file.
const ClockPoll = 5 * time.Millisecond

// watchClock sets the clock's offset from the file each time it changes,
// until ctx ends.
func watchClock(ctx context.Context, path string, clock *jumpClock, log io.Writer, name string) {
	last := time.Duration(clock.offset.Load())
	t := time.NewTicker(ClockPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d, err := readOffset(path)
		if err != nil || d == last {
			continue // a missing or partly written file is read again next time
		}
		last = d
		clock.offset.Store(int64(d))
		fmt.Fprintf(log, "worker %s: lease clock now %+v\n", name, d)
	}
}

// readOffset reads a clock file: one duration.
func readOffset(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return time.ParseDuration(strings.TrimSpace(string(b)))
}

// RunWorker works every thread of the schema until ctx ends, SIGTERM or
// SIGINT; then it stops gracefully. It connects again by itself when the
// database goes away (a restart, a killed backend, a partition), and keeps
// trying to open the store at start. It returns an error only when it
// could not run at all (a history it cannot write).
func RunWorker(ctx context.Context, cfg WorkerConfig, log io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	f, err := os.OpenFile(cfg.History, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	clock := &jumpClock{}
	clock.offset.Store(int64(cfg.Skew))
	if cfg.ClockFile != "" {
		go watchClock(ctx, cfg.ClockFile, clock, log, cfg.Name)
	}
	var store *postgres.Store
	var wake <-chan core.ThreadID
	for {
		store, err = postgres.Open(ctx, cfg.URL, postgres.Options{Schema: cfg.Schema, KeepTrace: true})
		if err == nil {
			if wake, err = store.Wakeups(ctx); err == nil {
				break
			}
			store.Close()
		}
		fmt.Fprintf(log, "worker %s: %v (trying again)\n", cfg.Name, err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(cfg.Poll):
		}
	}
	defer store.Close()
	df, err := os.OpenFile(doubtsPath(cfg.History), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer df.Close()
	doubts := &doubtWriter{enc: json.NewEncoder(df)}
	hw := tracecheck.NewHistoryWriter(f)
	opts := []core.Option{core.WithProcess(cfg.Name), core.WithTracer(hw), core.WithDoubts(doubts.add)}
	if cfg.Unfenced != (core.Fences{}) {
		opts = append(opts, core.WithFencesForTesting(core.AllFences().Without(cfg.Unfenced)))
	}
	ws := core.NewWorkspace(store, clock, opts...)
	r, err := runner.New(runner.Config{
		Workspace:          ws,
		Clock:              clock,
		ClaimTTL:           cfg.TTL,
		RenewEvery:         cfg.TTL / 3,
		PollEvery:          cfg.Poll,
		MaxConcurrentTurns: cfg.Turns,
		Wake:               wake,
		Agent:              askingAgent(cfg.Seed, cfg.Ask, workerAgent(cfg)),
		Logger:             slog.New(slog.DiscardHandler), // the fleet's checks report what the turns did
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "worker %s: pid %d, lease clock %+v, ttl %v, %d turns, fences %s\n", cfg.Name, os.Getpid(), cfg.Skew, cfg.TTL, turns(cfg.Turns), fencesText(cfg.Unfenced))
	_ = r.Run(ctx)
	if err := hw.Err(); err != nil {
		return err
	}
	doubts.mu.Lock()
	defer doubts.mu.Unlock()
	return doubts.err
}

// askingAgent asks a question in a run with the chance ask, then hands the
// run to agent. Its choices come from seed.
func askingAgent(seed uint64, ask float64, agent runner.Agent) runner.Agent {
	if ask <= 0 {
		return agent
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	var mu sync.Mutex
	return runner.AgentFunc(func(ctx context.Context, s *runner.Session) error {
		mu.Lock()
		asks := rng.Float64() < ask
		mu.Unlock()
		if asks {
			if _, err := s.Ask(ctx, "which way?"); err != nil {
				return err
			}
		}
		return agent.Run(ctx, s)
	})
}

// fencesText says which fences are off, as the report and the logs show
// it: "on" when none is, otherwise "off: " and their names.
func fencesText(off core.Fences) string {
	if off == (core.Fences{}) {
		return "on"
	}
	return "off: " + off.String()
}

// UnfencedFlag is a flag.Value for -unfenced, the fences switched off (a
// mutant): given alone it switches every fence off; -unfenced=start,reply
// switches those off; "false", "none" or "" none.
type UnfencedFlag struct{ Off core.Fences }

// IsBoolFlag lets -unfenced stand alone.
func (u *UnfencedFlag) IsBoolFlag() bool { return true }

// Set parses the flag's value: "true" or "all", "false" or "none", or
// fences' names (core.ParseFences).
func (u *UnfencedFlag) Set(s string) error {
	names := s
	switch s {
	case "true":
		names = "all"
	case "false":
		names = "none"
	}
	off, err := core.ParseFences(names)
	if err != nil {
		return configErrorf("-unfenced %q: %v", s, err)
	}
	u.Off = off
	return nil
}

// String returns the value as Set takes it.
func (u *UnfencedFlag) String() string {
	if u == nil || u.Off == (core.Fences{}) {
		return "false"
	}
	return u.Off.String()
}

// Mutant reports whether any fence is off.
func (u *UnfencedFlag) Mutant() bool { return u.Off != (core.Fences{}) }
