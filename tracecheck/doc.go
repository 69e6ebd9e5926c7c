// Package tracecheck checks that executions of the real Go code are
// behaviours of the specification, spec/ThreadClaimLapse.tla. It writes
// and reads the trace core emits (one ndjson line per spec action), follows
// a trace line by line through the spec's actions and invariants (the Go
// trace checker), and checks concurrent histories of the lease and
// fenced-consume operations for linearizability with porcupine.
//
// Its promise: Check accepts a trace exactly when it is a behaviour of the
// spec, as TLC's trace spec (tla/) would, line for line; at the first line
// no action explains it returns a *Violation naming the line, the action
// and the spec's conjunct that failed. It is pure: it imports core and
// nothing else of this project, so a storage author or a tool can check
// traces without the runner or a storage. A trace from a core.Workspace is
// a Recorder (or a Writer to a file) passed as its Tracer.
//
// # The trace
//
// A trace is ndjson: one JSON object per line, a core.TraceEvent, whose
// names are the spec's. Writer (to an io.Writer) and Recorder (in memory)
// are core.Tracers.
//
//	{"tick":7,"read":false,"action":"RunStart","thread":"t1","proc":"p1","holder":"9f3c…","msg":2,"req":0,"run":1,"taken":2,"lease":"9f3c…"}
//
// # The input contract
//
// Reader (and Read, ReadFile, built on it) parses a trace strictly, with
// its own decoder for this flat format. Each of these is a *LineError
// `file:line: reason` wrapping ErrMalformed, and `tracecheck validate`
// exits 2 on it: a line that is not one JSON object (bad JSON, anything
// after the object, an empty line other than none after the last
// newline); an unknown key (keys match exactly, case and all); a key given
// twice; a missing required key (every key is required but kind, now,
// ttl, expires, replaced and output); a value of the wrong type (integers without
// sign, fraction or exponent, except the timing fields, which may be
// negative; output is a boolean); an unknown action, or Lapse; a kind other than "", "run" or
// "reply"; an empty thread; a string with a control character, invalid
// UTF-8, an escaped NUL (\u0000: core writes none, core.CheckText) or a \u
// escape that is half a surrogate pair (encoding/json would read it as
// U+FFFD, making two names one); a line longer than MaxLineBytes. A trace with
// no line at all (an empty file, /dev/null) is ErrEmpty at line 1, also exit 2; so
// is a file that cannot be read (a directory, a missing file, no
// permission). The TLC driver calls ReadFile before TLC sees a file, so
// that TLC only ever sees well-formed traces.
//
// # The fields, and what the checker makes of each
//
// Every field of every line is either determined by the spec's state and
// checked against it, or listed here as unchecked with the reason. A field
// that an action does not carry must be zero ("" or 0 or absent): a Post
// with a run, a Plan with a lease, a RunEnd with a kind, a Renew with
// replaced, are rejected (Rule "line.<field>").
//
//   - tick, read: see The order rule. read is true exactly for Plan,
//     StartFenced, ReplyFenced, AbandonFenced, EndRefused, Steer,
//     SteerRefused and Crash, and
//     for a Release that found the lease no longer its own (it writes
//     nothing; a Release that clears its own lease is a write).
//   - action: the spec's action. Lapse is never logged (the reader
//     rejects it); the checker infers it (see below).
//   - thread: which thread the line belongs to. Threads are checked
//     independently; a file may interleave them.
//   - proc: the spec's p, for every action but Post. A Post's proc is the
//     poster, who is not one of the spec's processes: it is not checked.
//   - holder: hold[p] (Claim: hold'[p], a fresh holder: a string no Claim
//     of the thread took before). Holders are random strings; the checker
//     numbers them by their Claims' order as the spec's nextHolder does.
//     Post has none; Crash has hold[p] or "" (a process that died before
//     it knew its holder).
//   - msg: Post, msgs'; Plan, plan'[p].msg (taken + 1); RunStart and
//     StartFenced, plan[p].msg (the prompt); Reply and ReplyFenced,
//     plan[p].msg (the answer); Steer, plan'[p].msg (taken + 1, the
//     message given to the run as steering); SteerRecord and
//     SteerRefused, plan[p].msg (the steering recorded, or refused).
//   - req: Plan, plan'[p].req (0 for a run plan); Reply and ReplyFenced,
//     plan[p].req; Ask, the new request, Len(reqs').
//   - run: RunStart, the new run, Len(runs'); Ask, RunEnd, EndRefused,
//     Steer, SteerRecord, SteerRefused, run[p]; Abandon, the spec's parameter r. AbandonFenced carries the
//     run the caller asked to abandon; the spec's AbandonFenced has no
//     run parameter (the fence refuses before the run is looked at), so
//     it is not checked.
//   - taken: taken' (the cursor after the action) on every line: for
//     SteerRecord, the steering's message (it consumes it); for Steer and
//     SteerRefused, the cursor as it was (a read).
//   - lease: lease'.holder after the write for Claim, Renew, Release
//     (both kinds), Abandon, RunStart and Reply; lease.holder as refused
//     for AbandonFenced, StartFenced and ReplyFenced. Post, Plan, Ask,
//     RunEnd, EndRefused, Steer, SteerRecord, SteerRefused and Crash do
//     not read the lease: theirs is "". (SteerRecord is not fenced by
//     the claim, like RunEnd: storage refuses it once its run was
//     abandoned, which is SteerRefused, a read.)
//   - kind: Plan only, plan'[p].kind ("run" or "reply").
//   - now, ttl, expires (Claim and Renew only, optional, Unix nanoseconds
//     and nanoseconds): the claimant's clock reading, the ttl it asked
//     for, and the expiry it stamped on the lease. replaced (Claim only):
//     the expiry of the lease the Claim took over, absent when the lease
//     was free. The spec has no clock (Lapse abstracts time), so these
//     are checked against the Go code's timing rules, not the spec's:
//     ttl > 0 and expires = now + ttl; replaced is the expiry the last
//     Claim or Renew of the lease's holder stamped (when that line had
//     one), and absent exactly when the lease was free; and a Claim over
//     another holder's lease needs now >= replaced (the lease expired by
//     the claimant's clock; Rule "lease.expired by the claimant's clock").
//     A line without them (traces written before they existed) skips the
//     timing checks. 0 means absent: clocks read Unix time, never 0.
//   - output (RunEnd only, optional, a boolean): true when the RunEnd's
//     write recorded the run's output with its end (core.RunOutput, what
//     the agent answered the person). RunEnd requires run[p] active and
//     p's own, so the output the line records belongs to an active run of
//     the writer; any other action with output true is rejected (Rule
//     "line.output"), and so is a RunEnd of a run a later claim abandoned
//     (the mutant core.Mutants.OutputOfAbandonedRun writes one). Absent
//     and false are the same: traces written before it existed hold.
//
// # The order rule
//
// A thread's lines are checked in file order: the order they appear in
// the file, with other threads' lines between them ignored. Each thread
// has a version, 0 before its first line. Line by line:
//
//   - a write (read false) must carry the version plus one, and makes
//     that the version;
//   - a read (read true) must carry the version: the tick of the last
//     write before it in file order (0 if none).
//
// So a file is in trace order when each thread's lines are sorted by tick
// with a write before the reads at its tick; reads at one tick (by
// different processes) may come in any order among themselves, as they
// commute. The first line that breaks the rule is rejected, itself, with
// ErrOrder (Rule "tick") and a reason: a write whose tick is not the
// version plus one ("a write's tick must be the previous write's plus
// one", naming that write's line, and "out of order" when the tick is at
// or below the version, a line that belongs earlier), a read that runs
// ahead of the version (no write of its tick before it), or a read behind
// it (it saw a version an earlier line already replaced).
//
// Core calls its Tracer after each transaction ends, so processes that
// write concurrently can call it out of trace order: a Writer's file, or a
// Recorder's lines, need not follow the rule. Sort puts each thread's lines
// in trace order (by tick, writes before reads, otherwise as written: a
// process's own lines are in its program order) in place, each thread
// keeping the positions its lines held, and is the explicit normalising
// step: `tracecheck sort` for files, Recorder.WriteTo and the commands that
// write trace files (run -trace-dir, fleet) write sorted. Check, Checker,
// CheckReader and CheckFile never reorder: what they accept is what TLC's
// trace spec (tla/) accepts, line for line. Order groups a trace's lines
// by thread, keeping their file line numbers.
//
// # The Go trace checker
//
// Check (or a Checker fed line by line, or CheckReader over a Reader)
// follows each thread from the spec's Init, keeping the spec's state:
// msgs, taken, the lease's holder, runs, reqs, consumed, liveAbandoned,
// the ghosts given and steered, and per process pc, hold, plan and run.
// For each line it takes the named action, one method per action in the
// spec's order: it checks the order rule, evaluates the action's guard
// (every conjunct, in the spec's words), checks that the line's values
// are the ones the action gives (above), applies the action, and then
// evaluates the invariants I1_ConsumedAtMostOnce, I3_OneActiveRun,
// NoLiveAbandon and SteeringException (ADR-0069's one exception: a
// message is given more than once only as steering whose run was
// abandoned before its record). Each of these is O(1) a line (the
// steering pairs of runs not abandoned, at most one a process, are
// looked at), so a check takes time linear in the trace, and memory
// that grows with a thread's messages, runs, requests and claims, not
// with its lines.
//
// Lapse is not logged. The spec lets it happen whenever the lease has a
// holder, and nothing but Claim's guard (lease.holder = 0 \/ lease.expired)
// reads lease.expired; so the checker places a Lapse just before each Claim
// that takes a lease another holder had, and counts it (Stats.LapsesInferred;
// Stats.LiveLapses counts those whose holder some process still worked
// under: skew and stalls, the case the fences exist for, and fine). A Claim
// over a lease not yet expired by the claimant's own clock (its timing
// fields say so) is counted apart (Stats.EarlyClaims) and is a violation.
// The checker follows the fenced spec (FenceStart, FenceReply and
// FenceAbandon TRUE, ThreadClaimLapse.cfg) unless WithFences says
// otherwise: with the fences off, the mutant's traces pass the guards and
// break an invariant instead. The steering record's guard is the Go
// code's, always: FenceSteer FALSE and RefuseSteerAbandoned TRUE.
//
// A failure is a *Violation naming the file and the line (its number in
// the file), the line, the action tried, whether a Lapse was inferred just
// before it, its kind (errors.Is: ErrGuard, ErrLineValue, ErrOrder,
// ErrInvariant), the rule that failed in the spec's words (a guard's
// conjunct such as `Fenced => HasLease(p)` or `reqs[plan[p].req].state =
// "open"`, an invariant's name, "tick", or the line's field such as
// "line.taken"), every other conjunct or invariant that fails there, what
// the line says against what the spec gives, and a compact dump of the
// thread's state (abstract holders with their strings). The first
// violation in file order ends the check.
//
// Mutate changes a valid trace the way a hand-written or broken one would
// differ (a value, an action, a holder, a tick; a line dropped, duplicated
// or swapped) and keeps it well-formed, so that the result exercises the
// checkers rather than the reader: FuzzCheck and the TLC differential
// (scripts/tlc) feed its output to the checkers.
//
// testdata/ holds fixtures, ok-*.ndjson (accepted) and bad-*.ndjson (each
// rejected at one line), shared with the TLC trace spec in tla/; see its
// README.
//
// # Histories of many processes
//
// A many-process execution (tracecheck fleet) runs runner OS processes;
// each writes a history file (HistoryWriter: trace lines with wall-clock
// call and return times, one unbuffered write a line), and the
// storage keeps the committed writes' lines itself (core.TraceLog,
// postgres.Options.KeepTrace), so a process killed after a commit loses no
// write, nor the read a write of its transaction went by
// (RunEndThenStart's Plan). MergeHistories makes the trace: writes from
// storage, reads from the histories (each once, a read storage kept
// too); a write no history has is a pending operation for porcupine.
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
// the lease, and consume a message that must not have been consumed;
// SteerRecord(holder, run, msg) → ok | run-abandoned, not fenced: the
// model follows no run, so a refusal is always allowed and changes
// nothing, and a record that succeeds consumes a message that must not
// have been consumed; and Taken → the cursor. A fenced write that the model refuses but the
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
// The fuzzers (go test ./tracecheck -run '^$' -fuzz FuzzRead, FuzzCheck,
// FuzzCanonical) keep their seed corpus under testdata/fuzz/. FuzzRead is
// a differential against encoding/json: what Read accepts, encoding/json
// reads the same; FuzzCanonical compares the Reader's parsing of one line
// (fast path, decoder, and Next in its buffer) with encoding/json plus the
// format's rules, both ways: the same lines accepted, with the same
// fields; FuzzCheck checks mutants of the accepted fixtures.
package tracecheck
