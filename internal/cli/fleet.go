package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/threadclaim/threadclaim/internal/fleet"
	"github.com/threadclaim/threadclaim/internal/report"
	"github.com/threadclaim/threadclaim/internal/tlc"
)

const fleetUsage = `usage: tracecheck fleet [flags]

A soak on PostgreSQL with a nemesis: -procs runner OS processes (tracecheck
worker), each behind a TCP proxy the fleet controls, with lease clocks
spread over -max-skew, work -threads threads while -posters post
-messages messages (spread over -duration). Meanwhile a seeded nemesis
injects a fault every -nemesis-every on average, of the kinds -nemesis
names, each kind once (in a shuffled order) before any twice:

  stop       SIGSTOP a worker past the TTL, then SIGCONT
  kill       SIGKILL a worker and start a replacement
  clock      jump a worker's lease clock forward or back 1-3 TTLs, then back
  terminate  pg_terminate_backend one of a worker's sessions, mid-transaction
  partition  cut a worker off from PostgreSQL for 1-3 TTLs (its proxy)
  latency    add 1/4 to 1 TTL to each of a worker's round trips
  commit     hold a worker's COMMITs back past the TTL
  retire     cut a worker off for 1-3 TTLs, then stop it cleanly (SIGTERM)
             at once and start a replacement: it must end its open rounds
  restart    pg_ctl restart, fast or immediate (not in the default set)
  lose       synchronous_commit off, then pg_ctl restart -m immediate:
             PostgreSQL loses acknowledged commits (not in the default set)
  rewind     storage loses one acknowledged Claim, emulated with SQL: its
             worker stopped as it commits, the thread put back as before
             it; another worker claims the thread at the same version, is
             stopped, and the first goes on writing from its cache

Workers reconnect by themselves. restart and lose need a cluster the fleet may
restart: on this machine, its data directory (-pgdata, or the server's
SHOW data_directory as a superuser) owned by this user (or by anyone, as
root); give it only a cluster of the fleet's own (scripts/with-postgres
starts one), since every session on it is cut off.

When every message is consumed the workers are stopped and the run is
checked: every message consumed exactly once (from storage), at most one
run active per thread, no live run abandoned, the whole trace (writes as
storage committed them, reads from the workers' histories) by the Go trace
checker, the history by porcupine. A rejected trace is shrunk to its
shortest story (the rejected thread's lines, dropped while the checker
rejects the same action at the same guard), and a history that is not
linearizable to a minimal sub-history failing at the same operation;
both are printed and written beside the trace (-shrink-dir). The
handover after each SIGKILL (from
the lease's expiry to another process's Claim) is measured against TTL +
one poll. The writes whose commit outcome a worker was not told are
counted, with what storage's log says became of each and how the worker
ended its round (a Crash line, the committed Release's own line, no round
for a Claim that did not commit, settled from the log when a SIGKILL took
the worker first, or open when the worker stopped); a resolution the log
contradicts is a failed check. Each run uses a fresh schema and directory, removed at the end
(or on SIGINT/SIGTERM) unless -keep.

Exit codes: 0 passed; 1 a check failed (with -unfenced: the mutant was
caught); 2 bad usage; 3 porcupine timed out; 4 could not run (database
unreachable, a worker died by itself, interrupted); 5 with -unfenced: the
mutant survived.

Flags:
`

func cmdFleet(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	var cfg fleet.Config
	var unfenced fleet.UnfencedFlag
	var nemesis, jsonOut, htmlOut string
	var tlcSample int
	var noShrink bool
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.StringVar(&cfg.URL, "storage", os.Getenv("DATABASE_URL"), "PostgreSQL URL (default $DATABASE_URL); a server that does not answer within 15s is exit 4")
	fs.IntVar(&cfg.Procs, "procs", 4, "runner processes")
	fs.IntVar(&cfg.Threads, "threads", 32, "threads")
	fs.IntVar(&cfg.Messages, "messages", 0, "messages in all, spread over the threads (default 600; with -unfenced 1000, so that a fence off is caught in more seeds)")
	fs.IntVar(&cfg.Posters, "posters", 1, "posters, each with its own connection")
	fs.DurationVar(&cfg.Duration, "duration", 0, "spread the posts over this time (0: as fast as the posters go)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the workers' and the nemesis's choices")
	fs.DurationVar(&cfg.TTL, "ttl", 50*time.Millisecond, "claim TTL (at least 10ms)")
	fs.DurationVar(&cfg.Poll, "poll", 50*time.Millisecond, "the workers' poll period")
	fs.IntVar(&cfg.Turns, "turns", 0, "turns each worker keeps going at once (0: the runner's default, 4)")
	fs.DurationVar(&cfg.AgentMax, "agent-max", 0, "longest agent run (default 2/3 of the TTL)")
	fs.StringVar(&cfg.Agent, "agent", fleet.AgentStalling, "the workers' agent: stalling (runs up to -agent-max, asks a question one run in four, takes the steering half the time, outputs) or none (returns at once, as the benchmarks' agent: with -ask 0 every message is a RunStart)")
	fs.Float64Var(&cfg.Ask, "ask", 0.5, "the chance a run asks a question (answered by a Reply), besides the agent's one in four")
	fs.DurationVar(&cfg.MaxSkew, "max-skew", 0, "lease clocks spread over [0, this] (default 4 TTLs)")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "every message must be consumed within this after the last post")
	fs.DurationVar(&cfg.PorcupineTimeout, "porcupine-timeout", time.Minute, "porcupine's time limit")
	fs.StringVar(&nemesis, "nemesis", "default", "fault kinds, comma-separated: stop,kill,clock,terminate,partition,latency,commit,retire,restart,lose,rewind; all; none; default (all but restart and lose; with -unfenced, the kinds that take a lease from a live holder: stop,kill,clock,latency,commit)")
	fs.DurationVar(&cfg.NemesisEvery, "nemesis-every", 0, "mean time between faults (default the TTL)")
	fs.StringVar(&cfg.Restart, "pgdata", "", "the data directory of the cluster, for -nemesis restart (default: ask the server)")
	fs.IntVar(&tlcSample, "tlc-sample", 0, "replay this many threads, drawn from the seed, through TLC's trace validation (needs java and the jars, as tracecheck tlc finds them)")
	fs.StringVar(&cfg.TLCRoot, "root", ".", "the repository's root, whose spec/ and tla/ TLC reads (for -tlc-sample)")
	fs.StringVar(&cfg.Dir, "dir", "", "where histories, logs and the trace go (default a temporary directory, removed unless -keep)")
	fs.StringVar(&cfg.Bin, "bin", "", "the tracecheck binary the workers run (default this one)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the schema and the directory")
	fs.Var(&unfenced, "unfenced", "the workers run with fences off, the mutant the checks must catch: alone every fence, or a list of start, reply, abandon (exits 1 when caught, 5 when not)")
	fs.StringVar(&jsonOut, "json", "", "write the report as one JSON object to this file (- for stdout, which then carries nothing else)")
	fs.StringVar(&htmlOut, "html", "", "write the report as an HTML page with the timeline to this file")
	fs.BoolVar(&noShrink, "no-shrink", false, "do not shrink a rejected trace or a non-linearizable history to its shortest story")
	fs.StringVar(&cfg.Shrink.Dir, "shrink-dir", "", "where the shortest stories go (default beside the trace in -dir, removed unless -keep; another directory gets a copy of the trace and history too)")
	files := reportFlags(fs)
	if err := parse(fs, args, stdout, stderr, fleetUsage); err != nil {
		return err
	}
	if err := files.Check(); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{"unexpected argument " + fs.Arg(0) + " (fleet takes flags only)"}
	}
	if err := checkFleetNumbers(fs, cfg, tlcSample); err != nil {
		return err
	}
	if nemesis != "default" {
		kinds, err := fleet.ParseKinds(nemesis)
		if err != nil {
			return usageError{err.Error()}
		}
		cfg.Nemesis, cfg.NoNemesis = kinds, len(kinds) == 0
	}
	cfg.Shrink.Off = noShrink
	if fi, err := os.Stat(cfg.Shrink.Dir); cfg.Shrink.Dir != "" && err == nil && !fi.IsDir() {
		return usageError{fmt.Sprintf("-shrink-dir %s: is not a directory", cfg.Shrink.Dir)}
	}
	cfg.Unfenced = unfenced.Off
	if err := fleetTLCSample(ctx, &cfg, tlcSample); err != nil {
		return err
	}
	if cfg.Bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.Bin = exe
	}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	for _, out := range []struct{ flag, path string }{{"-json", jsonOut}, {"-html", htmlOut}} {
		if out.path != "" && out.path != "-" {
			if fi, err := os.Stat(out.path); err == nil && fi.IsDir() {
				return usageError{fmt.Sprintf("%s %s: is a directory", out.flag, out.path)}
			}
		}
	}
	progress := stdout
	if jsonOut == "-" {
		progress = stderr
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := fleet.Run(ctx, cfg, progress)
	if err != nil {
		if errors.Is(err, fleet.ErrConfig) {
			return usageError{err.Error()}
		}
		return err
	}
	rep.WriteText(progress)
	var stories bytes.Buffer
	printFleetStories(io.MultiWriter(progress, &stories), rep.Stories)
	if files.Wanted() {
		defer func() { err = writeReports(files, fleetVerdicts(rep, stories.String(), err), err) }()
	}
	if err := writeReport(jsonOut, stdout, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}); err != nil {
		return err
	}
	if err := writeReport(htmlOut, stdout, rep.WriteHTML); err != nil {
		return err
	}
	if err := fleetVerdict(rep, unfenced.Mutant()); err != nil {
		if jsonOut == "-" {
			return jsonTaken{err} // stdout carries the report
		}
		return err
	}
	fmt.Fprintln(progress, "PASS")
	return nil
}

// checkFleetNumbers refuses a numeric flag out of its range. Zero means a
// default inside fleet.Config; on the command line the defaults are
// spelled out, so a zero here is the user's, and wrong.
func checkFleetNumbers(fs *flag.FlagSet, cfg fleet.Config, tlcSample int) error {
	for _, c := range []struct {
		flag, want string
		bad        bool
	}{
		{"-procs", "at least 1", cfg.Procs < 1}, {"-threads", "at least 1", cfg.Threads < 1},
		{"-messages", "at least 1", cfg.Messages < 1 && isSet(fs, "messages")}, {"-posters", "at least 1", cfg.Posters < 1},
		{"-ttl", "at least " + fleet.MinTTL.String(), cfg.TTL < fleet.MinTTL}, {"-poll", "positive", cfg.Poll <= 0},
		{"-timeout", "positive", cfg.Timeout <= 0}, {"-porcupine-timeout", "positive", cfg.PorcupineTimeout <= 0},
		{"-agent-max", "not negative", cfg.AgentMax < 0}, {"-max-skew", "not negative", cfg.MaxSkew < 0},
		{"-nemesis-every", "not negative", cfg.NemesisEvery < 0}, {"-duration", "not negative", cfg.Duration < 0},
		{"-ask", "between 0 and 1", !(cfg.Ask >= 0 && cfg.Ask <= 1)}, {"-tlc-sample", "not negative", tlcSample < 0},
	} {
		if c.bad {
			return usageError{fmt.Sprintf("%s %s: must be %s", c.flag, fs.Lookup(c.flag[1:]).Value, c.want)}
		}
	}
	return nil
}

// fleetTLCSample finds TLC's jars for -tlc-sample (n threads replayed
// through TLC); 0 needs none.
func fleetTLCSample(ctx context.Context, cfg *fleet.Config, tlcSample int) error {
	if tlcSample <= 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(cfg.TLCRoot, "tla", tlc.TraceModule)); err != nil {
		return usageError{fmt.Sprintf("-root %s holds no tla/%s: run from the repository's root or give -root", cfg.TLCRoot, tlc.TraceModule)}
	}
	env, err := tlc.Find(ctx, findConfig(cfg.TLCRoot))
	if err != nil {
		return fmt.Errorf("-tlc-sample: %w", err)
	}
	if env.CommunityJar == "" {
		return fmt.Errorf("-tlc-sample: no %s for the trace spec (set %s)", tlc.CommunityName, tlc.EnvCommunity)
	}
	cfg.TLC, cfg.TLCSample = &env, tlcSample
	return nil
}

// writeReport writes with write to path ("-" for stdout, "" for nowhere).
func writeReport(path string, stdout io.Writer, write func(io.Writer) error) error {
	switch path {
	case "":
		return nil
	case "-":
		return write(stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fleetVerdict turns a report into the exit code's error: nil (0), 1 a
// check failed (or, for a mutant, it was caught), 3 porcupine timed out
// with nothing else wrong, 5 a mutant survived.
func fleetVerdict(rep *fleet.Report, mutant bool) error {
	problems := strings.Join(rep.Problems, "\n")
	switch {
	case mutant && !rep.Passed():
		return failure{exitFailed, "FAIL (as it must with fences off: " + rep.Fences + "): the mutant was caught\n" + problems}
	case mutant && rep.Inconclusive:
		return failure{exitInconclusive, "INCONCLUSIVE: the mutant was not caught and porcupine timed out: " + rep.LinResult}
	case mutant:
		return failure{exitSurvived, "SURVIVED: fences " + rep.Fences + " and no check caught it in this run; " + rep.SurvivorNote()}
	case !rep.Passed():
		return failure{exitFailed, "FAIL\n" + problems}
	case rep.Inconclusive:
		return failure{exitInconclusive, "INCONCLUSIVE: " + rep.LinResult}
	}
	return nil
}

// fleetVerdicts is fleet's verdicts for -junit and -summary: one per check
// of the run (a failed one's message is the problem found; the trace's and
// the history's stories are the shrunk ones printed), and the verdict.
func fleetVerdicts(rep *fleet.Report, stories string, err error) *report.Report {
	r := &report.Report{Name: "tracecheck fleet"}
	check := func(name string, prefixes ...string) report.Verdict {
		v := report.Verdict{Suite: "fleet: checks", Name: name, Status: report.Passed}
		for _, p := range rep.Problems {
			for _, pre := range prefixes {
				if strings.HasPrefix(p, pre) {
					v.Status = report.Failed
					v.Message = strings.TrimPrefix(strings.TrimSpace(v.Message+"\n"+p), "\n")
				}
			}
		}
		return v
	}
	for _, c := range []struct{ name, prefix string }{
		{"I1_ConsumedAtMostOnce", "I1_"}, {"I3_OneActiveRun", "I3_"}, {"NoLiveAbandon", "NoLiveAbandon"},
		{"Liveness", "Liveness"}, {"commit unknown resolutions", "commit unknown"},
	} {
		r.Add(check(c.name, c.prefix))
	}
	trace := report.Verdict{Suite: "fleet: checks", Name: "trace (the Go trace checker)", Status: report.Passed, Story: rep.TraceFile}
	if !rep.TraceAccepted {
		trace.Status, trace.Message, trace.Story = report.Failed, rep.TraceError, stories
	}
	r.Add(trace)
	hist := report.Verdict{Suite: "fleet: checks", Name: "history (porcupine)", Status: report.Passed, Story: rep.LinResult}
	switch {
	case rep.Inconclusive:
		hist.Status, hist.Message = report.Skipped, "inconclusive: "+rep.LinResult
	case !rep.Linearizable:
		hist.Status, hist.Message, hist.Story = report.Failed, rep.LinResult, stories
	}
	r.Add(hist)
	tlcCheck := check("TLC trace validation (-tlc-sample)", "TLC")
	if strings.HasPrefix(rep.TLC, "not run") {
		tlcCheck.Status, tlcCheck.Message = report.Skipped, rep.TLC
	} else if tlcCheck.Status == report.Passed {
		tlcCheck.Story = rep.TLC
	}
	r.Add(tlcCheck)
	status, msg := verdictOf(err)
	r.Add(report.Verdict{Suite: "fleet: verdict", Name: "fleet (fences " + rep.Fences + ")", Status: status, Message: msg})
	return r
}

// printFleetStories prints the run's failures shrunk to their stories.
func printFleetStories(out io.Writer, stories []fleet.Story) {
	for _, st := range stories {
		switch {
		case st.Error != "":
			fmt.Fprintf(out, "\n%s: not shrunk: %s\n", st.Failure, st.Error)
		case st.Trace != nil:
			printTraceStory(out, "fleet", *st.Trace, st.Files)
		case st.History != nil:
			printLinStory(out, "fleet", *st.History, st.Files)
		}
	}
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}
