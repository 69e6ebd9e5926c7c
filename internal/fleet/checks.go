package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/tlc"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// check reads what the execution left and checks it: every message
// consumed once (from storage), the whole trace by the Go checker, the
// history by porcupine; and it measures the handovers after each SIGKILL.
func (r *run) check(ctx context.Context, drained bool) (*Report, error) {
	rep := r.newReport(drained)
	var stored []core.TraceEvent
	var err error
	for attempt := 0; ; attempt++ {
		if stored, err = r.store.TraceLines(ctx); err == nil || attempt == 50 || ctx.Err() != nil {
			break
		}
		hold(ctx, 200*time.Millisecond) // the server may be coming back from a restart
	}
	if err != nil {
		return nil, err
	}
	histories, err := readHistories(r.dir)
	if err != nil {
		return nil, err
	}
	tracePath := filepath.Join(r.dir, "trace.ndjson")
	merged, lost := tracecheck.MergeHistories(stored, histories)
	rep.noteStorageLost(lost)
	ordered, st, checkErr, err := checkTrace(tracePath, merged)
	if err != nil {
		return nil, err
	}
	// The same lines with their call and return times, which porcupine
	// checks: what to look at when it finds no linearization.
	if err := writeHistory(filepath.Join(r.dir, "merged.history"), ordered); err != nil {
		return nil, err
	}
	rep.TraceFile = tracePath
	rep.TraceRemoved = r.cfg.Dir == "" && !r.cfg.Keep
	rep.TraceLines, rep.StoredWrites = len(ordered), len(stored)
	rep.Actions = map[core.Action]int{}
	for _, a := range core.Actions() {
		if n := st.PerAction[a]; n > 0 {
			rep.Actions[a] = n
		}
	}
	rep.LapsesInferred, rep.InvariantChecks = st.LapsesInferred, st.InvariantChecks
	rep.UnfencedWrites = unfencedWrites(r.cfg.Unfenced, st.PerAction)
	rep.noteTrace(checkErr)

	ops := tracecheck.OperationsFromTrace(ordered)
	rep.Operations = len(ops)
	_, linErr := tracecheck.CheckLinearizable(ops, r.cfg.PorcupineTimeout, filepath.Join(r.dir, "porcupine.html"))
	rep.noteLinearizable(linErr)

	r.checkTLC(ctx, rep, ordered, tracePath)
	r.shrinkFailures(ctx, rep, ordered, checkErr, linErr)

	if err := r.countMessages(ctx, rep); err != nil {
		return nil, err
	}
	rep.crossCheckCounts(ordered)
	rep.MaxActiveRuns, rep.LiveAbandoned = activeRuns(ordered)
	rep.Problems = append(rep.Problems, rep.runProblems()...)
	rep.Crashes, rep.CrashesAfterLoss = countCrashes(ordered)
	rep.FusedStarts = countFusedStarts(histories)
	if err := r.countSharedCommits(ctx, rep); err != nil {
		return nil, err
	}
	doubts, err := readDoubts(r.dir)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	kills := append([]kill(nil), r.kills...)
	rep.Events = append([]Event(nil), r.events...)
	overran := slices.Clone(r.overran)
	r.mu.Unlock()
	killed := map[string]bool{}
	for _, k := range kills {
		killed[k.proc.name] = true
	}
	crashedAt, ended := roundEnds(histories)
	rep.CommitUnknown = countDoubts(doubts, stored, killed, crashedAt, ended)
	rep.doubtProblems()
	rep.stopProblems(overran, r.stopGrace)

	rep.Handovers = r.handovers(ordered, kills)
	rep.summariseHandovers(r.cfg.TTL + r.cfg.Poll)
	rep.Throughput = throughput(ordered, r.start, time.Since(r.start))
	r.describeProcs(rep)
	return rep, nil
}

// roundEnds reads the workers' histories for how their claims' rounds
// ended: crashedAt, the tick each claim's Crash read; ended, the claims
// whose round a traced line ended (an action core.ActionTable marks
// EndsRound: a Release, a refusal that ends the round, and the like).
// Lines with no holder (Posts) count for neither.
func roundEnds(histories [][]core.TraceEvent) (crashedAt map[core.Holder]uint64, ended map[core.Holder]bool) {
	crashedAt, ended = map[core.Holder]uint64{}, map[core.Holder]bool{}
	for _, h := range histories {
		for _, ev := range h {
			if ev.Holder == "" {
				continue
			}
			if ev.Action == core.ActionCrash {
				crashedAt[ev.Holder] = ev.Tick
			}
			if info, _ := core.Info(ev.Action); info.EndsRound {
				ended[ev.Holder] = true
			}
		}
	}
	return crashedAt, ended
}

// checkTrace writes the merged lines to path, thread by thread, each in
// trace order, and checks them in that order, so that a violation's
// path:N is line N of the file written. It returns the lines as written.
// The error is a write's; checkErr is the checker's verdict.
func checkTrace(path string, merged []core.TraceEvent) (ordered []core.TraceEvent, st tracecheck.Stats, checkErr, err error) {
	ordered = traceOrder(merged)
	if err := writeTrace(path, ordered); err != nil {
		return nil, st, nil, err
	}
	st, checkErr = tracecheck.Check(ordered, tracecheck.WithFile(path))
	return ordered, st, checkErr, nil
}

// traceOrder returns the lines thread by thread, each in trace order.
func traceOrder(lines []core.TraceEvent) []core.TraceEvent {
	out := make([]core.TraceEvent, 0, len(lines))
	for _, th := range tracecheck.Order(lines) {
		for _, l := range th.Lines {
			out = append(out, *l.Ev)
		}
	}
	return out
}

func writeTrace(path string, lines []core.TraceEvent) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tracecheck.WriteLines(f, lines); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkTLC replays a sample of threads, drawn from the seed, through
// TLC's trace validation, when the config gives TLC. TLC must agree with
// the Go checker on each: a thread the Go checker accepted that TLC
// rejects (or the reverse) is a problem as much as a rejection is.
func (r *run) checkTLC(ctx context.Context, rep *Report, ordered []core.TraceEvent, tracePath string) {
	if r.cfg.TLC == nil {
		rep.TLC = "not run (no -tlc-sample)"
		return
	}
	threads := tlc.SplitThreads(ordered) // file order, with file line numbers
	r.mu.Lock()
	r.rng.Shuffle(len(threads), func(i, j int) { threads[i], threads[j] = threads[j], threads[i] })
	r.mu.Unlock()
	threads = threads[:min(r.cfg.TLCSample, len(threads))]
	scratch, err := os.MkdirTemp("", "fleet-tlc-")
	if err == nil {
		defer os.RemoveAll(scratch)
		err = tlc.CopySpecs(r.cfg.TLCRoot, scratch)
	}
	var rejectedAt []int
	if err == nil {
		rejectedAt, err = r.cfg.TLC.ValidateThreads(ctx, tlc.Batch{Dir: filepath.Join(scratch, "tla"), SpecDir: filepath.Join(scratch, "spec")}, threads)
	}
	if err != nil {
		rep.TLC = "could not run: " + err.Error()
		rep.Problems = append(rep.Problems, "TLC trace validation could not run: "+err.Error())
		return
	}
	rep.noteTLC(tracePath, threads, rejectedAt)
}

// noteTrace records the Go trace checker's verdict on the merged trace
// (checkErr: nil when it accepted it); a rejection is a problem.
func (rep *Report) noteTrace(checkErr error) {
	rep.TraceAccepted = checkErr == nil
	if checkErr != nil {
		rep.TraceError = rep.blame(checkErr.Error())
		rep.Problems = append(rep.Problems, rep.TraceError)
	}
}

// noteLinearizable records porcupine's verdict on the history (linErr:
// nil when linearizable); a history that is not is a problem, one it
// could not decide in time is inconclusive.
func (rep *Report) noteLinearizable(linErr error) {
	switch {
	case linErr == nil:
		rep.Linearizable, rep.LinResult = true, "linearizable"
	case errors.Is(linErr, tracecheck.ErrLinearizabilityUnknown):
		rep.LinResult, rep.Inconclusive = linErr.Error(), true
	default:
		rep.LinResult = rep.blame(linErr.Error())
		rep.Problems = append(rep.Problems, rep.LinResult)
	}
}

// noteTLC records TLC's verdicts on the sampled threads (rejectedAt[i]:
// the file line TLC rejected thread i at, 0 when it accepted it), each
// against the Go checker's on the thread alone: a rejection is a problem,
// and so is a disagreement, of verdict or of line.
func (rep *Report) noteTLC(tracePath string, threads []tlc.Thread, rejectedAt []int) {
	accepted := 0
	for i, th := range threads {
		rep.TLCThreads = append(rep.TLCThreads, string(th.ID))
		at := rejectedAt[i]
		if at == 0 {
			accepted++
		} else {
			rep.Problems = append(rep.Problems, fmt.Sprintf("TLC trace validation: %s:%d: thread %s rejected", tracePath, at, th.ID))
		}
		// The Go checker's verdict on the thread alone, at its file line.
		goAt := 0
		var v *tracecheck.Violation
		if _, err := tracecheck.Check(th.Lines); errors.As(err, &v) {
			goAt = th.N[v.Line-1]
		}
		if goAt != at {
			rep.Problems = append(rep.Problems, fmt.Sprintf("TLC and the Go checker disagree on thread %s of %s: TLC rejects at line %d, the Go checker at %d (0: accepted)", th.ID, tracePath, at, goAt))
		}
	}
	rep.TLC = fmt.Sprintf("%d of %d threads accepted", accepted, len(threads))
}

func writeHistory(path string, lines []core.TraceEvent) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := tracecheck.NewHistoryWriter(f)
	for _, l := range lines {
		w.Trace(l)
	}
	if err := w.Err(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// countFusedStarts counts, in the processes' histories, the RunStarts
// traced in the transaction of a RunEnd and its Plan: the three lines of
// one holder with one call and return (other turns of the process may
// trace lines between them).
func countFusedStarts(histories [][]core.TraceEvent) int {
	type txn struct {
		holder    core.Holder
		call, ret int64
	}
	n := 0
	for _, h := range histories {
		lines := map[txn][]core.Action{}
		for _, ev := range h {
			k := txn{ev.Holder, ev.Call, ev.Return}
			lines[k] = append(lines[k], ev.Action)
		}
		for _, as := range lines {
			if slices.Equal(as, []core.Action{core.ActionRunEnd, core.ActionPlan, core.ActionRunStart}) {
				n++
			}
		}
	}
	return n
}

func readHistories(dir string) ([][]core.TraceEvent, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.history"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out [][]core.TraceEvent
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		h, err := tracecheck.ReadHistory(f, p)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// countSharedCommits counts, from storage, the transactions that wrote
// events of two threads or more (an event row's xmin is the transaction
// that inserted it: events are never updated), and the threads' writes in
// them.
func (r *run) countSharedCommits(ctx context.Context, rep *Report) error {
	q := `SELECT count(*), coalesce(sum(n), 0) FROM (SELECT count(DISTINCT thread_id) AS n FROM ` +
		pgx.Identifier{r.schema}.Sanitize() + `.events GROUP BY xmin::text HAVING count(DISTINCT thread_id) > 1) AS shared`
	return r.cluster.admin(ctx, func(conn *pgx.Conn) error {
		if err := conn.QueryRow(ctx, q).Scan(&rep.SharedCommits, &rep.SharedCommitWrites); err != nil {
			return fmt.Errorf("count shared commits: %w", err)
		}
		return nil
	})
}

// countMessages counts, from storage, the messages posted and how many
// times each was consumed.
func (r *run) countMessages(ctx context.Context, rep *Report) error {
	ws := core.NewWorkspace(r.store, core.SystemClock{})
	var lostIn []lostMessage
	for _, id := range r.threads {
		th, err := ws.Thread(ctx, id)
		if err != nil {
			return err
		}
		n := th.Consumed()
		rep.Posted += len(th.Messages)
		for seq := core.Seq(1); seq <= th.Last(); seq++ {
			switch c := n[seq]; {
			case c == 0:
				rep.Lost++
				lostIn = append(lostIn, lostMessage{id, seq})
			case c == 1:
				rep.ConsumedOnce++
			default:
				rep.ConsumedTwice++
			}
		}
	}
	rep.Problems = append(rep.Problems, rep.countProblems(r.cfg.Timeout, func() string { return r.describeLost(ctx, lostIn) })...)
	return nil
}

// runProblems are the problems of the runs the trace shows: runs of one
// thread active at once (I3), runs abandoned under their own live claim.
func (rep *Report) runProblems() []string {
	var ps []string
	if rep.MaxActiveRuns > 1 {
		ps = append(ps, fmt.Sprintf("I3_OneActiveRun: %d runs of one thread active at once", rep.MaxActiveRuns))
	}
	if rep.LiveAbandoned > 0 {
		ps = append(ps, fmt.Sprintf("NoLiveAbandon: %d runs abandoned while their own claim held the lease", rep.LiveAbandoned))
	}
	return ps
}

// countProblems are the problems of the messages storage counts: one
// consumed more than once (I1), ones never consumed (with describeLost's
// account of them), threads with work left timeout after the last post.
func (rep *Report) countProblems(timeout time.Duration, describeLost func() string) []string {
	var ps []string
	if rep.ConsumedTwice > 0 {
		ps = append(ps, fmt.Sprintf("I1_ConsumedAtMostOnce: %d messages consumed more than once", rep.ConsumedTwice))
	}
	if rep.Lost > 0 {
		ps = append(ps, fmt.Sprintf("Liveness: %d of %d messages never consumed", rep.Lost, rep.Posted), describeLost())
	}
	if !rep.Drained {
		ps = append(ps, fmt.Sprintf("Liveness: threads still had work %v after the last post", timeout))
	}
	return ps
}

// lostMessage is a message no write consumed.
type lostMessage struct {
	thread core.ThreadID
	seq    core.Seq
}

// maxLostShown bounds the threads describeLost shows.
const maxLostShown = 2

// describeLost shows, for the first threads with a message no write
// consumed, the thread's row and its log as storage has them, so that a
// failure seen once (in CI, on a cluster since thrown away) can be read
// afterwards: the row's taken cursor and log end against the events.
func (r *run) describeLost(ctx context.Context, lost []lostMessage) string {
	var b strings.Builder
	shown := map[core.ThreadID]bool{}
	for _, m := range lost {
		fmt.Fprintf(&b, "thread %s: message %d never consumed", m.thread, m.seq)
		if shown[m.thread] || len(shown) == maxLostShown {
			b.WriteString("\n")
			continue
		}
		shown[m.thread] = true
		if err := r.cluster.admin(ctx, func(conn *pgx.Conn) error { return describeThread(ctx, conn, r.schema, m.thread, &b) }); err != nil {
			fmt.Fprintf(&b, "; its row and log could not be read: %v\n", err)
		}
	}
	return "Liveness detail:\n" + b.String()
}

// describeThread writes the thread's row and its events, one a line.
func describeThread(ctx context.Context, conn *pgx.Conn, schema string, id core.ThreadID, b *strings.Builder) error {
	s := pgx.Identifier{schema}.Sanitize()
	var row string
	if err := conn.QueryRow(ctx, `SELECT format('version %s, taken %s, last_message %s, active_runs %s, log_n %s, log_at %s, lease %s until %s',
		version, taken, last_message, active_runs, log_n, coalesce(log_at::text, '-'), coalesce(lease_holder, '-'), coalesce(lease_expires::text, '-')) FROM `+s+`.threads WHERE id = $1`, string(id)).Scan(&row); err != nil {
		return err
	}
	fmt.Fprintf(b, "; its row: %s\n", row)
	for _, q := range []struct{ title, sql string }{
		{"its events (seq version kind at message run request holder)",
			`SELECT format('  %s %s %s %s %s %s %s %s', seq, version, kind, at, message, run, request, holder) FROM ` + s + `.events WHERE thread_id = $1 ORDER BY seq`},
		{"its trace lines", `SELECT '  ' || line::text FROM ` + s + `.trace_lines WHERE thread_id = $1 ORDER BY tick`},
	} {
		rows, err := conn.Query(ctx, q.sql, string(id))
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		fmt.Fprintf(b, " %s:\n", q.title)
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	return nil
}

// crossCheckCounts counts the messages again from storage's trace lines
// (consumedFromLog), a record storage keeps apart from the threads' rows
// that countMessages reads, and names a disagreement as a problem: a
// count the report gets wrong (a duplicate dropped) cannot pass unseen.
func (rep *Report) crossCheckCounts(ordered []core.TraceEvent) {
	posted, once, twice, lost := consumedFromLog(ordered)
	if posted != rep.Posted || once != rep.ConsumedOnce || twice != rep.ConsumedTwice || lost != rep.Lost {
		rep.Problems = append(rep.Problems, fmt.Sprintf(
			"the counts disagree: storage's threads say %d posted, %d consumed once, %d more than once, %d never; its trace lines say %d, %d, %d, %d",
			rep.Posted, rep.ConsumedOnce, rep.ConsumedTwice, rep.Lost, posted, once, twice, lost))
	}
}

// consumedFromLog counts, from the trace lines of the writes storage
// kept, the messages posted (each thread's highest Post), and those
// consumed once, more than once and never: a run's start consumes its
// prompt, a reply its answer, a steering record the message it records.
func consumedFromLog(ordered []core.TraceEvent) (posted, once, twice, lost int) {
	type msg struct {
		thread core.ThreadID
		seq    core.Seq
	}
	last := map[core.ThreadID]core.Seq{}
	n := map[msg]int{}
	for _, ev := range ordered {
		if ev.Read {
			continue
		}
		switch ev.Action {
		case core.ActionPost:
			last[ev.Thread] = max(last[ev.Thread], ev.Msg)
		case core.ActionRunStart, core.ActionReply, core.ActionSteerRecord:
			n[msg{ev.Thread, ev.Msg}]++
		}
	}
	for th, l := range last {
		posted += int(l)
		for seq := core.Seq(1); seq <= l; seq++ {
			switch c := n[msg{th, seq}]; {
			case c == 0:
				lost++
			case c == 1:
				once++
			default:
				twice++
			}
		}
	}
	return posted, once, twice, lost
}

// activeRuns replays the runs' starts and ends in trace order: the most
// runs of one thread active at once, and how many runs were abandoned
// while their own claim held the lease.
func activeRuns(ordered []core.TraceEvent) (maxActive, liveAbandoned int) {
	type key struct {
		thread core.ThreadID
		run    core.RunID
	}
	active := map[key]core.Holder{}
	perThread := map[core.ThreadID]int{}
	for _, ev := range ordered {
		if ev.Read {
			continue
		}
		k := key{ev.Thread, ev.Run}
		switch ev.Action {
		case core.ActionRunStart:
			active[k] = ev.Holder
			perThread[ev.Thread]++
			maxActive = max(maxActive, perThread[ev.Thread])
		case core.ActionRunEnd, core.ActionAbandon:
			h, ok := active[k]
			if !ok {
				continue
			}
			if ev.Action == core.ActionAbandon && ev.Lease == h && h != ev.Holder {
				liveAbandoned++
			}
			delete(active, k)
			perThread[ev.Thread]--
		}
	}
	return maxActive, liveAbandoned
}

// Handover is how long a thread whose lease a SIGKILLed process held
// waited for another process's Claim.
type Handover struct {
	Thread core.ThreadID `json:"thread"`
	From   string        `json:"from"`
	To     string        `json:"to"`
	// At is the Claim's return, from the run's start.
	At time.Duration `json:"at_ns"`
	// AfterExpiry is from when a claim was due to the Claim's return: the
	// lease's expiry, as the claimant's clock saw it, or the kill, if
	// later; and when the thread had nothing to do then (every message
	// consumed, no run active, as storage's log says, whatever the writers
	// were told), the call of the next Post to it. A thread with no work
	// needs no claim: runners look only at threads with work.
	AfterExpiry time.Duration `json:"after_expiry_ns"`
	// Raw is from the lease's expiry (or the kill, if later) alone, work
	// or not: AfterExpiry plus the time the thread had nothing to do.
	Raw       time.Duration `json:"raw_ns"`
	AfterKill time.Duration `json:"after_kill_ns"`
	// Idle says the thread had nothing to do when its lease expired, so
	// AfterExpiry counts from the next Post.
	Idle bool `json:"idle"`
	// Faults, for a handover past the bound (TTL + one poll), names the
	// nemesis's faults on its claimant (To) or on the server whose time
	// overlapped its wait, from when a claim was due to the Claim's
	// return, as "kind@start": what a slow handover waited behind. Empty
	// when none did, or when it was within the bound.
	Faults []string `json:"faults,omitempty"`
}

// handovers finds, for each SIGKILL, the threads whose lease the killed
// process held (its last lease write on the thread was a Claim or Renew)
// and the next Claim of each by another process after the kill. It
// follows each thread's work as storage's log shows it (the newest message
// posted, the taken cursor, the runs active) to tell when a claim was due,
// which is only when the thread had work and its holder was gone. Every
// line in the log committed, whatever its writer was told: a line takes
// effect at the earliest moment it can have committed, its call (or the
// line before it's, if later), so that work starts at a Post's call and
// ends at the call of the write that consumed the last message or ended
// the last run. A write whose commit its writer never learned (no return)
// ends the work all the same: the thread is not counted busy on a belief
// that storage's log contradicts.
func (r *run) handovers(ordered []core.TraceEvent, kills []kill) []Handover {
	byName := map[string]*proc{}
	r.mu.Lock()
	for _, p := range r.procs {
		byName[p.name] = p
	}
	r.mu.Unlock()
	var out []Handover
	for _, k := range kills {
		killed := k.proc.name
		at := k.at.UnixNano()
		// The killed process's last Claim or Renew of the thread: its call,
		// and the lease's expiry it wrote, on the killed process's clock.
		var stamp, stampExpires int64
		holding := false
		var (
			thread        core.ThreadID
			posted, taken core.Seq
			active        int
			work          bool
			effect        int64        // when the line took effect, at the earliest
			changes       []workChange // the thread's work starting and ending, in line order
		)
		for _, ev := range ordered {
			if ev.Thread != thread {
				thread, holding, posted, taken, active, work, effect, changes = ev.Thread, false, 0, 0, 0, false, 0, changes[:0]
			}
			if ev.Read {
				continue
			}
			taken = ev.Taken
			switch ev.Action {
			case core.ActionPost:
				posted = max(posted, ev.Msg)
			case core.ActionRunStart:
				active++
			case core.ActionRunEnd, core.ActionAbandon:
				active--
			}
			// A write the process was killed in has no call: it took
			// effect after the line before it.
			effect = max(effect, ev.Call)
			if now := taken < posted || active > 0; now != work {
				changes = append(changes, workChange{effect, now})
				work = now
			}
			if ev.Proc == killed {
				switch ev.Action {
				case core.ActionClaim, core.ActionRenew:
					holding, stamp, stampExpires = true, ev.Call, ev.Expires
				case core.ActionRelease:
					holding = false
				}
				continue
			}
			if !holding || ev.Action != core.ActionClaim {
				continue
			}
			// Another process's Claim: the killed process holds the
			// lease no more. One before the kill took it from a live
			// holder; one whose return is unknown cannot be timed.
			holding = false
			if ev.Return == math.MaxInt64 || ev.Return < at {
				continue
			}
			q := byName[ev.Proc]
			if q == nil {
				continue
			}
			// The lease's expiry on the killed process's clock, and when
			// the claimant's clock reached it.
			// (A write the process was killed in has no call; its line
			// has the expiry all the same.)
			expires := time.Unix(0, stampExpires)
			if stampExpires == 0 {
				expires = time.Unix(0, stamp).Add(k.proc.offset(time.Unix(0, stamp)) + r.cfg.TTL)
			}
			seen := expires.Add(-q.offset(time.Unix(0, ev.Call)))
			from := max(seen.UnixNano(), at)
			due, idle := dueAt(changes, from)
			out = append(out, Handover{
				Thread: ev.Thread, From: killed, To: ev.Proc,
				At:          time.Unix(0, ev.Return).Sub(r.start),
				AfterExpiry: time.Duration(ev.Return - due),
				Raw:         time.Duration(ev.Return - from),
				AfterKill:   time.Duration(ev.Return - at),
				Idle:        idle,
			})
		}
	}
	return out
}

// workChange is a thread's work starting (a Post's call) or ending (the
// return of the write that left it nothing to do).
type workChange struct {
	at   int64
	work bool
}

// dueAt returns when a claim of the thread was due, given that its lease
// expired at from: from itself if the thread had work then, else the
// first start of work after it (from when there is none), and whether the
// thread was idle at from.
func dueAt(changes []workChange, from int64) (int64, bool) {
	work := false
	for _, c := range changes {
		if c.at > from {
			if work {
				return from, false
			}
			if c.work {
				return c.at, true
			}
			continue
		}
		work = c.work
	}
	return from, !work
}

// ThroughputBucket counts the messages consumed (RunStart and Reply
// lines) in one interval of the run.
type ThroughputBucket struct {
	Start    time.Duration `json:"start_ns"`
	Consumed int           `json:"consumed"`
}

// throughput buckets the consuming writes by their return, in about 100
// intervals of at least 100ms.
func throughput(ordered []core.TraceEvent, start time.Time, length time.Duration) []ThroughputBucket {
	width := max(length/100, 100*time.Millisecond)
	n := int(length/width) + 1
	out := make([]ThroughputBucket, n)
	for i := range out {
		out[i].Start = time.Duration(i) * width
	}
	for _, ev := range ordered {
		if ev.Read || (ev.Action != core.ActionRunStart && ev.Action != core.ActionReply) || ev.Return == math.MaxInt64 || ev.Return == 0 {
			continue
		}
		i := int(time.Unix(0, ev.Return).Sub(start) / width)
		if i >= 0 && i < n {
			out[i].Consumed++
		}
	}
	return out
}

func (r *run) describeProcs(rep *Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.procs {
		p.mu.Lock()
		rep.Processes = append(rep.Processes, ProcReport{
			Name: p.name, Pid: p.cmd.Process.Pid, Skew: p.offsets[0].offset,
			Fate: slices.Clone(p.fate),
		})
		p.mu.Unlock()
	}
}

// countCrashes counts the Crash lines the processes traced (turns given
// up on an error) and, apart, those the merge added to end a round whose
// writes storage lost (tracecheck.MergedCrash).
func countCrashes(lines []core.TraceEvent) (turns, afterLoss int) {
	for _, ev := range lines {
		switch {
		case tracecheck.MergedCrash(ev):
			afterLoss++
		case ev.Action == core.ActionCrash:
			turns++
		}
	}
	return turns, afterLoss
}

// stopProblems adds the problem of the workers that were not gone grace
// after their SIGTERM (overran), if any: a runner's Run ends its turns
// and its open rounds within two ShutdownGraces once storage answers.
func (rep *Report) stopProblems(overran []string, grace time.Duration) {
	if len(overran) > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("clean stop: %s not gone %v after SIGTERM, so killed: a runner's Run ends within two ShutdownGraces once storage answers", strings.Join(overran, ", "), grace))
	}
}

// doubtProblems adds the problems the writes in doubt show: a resolution
// that says otherwise than storage's log, and a write still in doubt when
// its process stopped cleanly. The faults heal before the workers are
// told to stop (a retired worker's cut heals before its SIGTERM, and no
// restart of the cluster runs while a worker stops cleanly), and a
// stopping runner tries its open rounds' Crash for ShutdownGrace: a round
// it left open is a defect of its stop.
func (rep *Report) doubtProblems() {
	if n := rep.CommitUnknown.Disagreements; n > 0 {
		rep.Problems = append(rep.Problems, rep.blame(fmt.Sprintf("commit unknown: %d writes resolved otherwise than storage's log says they went", n)))
	}
	if n := rep.CommitUnknown.Unresolved; n > 0 {
		rep.Problems = append(rep.Problems, rep.blame(fmt.Sprintf("commit unknown: %d writes still in doubt when their process stopped, after the faults healed: its Run left their rounds open (no Crash)", n)))
	}
}

// unfencedWrites counts, in perAction, the writes whose fence off
// switches off; nil when every fence is on.
func unfencedWrites(off core.Fences, perAction map[core.Action]int) map[core.Action]int {
	if off == (core.Fences{}) {
		return nil
	}
	n := map[core.Action]int{}
	if off.Start {
		n[core.ActionRunStart] = perAction[core.ActionRunStart]
	}
	if off.Reply {
		n[core.ActionReply] = perAction[core.ActionReply]
	}
	if off.Abandon {
		n[core.ActionAbandon] = perAction[core.ActionAbandon]
	}
	return n
}
