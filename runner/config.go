package runner

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"time"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/threadclaim/threadclaim/core"
)

// Clock is core.Clock: the one clock interface. core.SystemClock is the
// machine's; coretest.Clock is a manual one for tests and simulation.
type Clock = core.Clock

// Config configures a Runner. New checks it; zero fields take the
// defaults their comments give. New's error wraps core.ErrInvalidArgument
// and names the field.
//
// The runner recovers the agent's panic (Agent), not a callback's: a
// panic in NewHolder, OnRun, OnTurn or the Logger's handler goes on up
// the turn's goroutine, which in Run takes the process down, and from
// TakeTurn leaves the claim's round open (OnRun's), so that this
// runner's workspace refuses the thread's later claims.
type Config struct {
	// Workspace is where the runner claims threads and records runs.
	// Required, made by core.NewWorkspace (the zero Workspace is refused).
	// Its clock stamps lease expiries and is the runner's clock.
	Workspace *core.Workspace

	// Agent runs each run. Required: a nil AgentFunc is refused too (its
	// every run would fail with a panic, each message consumed).
	Agent Agent

	// Clock drives renewals, polling and the latency metric. Default: the
	// Workspace's clock (core.Workspace.Clock), so that a workspace on a
	// test clock never gets wall-clock renewals. Set it only to a clock
	// that reads the same time as the workspace's (say, a wrapper that
	// observes the runner's waits).
	Clock Clock

	// ClaimTTL is how long a claim lasts without renewal. It sets how soon
	// a dead process's thread is taken over; safety does not depend on it.
	// Default 30s. A ClaimTTL whose lease would expire past April 2262,
	// which core.Workspace.Claim refuses (math.MaxInt64 among them), is
	// refused: a claim lasts for ever only as long as it is renewed.
	ClaimTTL time.Duration

	// RenewEvery is the renewal period; it must be shorter than ClaimTTL.
	// Default ClaimTTL/3.
	RenewEvery time.Duration

	// PollEvery is how often Run looks for threads with work when nothing
	// wakes it. Default 1s.
	PollEvery time.Duration

	// Wake, when set, tells Run of work as it comes (for example on a
	// storage's LISTEN/NOTIFY, as postgres.Store.Wakeups does). A thread
	// id it receives names a thread given work while nobody held it (a
	// message posted to it, a release that left work): Run claims it at
	// once, with no look, when a turn slot is free, or else at the next
	// turn's end. The empty ThreadID makes Run look at every thread. With
	// Wake, a turn's end makes Run look only when a sweep (its first
	// look, or one the empty id asked for) found work that no slot could
	// start; it claims again, with no look, the turn's own thread when a
	// wake-up named it (or the empty id's look found work there, unless
	// the turn found the thread held by another holder) while the turn
	// had it; without Wake, Run looks at every turn's end. A
	// source that names threads another holder has makes claims that
	// find them taken. Polling stays the fallback: with Wake, a poll
	// takes only the free threads with work an earlier look found so too
	// (the others' wake-ups are on their way), so a thread whose wake-up
	// was lost is taken by the second poll that finds a slot free, or at
	// a turn's end once found waiting at four polls (see Run). Default nil.
	Wake <-chan core.ThreadID

	// ShutdownGrace is how long a turn in progress may go on, recording
	// its run's end and releasing its claim, after Run's or TakeTurn's context
	// ends; past it, its storage calls are cut off. Default 5s.
	ShutdownGrace time.Duration

	// NewHolder makes the holder of each claim. It must return a fresh,
	// unguessable value every call, and be safe for concurrent use (Run
	// keeps several turns going). Default: 128 random bits from
	// crypto/rand, in hex.
	NewHolder func() (core.Holder, error)

	// MaxConcurrentTurns is how many turns, each on its own thread, Run
	// keeps going at once. More than one keeps a busy runner looking for
	// work, so that a thread whose runner died is taken over soon after
	// its lease expires. Default 4. On store/postgres the writes that
	// turns have ready at once share one round trip, and a turn waiting
	// for it holds no pooled connection, so with short turns more of them
	// carry more writes a round trip: 16 drained a backlog 1.3× as fast
	// as 4, and cost more a message where the runners keep up with the
	// posts (store/postgres: its package doc; internal/bench/BENCH.md,
	// "Sixteen turns a runner").
	MaxConcurrentTurns int

	// TakeoverTurns is how many turns, beyond MaxConcurrentTurns, Run
	// keeps going at once to take over threads whose lease has expired by
	// Clock (their holder stopped renewing: its process may be dead) while
	// every other slot is taken. Such a turn claims the thread (the
	// specification's Claim after Lapse), plans once, abandons the runs
	// the lapsed claim left active or takes the one run or reply that plan
	// names, and releases the thread (OutcomeYielded), which then waits
	// for a slot like any thread with work; so it is short, and
	// a thread whose runner died is claimed within ClaimTTL + PollEvery of
	// its last renewal however busy the runners are. A runner whose slots
	// are all taken looks for such threads every PollEvery. Default 1;
	// negative: none (a lapsed thread waits for a free slot).
	TakeoverTurns int

	// MaxTurnMessages bounds how many messages one turn consumes (prompts
	// and answers) before it releases the thread with work left
	// (OutcomeYielded); the thread is pending again at Run's next look.
	// Default 0: no bound.
	MaxTurnMessages int

	// MaxTurnDuration bounds how long, by Clock, a turn goes on planning
	// new writes: once it has passed, the turn releases the thread after
	// its current run ends (OutcomeYielded). It frees the turn's slot for
	// other threads. Default ClaimTTL.
	MaxTurnDuration time.Duration

	// SeparatePlans makes a turn plan each write in a read of its own,
	// and start each run and release its claim in writes of their own. By
	// default the claim and its first plan are one transaction, and so
	// are each run's end and the next plan (core.Workspace.ClaimThenStart,
	// RunEndThenStart): a round trip to storage fewer per turn, and per
	// message while a thread has messages waiting; the first run's start
	// goes with the claim when storage can write it there (a round trip
	// fewer again); while three or more wait behind the next run's
	// prompt, that run's start goes with the run's end too (one write a
	// message where there were two), and when nothing is left to plan,
	// the claim's release does (a round trip fewer per turn again).
	// The deterministic simulator sets it, so that each step of a turn is
	// one step of the specification, after which any other process's step
	// may come. Default false.
	SeparatePlans bool

	// Logger receives a record per turn (Debug; Warn for a failed turn)
	// and Run's storage errors (Warn). Default: slog.Default(), so a
	// failed turn is not silent (before issue 24 the default discarded
	// them); slog.New(slog.DiscardHandler) discards.
	Logger *slog.Logger

	// OnTurn, when set, is called with each turn's report once the turn is
	// over, on the goroutine that ran it. It must not block for long.
	OnTurn func(TurnReport)

	// OnRun, when set, is called with each run's handle as soon as the
	// run is planned: before its start is written, or, when the start
	// went with the plan and the claim (ClaimThenStart) or the run's end
	// before it (RunEndThenStart), right after; RunHandle.Wait then
	// follows the run to its end. It
	// must not block for long: it is called on the turn's goroutine,
	// which starts the run once it returns, so a Wait on the handle there
	// waits for ever (hand the handle to another goroutine).
	OnRun func(*RunHandle)

	// TracerProvider makes the tracer of turn spans. Default no-op.
	TracerProvider trace.TracerProvider

	// MeterProvider makes the meter of the runner's metrics. Default no-op.
	MeterProvider metric.MeterProvider
}

// Defaults.
const (
	DefaultClaimTTL      = 30 * time.Second
	DefaultPollEvery     = time.Second
	DefaultShutdownGrace = 5 * time.Second

	DefaultMaxConcurrentTurns = 4
	DefaultTakeoverTurns      = 1
)

// RandomHolder returns 128 random bits in hex, the default NewHolder.
func RandomHolder() (core.Holder, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make holder: %w", err)
	}
	return core.Holder(hex.EncodeToString(b[:])), nil
}

// withDefaults returns c with defaults filled in, or an error naming the
// first field that is wrong.
func (c Config) withDefaults() (Config, error) {
	if c.Workspace == nil {
		return c, configError("Workspace is required")
	}
	if c.Workspace.Clock() == nil {
		return c, configError("Workspace was not made by core.NewWorkspace (the zero Workspace has no storage)")
	}
	if f, ok := c.Agent.(AgentFunc); c.Agent == nil || ok && f == nil {
		return c, configError("Agent is required (a nil AgentFunc would fail every run, consuming its message)")
	}
	if c.Clock == nil {
		c.Clock = c.Workspace.Clock()
	}
	if c.ClaimTTL == 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	if c.RenewEvery == 0 {
		c.RenewEvery = c.ClaimTTL / 3
		if c.RenewEvery == 0 && c.ClaimTTL > 0 {
			return c, configError("ClaimTTL %v is too short: RenewEvery, ClaimTTL/3 by default, would be 0", c.ClaimTTL)
		}
	}
	if c.PollEvery == 0 {
		c.PollEvery = DefaultPollEvery
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.MaxConcurrentTurns == 0 {
		c.MaxConcurrentTurns = DefaultMaxConcurrentTurns
	}
	if c.TakeoverTurns == 0 {
		c.TakeoverTurns = DefaultTakeoverTurns
	}
	if c.MaxTurnDuration == 0 {
		c.MaxTurnDuration = c.ClaimTTL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NewHolder == nil {
		c.NewHolder = RandomHolder
	}
	if c.TracerProvider == nil {
		c.TracerProvider = tracenoop.NewTracerProvider()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = metricnoop.NewMeterProvider()
	}
	return c, c.validate()
}

// configError is New's error: it wraps core.ErrInvalidArgument.
func configError(format string, args ...any) error {
	return fmt.Errorf("runner config: %w: %s", core.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

func (c Config) validate() error {
	switch {
	case c.ClaimTTL < 0:
		return configError("ClaimTTL %v must be positive", c.ClaimTTL)
	case c.Workspace.Now().Add(c.ClaimTTL).After(time.Unix(0, math.MaxInt64)):
		return configError("ClaimTTL %v is too long: a lease would expire past April 2262, which core.Workspace.Claim refuses", c.ClaimTTL)
	case c.RenewEvery <= 0:
		return configError("RenewEvery %v must be positive", c.RenewEvery)
	case c.RenewEvery >= c.ClaimTTL:
		return configError("RenewEvery %v must be shorter than ClaimTTL %v", c.RenewEvery, c.ClaimTTL)
	case c.PollEvery < 0:
		return configError("PollEvery %v must be positive", c.PollEvery)
	case c.ShutdownGrace < 0:
		return configError("ShutdownGrace %v must be positive", c.ShutdownGrace)
	case c.MaxConcurrentTurns < 0:
		return configError("MaxConcurrentTurns %d must be positive", c.MaxConcurrentTurns)
	case c.MaxTurnMessages < 0:
		return configError("MaxTurnMessages %d must not be negative", c.MaxTurnMessages)
	case c.MaxTurnDuration < 0:
		return configError("MaxTurnDuration %v must be positive", c.MaxTurnDuration)
	}
	return nil
}
