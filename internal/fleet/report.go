package fleet

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// Report is what a fleet run measured and found. Its JSON form is what
// `tracecheck fleet -json` prints: CI reads posted, consumed_once,
// consumed_twice, lost, max_active_runs, handover_p50_ms, handover_p99_ms,
// nemesis, trace_accepted and linearizable.
type Report struct {
	Schema   string  `json:"schema"`
	Dir      string  `json:"dir,omitempty"` // kept with -keep
	Procs    int     `json:"procs"`
	Threads  int     `json:"threads"`
	Posters  int     `json:"posters"`
	TTLMs    float64 `json:"ttl_ms"`
	PollMs   float64 `json:"poll_ms"`
	Turns    int     `json:"turns"` // each worker's turns at once
	Agent    string  `json:"agent"` // the workers' agent (-agent)
	Fences   string  `json:"fences"`
	Seed     uint64  `json:"seed"`
	ElapsedS float64 `json:"elapsed_s"`
	Drained  bool    `json:"drained"` // no thread had work when the run ended

	Posted        int `json:"posted"`
	ConsumedOnce  int `json:"consumed_once"`
	ConsumedTwice int `json:"consumed_twice"` // must be 0
	Lost          int `json:"lost"`           // must be 0
	// MaxActiveRuns is the most runs of one thread active at once (must
	// be at most 1); LiveAbandoned counts runs abandoned while their own
	// claim held the lease (must be 0).
	MaxActiveRuns int `json:"max_active_runs"`
	LiveAbandoned int `json:"live_runs_abandoned"`
	// Crashes counts Crash lines: turns given up on an error, among them
	// most writes whose commit outcome was unknown (the runner gives the
	// claim up; the next claimant abandons what did start).
	Crashes int `json:"crashes"`
	// FusedStarts counts the runs started in the transaction of the end
	// of the run before (core.Workspace.RunEndThenStart), from the
	// processes' histories: a RunEnd, Plan and RunStart with one call
	// and return.
	FusedStarts int `json:"fused_starts"`
	// SharedCommits counts, from storage, the transactions that wrote
	// events of two threads or more: writes that went in one round trip
	// and shared its commit (store/postgres, trips.go), each fenced by its
	// own thread's holder. SharedCommitWrites is the threads' writes in
	// them.
	SharedCommits      int `json:"shared_commits"`
	SharedCommitWrites int `json:"shared_commit_writes"`
	// CrashesAfterLoss counts the rounds the trace's merge ended with a
	// Crash of its own, because storage lost writes they had made: no
	// process traced those, so Crashes leaves them out.
	CrashesAfterLoss int `json:"crashes_after_loss,omitempty"`
	// CommitUnknown counts the writes whose commit outcome was unknown
	// and how each was resolved.
	CommitUnknown CommitUnknown `json:"commit_unknown"`
	// StorageLost counts, by action, the writes a process was told had
	// committed that storage's log no longer holds: storage lost commits
	// it acknowledged (KindLose). The checks judge what storage kept, and
	// the messages are counted from storage, so a lost post is not a lost
	// message, nor a lost consumption a message consumed twice.
	// StorageLostWrites is their sum, PostsLost their Posts.
	StorageLost       map[core.Action]int `json:"storage_lost,omitempty"`
	StorageLostWrites int                 `json:"storage_lost_writes"`
	PostsLost         int                 `json:"posts_lost"`

	// Handovers and their figures are from when a claim was due
	// (Handover.AfterExpiry); the raw figures count from the lease's
	// expiry alone, including the time a thread had nothing to do.
	Handovers       []Handover `json:"handovers"`
	HandoverP50Ms   float64    `json:"handover_p50_ms"`
	HandoverP99Ms   float64    `json:"handover_p99_ms"`
	HandoverMaxMs   float64    `json:"handover_max_ms"`
	HandoverBoundMs float64    `json:"handover_bound_ms"` // TTL + one poll
	// HandoverWithin counts the handovers within the bound.
	HandoverWithin int `json:"handover_within_bound"`
	// HandoverIdle counts the threads the killed process had left with
	// nothing to do, whose handover counts from their next post.
	HandoverIdle     int     `json:"handover_idle"`
	HandoverRawP50Ms float64 `json:"handover_raw_p50_ms"`
	HandoverRawP99Ms float64 `json:"handover_raw_p99_ms"`
	// HandoverSlowFaults counts the handovers past the bound by the kinds
	// of fault that overlapped their wait on their claimant or the server
	// (Handover.Faults; a handover counts once for each kind it waited
	// behind); HandoverSlowNoFault counts those no fault overlapped.
	HandoverSlowFaults  map[Kind]int `json:"handover_slow_faults,omitempty"`
	HandoverSlowNoFault int          `json:"handover_slow_no_fault"`

	Nemesis map[Kind]int `json:"nemesis"`
	// Rewinds counts the Claims KindRewind took back from storage (each
	// also counted in StorageLost); RewindsRetaken those whose version
	// another worker's write took again, the log unchanged, before the
	// Claim's own worker went on (the interleaving the rewind is for);
	// RewindsMissed those written otherwise first (a Post, a version
	// past it); RewindsUnclaimed those nobody wrote in time.
	Rewinds          int                `json:"rewinds"`
	RewindsRetaken   int                `json:"rewinds_retaken"`
	RewindsMissed    int                `json:"rewinds_missed"`
	RewindsUnclaimed int                `json:"rewinds_unclaimed"`
	Events           []Event            `json:"events"`
	Throughput       []ThroughputBucket `json:"throughput"`

	TraceFile string `json:"trace_file"`
	// TraceRemoved: the trace went with the run's temporary directory
	// (no -keep, no -dir).
	TraceRemoved bool                `json:"trace_removed,omitempty"`
	TraceLines   int                 `json:"trace_lines"`
	StoredWrites int                 `json:"stored_writes"`
	Actions      map[core.Action]int `json:"actions"`
	// UnfencedWrites counts, for a mutant (fences off), the trace's lines
	// of the writes whose fence is off (RunStart, Reply, Abandon): a
	// mutant that survives a run with none was never given the chance to
	// do harm.
	UnfencedWrites  map[core.Action]int `json:"unfenced_writes,omitempty"`
	LapsesInferred  int                 `json:"lapses_inferred"`
	InvariantChecks int                 `json:"invariant_checks"`
	TraceAccepted   bool                `json:"trace_accepted"`
	TraceError      string              `json:"trace_error,omitempty"`
	Operations      int                 `json:"operations"`
	Linearizable    bool                `json:"linearizable"`
	LinResult       string              `json:"porcupine"`
	// TLC is TLC's trace validation of a sample of threads: "k of n
	// threads accepted", or why it did not run.
	TLC        string   `json:"tlc"`
	TLCThreads []string `json:"tlc_threads,omitempty"`
	// Inconclusive: porcupine timed out.
	Inconclusive bool `json:"inconclusive"`

	// Stories are the failures shrunk to their shortest stories
	// (Config.Shrink): the rejected trace's, the history's.
	Stories []Story `json:"stories,omitempty"`

	Processes []ProcReport `json:"processes"`
	// Problems lists every check that failed; empty when all passed.
	Problems []string `json:"problems"`
}

// ProcReport is one worker process and what the nemesis did to it.
type ProcReport struct {
	Name string        `json:"name"`
	Pid  int           `json:"pid"`
	Skew time.Duration `json:"skew_ns"`
	Fate []string      `json:"fate"`
}

func (r *run) newReport(drained bool) *Report {
	rep := &Report{
		Schema: r.schema, Procs: r.cfg.Procs, Threads: r.cfg.Threads, Posters: r.cfg.Posters,
		TTLMs: ms(r.cfg.TTL), PollMs: ms(r.cfg.Poll), Turns: turns(r.cfg.Turns), Agent: r.cfg.Agent, Fences: fencesText(r.cfg.Unfenced), Seed: r.cfg.Seed,
		ElapsedS: time.Since(r.start).Seconds(), Drained: drained, Nemesis: map[Kind]int{},
		Problems: []string{},
	}
	if r.cfg.Keep {
		rep.Dir = r.dir
	}
	r.mu.Lock()
	rep.Rewinds, rep.RewindsRetaken, rep.RewindsMissed, rep.RewindsUnclaimed = r.rewound, r.retaken, r.rewindMissed, r.unclaimed
	for _, e := range r.events {
		if e.Err == "" {
			rep.Nemesis[e.Kind]++
		}
	}
	r.mu.Unlock()
	return rep
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the p-th percentile (nearest rank) of sorted xs.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (rep *Report) summariseHandovers(bound time.Duration) {
	rep.HandoverBoundMs = ms(bound)
	var ds, raw []time.Duration
	for i, h := range rep.Handovers {
		ds = append(ds, max(h.AfterExpiry, 0))
		raw = append(raw, max(h.Raw, 0))
		if h.AfterExpiry <= bound {
			rep.HandoverWithin++
		} else {
			rep.attributeSlow(&rep.Handovers[i])
		}
		if h.Idle {
			rep.HandoverIdle++
		}
	}
	slices.Sort(ds)
	slices.Sort(raw)
	rep.HandoverP50Ms, rep.HandoverP99Ms = ms(percentile(ds, 50)), ms(percentile(ds, 99))
	rep.HandoverRawP50Ms, rep.HandoverRawP99Ms = ms(percentile(raw, 50)), ms(percentile(raw, 99))
	if len(ds) > 0 {
		rep.HandoverMaxMs = ms(ds[len(ds)-1])
	}
}

// attributeSlow names in h.Faults the faults of rep.Events on h's
// claimant or on the server that overlapped its wait, and counts them.
func (rep *Report) attributeSlow(h *Handover) {
	due := h.At - max(h.AfterExpiry, 0)
	kinds := map[Kind]bool{}
	for _, e := range rep.Events {
		if e.Err != "" || (e.Target != h.To && e.Target != "") || e.End < due || e.Start > h.At {
			continue
		}
		h.Faults = append(h.Faults, fmt.Sprintf("%s@%.2fs", e.Kind, e.Start.Seconds()))
		kinds[e.Kind] = true
	}
	if len(kinds) == 0 {
		rep.HandoverSlowNoFault++
		return
	}
	if rep.HandoverSlowFaults == nil {
		rep.HandoverSlowFaults = map[Kind]int{}
	}
	for k := range kinds {
		rep.HandoverSlowFaults[k]++
	}
}

// SlowLine is the report's line on the handovers past the bound (also the
// HTML page's).
func (rep *Report) SlowLine() string {
	slow := len(rep.Handovers) - rep.HandoverWithin
	if slow == 0 {
		return "none"
	}
	var parts []string
	for _, k := range Kinds() {
		if n := rep.HandoverSlowFaults[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	line := fmt.Sprintf("%d past the bound: %d waited behind a fault on their claimant or the server", slow, slow-rep.HandoverSlowNoFault)
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	return line + fmt.Sprintf(", %d behind none", rep.HandoverSlowNoFault)
}

// SurvivorNote says, for a mutant no check caught, how many of the writes
// whose fence was off the run made: none means the run could not show
// the mutant, which is then no sign that the checks are blind.
func (rep *Report) SurvivorNote() string {
	var parts []string
	n := 0
	for _, a := range core.Actions() {
		if k, ok := rep.UnfencedWrites[a]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", a, k))
			n += k
		}
	}
	if n == 0 {
		return "the run made none of the writes whose fence is off (" + strings.Join(parts, ", ") + "), so it could not show the mutant: try other seeds"
	}
	return "the writes whose fence is off, made in this run: " + strings.Join(parts, ", ")
}

// Passed reports whether every check passed (porcupine may still have
// been inconclusive).
func (rep *Report) Passed() bool { return len(rep.Problems) == 0 }

// WriteText writes the report as the command prints it.
func (rep *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\nprocesses\n")
	for _, p := range rep.Processes {
		fate := strings.Join(p.Fate, "; ")
		if fate == "" {
			fate = "ran to the end"
		}
		fmt.Fprintf(w, "  %-4s pid %-7d lease clock %+v  %s\n", p.Name, p.Pid, p.Skew, fate)
	}
	fmt.Fprintf(w, "nemesis             %s\n", rep.nemesisLine())
	fmt.Fprintf(w, "messages            %d posted, %d consumed exactly once, %d more than once, %d lost\n",
		rep.Posted, rep.ConsumedOnce, rep.ConsumedTwice, rep.Lost)
	fmt.Fprintf(w, "runs                at most %d active at once in a thread; %d abandoned live; %d turns crashed (Crash)%s; %d started with the end of the run before\n",
		rep.MaxActiveRuns, rep.LiveAbandoned, rep.Crashes, rep.crashesAfterLossNote(), rep.FusedStarts)
	fmt.Fprintf(w, "shared commits      %d transactions wrote events of 2 threads or more (%d threads' writes)\n", rep.SharedCommits, rep.SharedCommitWrites)
	fmt.Fprintf(w, "commit unknown      %s\n", rep.CommitUnknown.Line())
	fmt.Fprintf(w, "storage lost        %s\n", rep.storageLostLine())
	if len(rep.Handovers) > 0 {
		fmt.Fprintf(w, "handover after kill %d threads: p50 %.0f ms, p99 %.0f ms, max %.0f ms after the lease expired (or, for the %d the killed process left with nothing to do, after their next post); %d of %d within TTL + one poll (%.0f ms); from the expiry alone p50 %.0f ms, p99 %.0f ms\n",
			len(rep.Handovers), rep.HandoverP50Ms, rep.HandoverP99Ms, rep.HandoverMaxMs, rep.HandoverIdle, rep.HandoverWithin, len(rep.Handovers), rep.HandoverBoundMs, rep.HandoverRawP50Ms, rep.HandoverRawP99Ms)
		fmt.Fprintf(w, "slow handovers      %s\n", rep.SlowLine())
	} else {
		fmt.Fprintf(w, "handover after kill none measured (no SIGKILL of a process holding a lease)\n")
	}
	where := rep.TraceFile
	if rep.TraceRemoved {
		where += ", removed with the run's temporary directory (-keep or -dir keeps it)"
	}
	fmt.Fprintf(w, "trace lines         %d (%d writes as storage committed them) in %s\n", rep.TraceLines, rep.StoredWrites, where)
	fmt.Fprintf(w, "spec actions        %s; Lapse %d inferred\n", actionCounts(rep.Actions), rep.LapsesInferred)
	fmt.Fprintf(w, "invariant checks    %d\n", rep.InvariantChecks)
	verdict := "accepted"
	if !rep.TraceAccepted {
		verdict = "REJECTED"
	}
	fmt.Fprintf(w, "Go trace checker    %s\n", verdict)
	if rep.Linearizable {
		fmt.Fprintf(w, "porcupine           linearizable (%d operations)\n", rep.Operations)
	} else {
		fmt.Fprintf(w, "porcupine           %s\n", rep.LinResult)
	}
	fmt.Fprintf(w, "TLC                 %s\n", rep.TLC)
	fmt.Fprintf(w, "time                %.1fs\n", rep.ElapsedS)
	if rep.Dir != "" {
		fmt.Fprintf(w, "kept                %s (schema %s)\n", rep.Dir, rep.Schema)
	}
}

func (rep *Report) nemesisLine() string {
	var parts []string
	for _, k := range Kinds() {
		if n := rep.Nemesis[k]; n > 0 {
			part := fmt.Sprintf("%s %d", k, n)
			if k == KindRewind {
				part += fmt.Sprintf(" (%d Claims lost; at their version again, the log unchanged, before their worker went on: %d; written otherwise first %d; by nobody in time %d)",
					rep.Rewinds, rep.RewindsRetaken, rep.RewindsMissed, rep.RewindsUnclaimed)
			}
			parts = append(parts, part)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// noteStorageLost counts the acknowledged writes storage lost (lost, from
// tracecheck.MergeHistories).
func (rep *Report) noteStorageLost(lost []core.TraceEvent) {
	rep.StorageLostWrites = len(lost)
	if len(lost) == 0 {
		return
	}
	rep.StorageLost = map[core.Action]int{}
	for _, ev := range lost {
		rep.StorageLost[ev.Action]++
		if ev.Action == core.ActionPost {
			rep.PostsLost++
		}
	}
}

// actionCounts lists the actions counted in n, in the spec's order, as
// "Claim 3, Renew 2"; those counted 0 are left out.
func actionCounts(n map[core.Action]int) string {
	var parts []string
	for _, a := range core.Actions() {
		if k := n[a]; k > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", a, k))
		}
	}
	return strings.Join(parts, ", ")
}

// storageLostLine is the report's line on what storage lost.
func (rep *Report) storageLostLine() string {
	if rep.StorageLostWrites == 0 {
		return "no acknowledged write"
	}
	return fmt.Sprintf("%d acknowledged writes (%s); %d posts acknowledged and lost", rep.StorageLostWrites, actionCounts(rep.StorageLost), rep.PostsLost)
}

// storageLost says how many acknowledged writes storage lost.
func (rep *Report) storageLost() string {
	return fmt.Sprintf("storage lost %d acknowledged writes", rep.StorageLostWrites)
}

// blame prefixes a failure with what storage lost, when it lost any: the
// checks judge what storage kept, and a failure then may be storage's.
func (rep *Report) blame(failure string) string {
	if rep.StorageLostWrites == 0 {
		return failure
	}
	return rep.storageLost() + "; then: " + failure
}

// crashesAfterLossNote names the rounds the merge ended after storage lost
// their writes, when there are any.
func (rep *Report) crashesAfterLossNote() string {
	if rep.CrashesAfterLoss == 0 {
		return ""
	}
	return fmt.Sprintf("; %d more rounds ended by the merge, their writes lost by storage", rep.CrashesAfterLoss)
}
