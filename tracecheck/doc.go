// Package tracecheck checks that executions of the real Go code are
// behaviours of the specification, spec/ThreadClaimLapse.tla: it writes and
// reads the trace core emits, follows it line by line through the spec's
// actions (the Go trace checker), and checks concurrent histories of the
// lease and fenced-consume operations for linearizability with porcupine.
// It is pure: it imports core and nothing else of this project, so that a
// storage author or a tool can check traces without the runner or a
// storage. The executions the checks are applied to live in package sim.
//
// # The trace
//
// A trace is ndjson: one JSON object per line, a core.TraceEvent, whose
// names are the spec's. Writer (to an io.Writer) and Recorder (in memory)
// are core.Tracers; Read parses a trace strictly, with its own parser for
// this flat format: keys exactly as below (case and all), none twice, none
// else; integers without sign, fraction or exponent; no trailing data; an
// empty line or a parse failure is a *LineError naming the file and line.
// Every field is required but kind:
//
//		{"tick":7,"read":false,"action":"RunStart","thread":"t1","proc":"p1","holder":"9f3c…","msg":2,"req":0,"run":1,"taken":2,"lease":"9f3c…"}
//
//	  - tick: the thread's version. A write (Post, Claim, Renew, Release,
//	    Abandon, RunStart, Reply, Ask, RunEnd) increments it inside its
//	    transaction and carries the new value, with "read":false. A read or
//	    refusal (Plan, StartFenced, ReplyFenced, AbandonFenced, EndRefused,
//	    Crash) carries the version it saw, with "read":true. A Release that
//	    finds the lease no longer its own writes nothing, and core logs it as
//	    a read; the checker accepts a read Release only then, and a write
//	    Release only when the lease is the process's (as the TLC trace spec).
//	  - action: the spec's action. Lapse is never logged; Read rejects it.
//	  - thread, proc: the thread, and the process (for Post, the poster).
//	  - holder: the process's holder for its current claim (Claim: the new
//	    one). Holders are random strings, made fresh for each claim; the
//	    checker maps each to the abstract holder h1, h2, … numbered by its
//	    Claim's order, as the spec's nextHolder does. Post has none; Crash
//	    may have none.
//	  - msg: Post, the new message; Plan, the planned message; RunStart, the
//	    prompt; Reply, the answer.
//	  - req: Plan (reply), the request; Reply, the request answered; Ask,
//	    the new request.
//	  - run: RunStart, the new run; Ask, RunEnd, EndRefused, Abandon, that
//	    run.
//	  - taken: the taken cursor after the action, as storage holds it.
//	  - lease: the lease's holder seen inside the transaction ("" for none),
//	    carried only by Claim, Renew, Release, Abandon, RunStart and Reply
//	    (after the write: Claim's is the new holder, Release's "" when the
//	    lease was its own) and by AbandonFenced, StartFenced and ReplyFenced
//	    (as refused). Post, Plan, Ask, RunEnd, EndRefused and Crash do not
//	    read the lease: their lease is not checked.
//	  - kind: Plan only, "run" or "reply".
//
// Order puts each thread's lines in trace order: by tick, writes before
// reads at equal tick, otherwise as written (a process writes its own lines
// in program order; reads at one tick by different processes commute). It
// groups lines by thread, keeping each line's 1-based number in the file.
// Tracers are called after their transactions end, so a file written by
// concurrent processes is not in trace order, and need not be.
//
// # The Go trace checker
//
// Check (or a Checker fed line by line) follows each thread from the
// spec's Init, keeping the spec's state: msgs, taken, the lease's holder,
// runs, reqs, consumed, liveAbandoned, and per process pc, hold, plan and
// run. For each line it takes the named action: it evaluates the action's
// guard (every conjunct, in the spec's words), checks that the line's
// values are the ones the action gives (tick continuity: a write's tick is
// the previous write's plus one, a read's the current version; taken,
// lease, holder, msg, req, run, kind, read), applies the action, and then
// evaluates the invariants I1_ConsumedAtMostOnce, I3_OneActiveRun and
// NoLiveAbandon. Each of these is O(1) a line, so a check takes time linear
// in the trace.
//
// Lapse is not logged. The spec lets it happen whenever the lease has a
// holder, and nothing but Claim's guard (lease.holder = 0 \/ lease.expired)
// reads lease.expired; so the checker places a Lapse just before each Claim
// that takes a lease another holder had, and counts it (Stats.LapsesInferred;
// Stats.LiveLapses counts those whose holder some process still worked
// under, the case the fences exist for). The checker follows the fenced
// spec (Fenced and FenceAbandon TRUE, ThreadClaimLapse.cfg) unless
// WithSpec says otherwise: with the fences off, the mutant's traces pass
// the guards and break an invariant instead.
//
// A failure is a *Violation naming the file and the line (its number in
// the file), the line, the action tried, whether a Lapse was inferred just
// before it, its kind (errors.Is: ErrGuard, ErrLineValue, ErrOrder,
// ErrInvariant), the rule that failed in the spec's words (a guard's
// conjunct such as `Fenced => HasLease(p)` or `reqs[plan[p].req].state =
// "open"`, an invariant's name, "tick", or the line's field such as
// "line.taken"), every other conjunct or invariant that fails there, what
// the line says against what the spec gives, and a compact dump of the
// thread's state (abstract holders with their strings). Each thread stops
// at its first violation; Check returns the one at the lowest line. A line
// Read cannot parse is a *LineError naming the file and line, wrapping
// ErrMalformed.
//
// testdata/ holds fixtures, ok-*.ndjson (accepted) and bad-*.ndjson (each
// rejected at one line), shared with the TLC trace spec in tla/; see its
// README.
//
// # Histories of many processes
//
// A many-process execution (cmd/tracecheck's fleet) runs runner OS
// processes; each writes a history file (HistoryWriter: trace lines with
// wall-clock call and return times, one unbuffered write a line), and the
// storage keeps the committed writes' lines itself (core.TraceLog,
// postgres.Options.KeepTrace), so a process killed after a commit loses no
// write. MergeHistories makes the trace: writes from storage, reads from
// the histories; a write no history has is a pending operation for
// porcupine.
//
// # Linearizability
//
// LeaseModel is a porcupine model (a pure value) of one thread's lease and
// fenced-consume operations, partitioned per thread: Claim(holder, the
// caller's clock reading, ttl) → ok | busy, succeeding exactly when the
// lease is free or expired by that reading; Renew → ok | busy, exactly
// when the holder has the lease, expired or not; Release → ok, freeing the
// lease if it is the holder's; RunStart(holder, prompt) → ok with the next
// run id | busy, and Reply(holder, request, answer) → ok | busy |
// already-answered, both fenced: they succeed exactly when the holder has
// the lease, and consume a message that must not have been consumed; and
// Taken → the cursor. A fenced write that the model refuses but the
// history says succeeded makes the history Illegal: that is how the
// unfenced mutant shows.
//
// History records operations with an injected monotonic clock, safe for
// concurrent use; LinClient makes core.Workspace calls and records them.
// OperationsFromTrace builds the same history from trace lines core stamped
// with call and return times (core.TraceClock), checking Claims without
// time. CheckLinearizable returns porcupine.Ok and nil, Illegal with
// ErrNotLinearizable (and porcupine's HTML visualisation written where the
// caller says), or Unknown with ErrLinearizabilityUnknown: a timeout is
// never a pass.
//
// # Figures
//
// Measured on this project's machine (2 cores, AMD EPYC), Go 1.26:
//
//	go test ./tracecheck -run '^$' -bench . -benchtime 5x
//
//	BenchmarkCheck                  a 500,000-line trace core wrote (3 threads, 4 processes, lapses,
//	                                stalls, refusals, crashes): 5.8–6.3 million lines/s (Order, then follow)
//	BenchmarkReadCheck              the same as ndjson, read and checked: 0.74–0.85 million lines/s
//	                                (114–131 MB/s)
//	BenchmarkPorcupine/threads=500  ~100,020 operations of 8 concurrent clients: 0.07–0.16 s
//	BenchmarkPorcupine/threads=50   ~100,020 operations, longer partitions: 0.08–0.33 s
//
// (ranges over runs on a shared machine; targets: at least 1,000,000 lines/s,
// and porcupine under 10 s).
//
// The fuzzers (go test ./tracecheck -run '^$' -fuzz FuzzRead, and
// FuzzCheck) keep their seed corpus under testdata/fuzz/.
package tracecheck
