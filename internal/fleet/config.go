package fleet

import (
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/tlc"
)

// Kind is a kind of fault the nemesis injects.
type Kind string

// The nemesis's kinds.
const (
	// KindStop stops a worker (SIGSTOP) past the TTL, then continues it.
	KindStop Kind = "stop"
	// KindKill kills a worker (SIGKILL) and starts a replacement.
	KindKill Kind = "kill"
	// KindClock jumps a worker's lease clock forward or back by one to
	// three TTLs, and back again later.
	KindClock Kind = "clock"
	// KindTerminate ends one of a worker's database sessions
	// (pg_terminate_backend), one inside a transaction when it finds one.
	KindTerminate Kind = "terminate"
	// KindRestart restarts PostgreSQL, fast or immediate (a crash and
	// recovery). It needs a cluster the fleet may restart: see
	// Config.Restart.
	KindRestart Kind = "restart"
	// KindPartition cuts a worker off from the database (its proxy
	// forwards nothing) for one to three TTLs.
	KindPartition Kind = "partition"
	// KindLatency adds latency to every round trip of a worker.
	KindLatency Kind = "latency"
	// KindCommit holds a worker's COMMITs back past the TTL before the
	// server sees them: the transaction keeps its locks meanwhile.
	KindCommit Kind = "commit"
	// KindLose makes PostgreSQL lose commits it acknowledged: the run
	// sets synchronous_commit = off (and a longer wal_writer_delay) on
	// the cluster, and each fault is an immediate restart, a crash that
	// loses the commits whose WAL was not yet written. It breaks what the
	// spec assumes of storage (spec/README.md); the report counts what
	// storage lost. It needs a cluster the fleet may restart, as
	// KindRestart does.
	KindLose Kind = "lose"
	// KindRetire cuts a worker off from the database for one to three
	// TTLs, so that the writes it had in flight are in doubt and their
	// rounds' Crash cannot reach storage, then, the cut healed, stops it
	// cleanly (SIGTERM) at once and starts a replacement: the stopping
	// runner must end those rounds itself (its last tries at their
	// Crash), or the report finds them open.
	KindRetire Kind = "retire"
	// KindRewind emulates storage losing one acknowledged Claim, with
	// plain SQL behind the Stores' backs: a worker is stopped (SIGSTOP)
	// right after a Claim of its over a lapsed lease commits; the
	// thread's row is put back as before the Claim (version less one, the
	// lapsed lease), the Claim's trace line and holder deleted; once
	// another worker's Claim takes the thread at the version the first
	// one's cache has, that worker is stopped, the first continues and
	// writes from its cache, then the second continues. Otherwise the
	// first continues and the fault tries another Claim, within a
	// watch of 20 TTLs. The report counts the Claims as lost by storage
	// (rewind.go).
	KindRewind Kind = "rewind"
)

// Kinds returns every kind, in the report's order.
func Kinds() []Kind {
	return []Kind{KindStop, KindKill, KindClock, KindTerminate, KindRestart, KindPartition, KindLatency, KindCommit, KindLose, KindRetire, KindRewind}
}

// DefaultKinds are the kinds a fleet injects unless told: all but
// KindRestart and KindLose, which need a cluster of the fleet's own
// (KindRewind does not: it is SQL on the fleet's schema).
func DefaultKinds() []Kind {
	return slices.DeleteFunc(Kinds(), func(k Kind) bool { return k == KindRestart || k == KindLose })
}

// MutantKinds are the kinds a fleet injects unless told when a fence is
// off: those that take a lease from a live holder (a stopped or killed
// worker, a clock jump, latency, a delayed COMMIT), under which each
// single fence off is caught in at least 19 of 20 seeded default runs.
// Terminated backends and partitions end a round instead (the worker
// gives its claim up), and in the draw they halve the chances of
// catching the Abandon mutant.
func MutantKinds() []Kind {
	return []Kind{KindStop, KindKill, KindClock, KindLatency, KindCommit}
}

// ParseKinds reads a comma-separated list of kinds; "all" is every kind,
// "none" or "" is no fault at all.
func ParseKinds(list string) ([]Kind, error) {
	switch list {
	case "all":
		return Kinds(), nil
	case "", "none":
		return nil, nil
	}
	var out []Kind
	for _, name := range strings.Split(list, ",") {
		k := Kind(strings.TrimSpace(name))
		if !slices.Contains(Kinds(), k) {
			return nil, configErrorf("-nemesis %q: %q is not a kind (%s, or all, none)", list, name, joinKinds(Kinds()))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

func joinKinds(ks []Kind) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ",")
}

// Config configures a fleet run. Zero fields take the defaults their
// comments give; Validate names the first field that is wrong.
type Config struct {
	URL      string // the database (required)
	Bin      string // the tracecheck binary the workers run (required)
	Dir      string // where histories, logs, the trace and the report go; default a temporary directory, removed unless Keep
	Keep     bool   // keep the schema and the directory
	Procs    int    // runner processes; default 4
	Threads  int    // default 32
	Messages int    // messages in all, spread over the threads; default 600, MutantMessages with a fence off
	Posters  int    // posting goroutines, each with its own workspace; default 1
	// Duration spreads the posts over this time, while the nemesis runs;
	// 0 posts as fast as the posters can (the nemesis runs until every
	// message is consumed). Default 0.
	Duration time.Duration
	Seed     uint64        // seeds the workers' and the nemesis's choices; default 1
	TTL      time.Duration // claim TTL; default 50ms; at least MinTTL
	Poll     time.Duration // the workers' poll period; default 50ms
	// Turns is how many turns each worker keeps going at once
	// (runner.Config's MaxConcurrentTurns); 0: the runner's default.
	Turns    int
	AgentMax time.Duration // longest agent run; default 2/3 of the TTL
	// Agent is the workers' agent: AgentStalling (the default) or
	// AgentNone.
	Agent string
	// Ask is the chance that a run asks a question, besides the agent's
	// one in four: each question's answer is a Reply. 0 to 1; default 0.
	Ask float64
	// MaxSkew spreads the workers' lease clocks over [0, MaxSkew]; default
	// four times the TTL (the fastest sees the slowest's fresh claims expired).
	MaxSkew time.Duration
	Timeout time.Duration // every message must be consumed within this after posting ends; default 2m
	// PorcupineTimeout bounds porcupine; default 1m.
	PorcupineTimeout time.Duration
	Nemesis          []Kind        // the kinds injected; DefaultKinds when nil and NoNemesis is false
	NoNemesis        bool          // inject no fault at all
	NemesisEvery     time.Duration // mean time between faults' starts; default the TTL
	// Restart names how to restart the cluster for KindRestart: the data
	// directory, when the server runs on this machine and can be
	// restarted with pg_ctl (as the directory's owner). Empty asks the
	// server (SHOW data_directory; it needs a superuser). Only give a
	// cluster of the fleet's own: every session on it is cut off.
	Restart string
	// TLC, when set, replays TLCSample threads of the trace (drawn from
	// the seed) through TLC's trace validation. TLCRoot holds spec/ and
	// tla/ (the repository's root).
	TLC       *tlc.Env
	TLCRoot   string
	TLCSample int // default 3 when TLC is set
	// Unfenced are the fences the workers run with off: a mutant, which
	// the checks must catch. Default none.
	Unfenced core.Fences
	// Shrink: what the run does with a failure (shrink.go).
	Shrink ShrinkConfig
}

// MutantMessages is the messages of a run with a fence off by default:
// with 600, the Abandon mutant survived 2 seeds of 20 (18 caught) on 5 Dec
// 2026, when no process happened to abandon a live holder's run; with
// 1,000, every seed of 60 caught it (internal/fleet/BENCH.md).
const MutantMessages = 1000

func (c Config) withDefaults() Config {
	if c.Procs == 0 {
		c.Procs = 4
	}
	if c.Threads == 0 {
		c.Threads = 32
	}
	if c.Messages == 0 {
		c.Messages = 600
		if c.mutant() {
			c.Messages = MutantMessages
		}
	}
	if c.Posters == 0 {
		c.Posters = 1
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.TTL == 0 {
		c.TTL = 50 * time.Millisecond
	}
	if c.Poll == 0 {
		c.Poll = 50 * time.Millisecond
	}
	if c.AgentMax == 0 {
		c.AgentMax = c.TTL * 2 / 3
	}
	if c.Agent == "" {
		c.Agent = AgentStalling
	}
	if c.MaxSkew == 0 {
		c.MaxSkew = 4 * c.TTL
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.PorcupineTimeout == 0 {
		c.PorcupineTimeout = time.Minute
	}
	if c.Nemesis == nil && !c.NoNemesis {
		c.Nemesis = DefaultKinds()
		if c.Unfenced != (core.Fences{}) {
			c.Nemesis = MutantKinds()
		}
	}
	if c.NoNemesis {
		c.Nemesis = nil
	}
	if c.TLC != nil && c.TLCSample == 0 {
		c.TLCSample = 3
	}
	if c.NemesisEvery == 0 {
		c.NemesisEvery = c.TTL
	}
	return c
}

// mutant reports whether a fence is off.
func (c Config) mutant() bool { return c.Unfenced != (core.Fences{}) }

// Validate returns an error wrapping ErrConfig that names the first field
// that is wrong, after defaults are filled in.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.URL == "":
		return configErrorf("no PostgreSQL: give -storage URL or set DATABASE_URL (scripts/with-postgres starts a throwaway one)")
	case badURL(c.URL) != nil:
		return configErrorf("-storage: %v", badURL(c.URL))
	case c.Bin == "":
		return configErrorf("-bin: no tracecheck binary for the workers")
	case c.Procs < 1:
		return configErrorf("-procs %d: at least 1", c.Procs)
	case c.Procs < 2 && (slices.Contains(c.Nemesis, KindKill) || slices.Contains(c.Nemesis, KindStop) || slices.Contains(c.Nemesis, KindRewind)):
		return configErrorf("-procs %d: at least 2 when the nemesis stops or kills workers (someone must take over)", c.Procs)
	case c.Threads < 1:
		return configErrorf("-threads %d: at least 1", c.Threads)
	case c.Messages < 1:
		return configErrorf("-messages %d: at least 1", c.Messages)
	case c.Posters < 1:
		return configErrorf("-posters %d: at least 1", c.Posters)
	case c.Duration < 0:
		return configErrorf("-duration %v: must not be negative", c.Duration)
	case c.TTL < MinTTL:
		return configErrorf("-ttl %v: must be at least %v", c.TTL, MinTTL)
	case c.Poll < 0:
		return configErrorf("-poll %v: must be positive", c.Poll)
	case c.Turns < 0:
		return configErrorf("-turns %d: must not be negative", c.Turns)
	case c.AgentMax < 0:
		return configErrorf("-agent-max %v: must not be negative", c.AgentMax)
	case !validAgent(c.Agent):
		return configErrorf("-agent %q: must be %s or %s", c.Agent, AgentStalling, AgentNone)
	case !(c.Ask >= 0 && c.Ask <= 1): // NaN too
		return configErrorf("-ask %v: must be between 0 and 1", c.Ask)
	case c.MaxSkew < 0:
		return configErrorf("-max-skew %v: must not be negative", c.MaxSkew)
	case c.Timeout < 0:
		return configErrorf("-timeout %v: must be positive", c.Timeout)
	case c.PorcupineTimeout < 0:
		return configErrorf("-porcupine-timeout %v: must be positive", c.PorcupineTimeout)
	case c.TLCSample < 0:
		return configErrorf("-tlc-sample %d: must not be negative", c.TLCSample)
	case c.NemesisEvery < 0:
		return configErrorf("-nemesis-every %v: must be positive", c.NemesisEvery)
	}
	return nil
}

// badURL returns why url does not parse as a PostgreSQL connection string
// (without its password), or nil.
func badURL(url string) error {
	_, err := pgconn.ParseConfig(url)
	return err
}
