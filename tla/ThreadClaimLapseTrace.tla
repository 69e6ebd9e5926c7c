------------------------ MODULE ThreadClaimLapseTrace ------------------------
(***************************************************************************)
(* Trace validation: is each trace of ONE thread, written by the Go code   *)
(* (core.TraceEvent lines), a behaviour of spec/ThreadClaimLapse.tla?      *)
(*                                                                         *)
(* Input, from the environment (see tla/README.md):                        *)
(*   TRACE_BATCH  a JSON file: an array of traces, each an array of line   *)
(*                objects of one thread, in file order.  Many traces are   *)
(*                checked in one run of TLC; the initial state picks the   *)
(*                trace (variable t).                                      *)
(*   TRACE_RESULT where the batch's result goes: a JSON array holding, for *)
(*                each trace, how many of its lines were matched (its      *)
(*                length when it is accepted).                             *)
(*   JSON         instead of TRACE_BATCH: one ndjson trace (with the cfg    *)
(*                ThreadClaimLapseTrace.cfg, which reports a rejection as  *)
(*                a violation of TraceAccepted).                           *)
(*                                                                         *)
(* The variable l is the next line to explain.  Each step takes line l,    *)
(* binds the parameters of the spec action it names from the line (the     *)
(* process, and Abandon's run), and requires:                              *)
(*   - the named action, and every value of the line, field by field;      *)
(*   - that the step is a [Next]_vars step of the spec (refinement: the    *)
(*     step is one the spec's own next-state relation allows);             *)
(*   - the spec's invariants in the state after it, and NoLiveTakeover.    *)
(* Between lines the only step is a hidden Lapse, taken just before a      *)
(* Claim of a lease that is unexpired in the model (Lapse is never logged, *)
(* and nothing but Claim reads lease.expired).  So every trace is a single *)
(* chain of states, and the VIEW <<t, l, lease.expired>> tells them apart. *)
(*                                                                         *)
(* Timing (Claim's and Renew's clock fields now, ttl, expires, replaced)   *)
(* is no part of the spec, which is untimed; the lines' own rules are      *)
(* checked here as the Go checker checks them (see Timing): all or none of *)
(* now, ttl and expires, ttl > 0, expires = now + ttl, and a Claim over a  *)
(* held lease names its expiry, the last one stamped, and comes no earlier.*)
(* TLC's JSON reader keeps 32 bits of an integer, so a batch carries the   *)
(* clock values in limbs, and ids and ticks past 2^31 as -1 (see           *)
(* tlc/batchline.go).  JSON mode reads the raw ndjson: no timing is        *)
(* checked there, and integers past 2^31 are cut; tracecheck uses batches. *)
(***************************************************************************)
EXTENDS ThreadClaimLapse, Json, IOUtils, TLC, Naturals, Sequences, FiniteSets

Env(name, default) == IF name \in DOMAIN IOEnv THEN IOEnv[name] ELSE default

\* The traces: a batch, or one ndjson trace.
Batch ==
    TLCEval(
        IF "TRACE_BATCH" \in DOMAIN IOEnv THEN JsonDeserialize(IOEnv.TRACE_BATCH)
        ELSE IF "JSON" \in DOMAIN IOEnv THEN << ndJsonDeserialize(IOEnv.JSON) >>
        ELSE Assert(FALSE, "set TRACE_BATCH (a JSON array of traces) or JSON (one ndjson trace)"))

Traces == 1..Len(Batch)

\* What the constants need from the traces, computed once.  (TLC caches a
\* TLCEval only where it is evaluated outside any operator's parameters, so
\* Batch is read once here, into b, and never from inside an operator.)
TraceStats ==
    TLCEval(
        LET b == Batch
            procs == UNION {{b[i][j].proc : j \in {k \in 1..Len(b[i]) :
                                                     b[i][k].action # "Post"}} :
                            i \in 1..Len(b)}
            count(i, a) == Cardinality({j \in 1..Len(b[i]) : b[i][j].action = a})
            most(a) ==
                LET cs == {count(i, a) : i \in 1..Len(b)}
                IN IF cs = {} THEN 0 ELSE CHOOSE c \in cs : \A d \in cs : d <= c
        IN [procs |-> IF procs \ {""} = {} THEN {"none"} ELSE procs \ {""},
            msgs |-> most("Post"), claims |-> most("Claim"),
            asks |-> most("Ask")])

\* The constants, from the traces: the processes of lines other than Post
\* (a poster need not be a runner process; "" names no process, and a line
\* other than Post with it is refused), and as many messages, claims
\* and asks as the trace that has most of them.
TraceProcs     == TraceStats.procs
TraceMaxMsgs   == TraceStats.msgs
TraceMaxClaims == TraceStats.claims
TraceMaxAsks   == TraceStats.asks

\* The bound of Next's \E r \in 1..MaxRuns : Abandon(p, r): the runs that
\* exist in the current state.  Abandon(p, r) requires r \in RunIds, so no
\* r above Len(runs) is a step, and [Next]_vars is the same relation as
\* with any larger constant; but it costs O(runs so far) a step instead of
\* O(the most runs of any trace of the batch), for every process, on every
\* line.  (A state-level definition for a constant-level one: TLC accepts
\* it, as MaxRuns is only read inside actions.)
TraceMaxRuns   == Len(runs)

\* The fences the traces are held to: all on, unless TRACE_FENCES names the
\* ones that stay on ("start reply abandon"; "none" for none; unset or empty
\* for all).  With a
\* fence off, a trace from code without it gets past the guard and must
\* break an invariant instead.
FenceOn(name) ==
    LET f == Env("TRACE_FENCES", "")
    IN \/ f = ""
       \/ \E i \in 1..(Len(f) - Len(name) + 1) : SubSeq(f, i, i + Len(name) - 1) = name
TraceFenceStart   == FenceOn("start")
TraceFenceReply   == FenceOn("reply")
TraceFenceAbandon == FenceOn("abandon")

\* A field of a line, with a default when the line leaves it out (Go omits
\* "kind" when empty).
Field(rec, name, default) == IF name \in DOMAIN rec THEN rec[name] ELSE default

-----------------------------------------------------------------------------
VARIABLES
    t,      \* the trace of the batch this behaviour follows
    l,      \* the next line of trace t to explain
    ver,    \* the thread's version (tick) after the lines explained so far
    names,  \* the holder strings of the trace: names[h] is the spec's holder h
    stamped \* the expiry the last Claim or Renew stamped on the lease (Z: none)

traceVars == <<vars, t, l, ver, names, stamped>>

Log  == Batch[t]
line == Log[l]
P    == line.proc

\* The holder string of the spec's holder h ("" for none).  Holders are
\* numbered by their Claim lines, as the spec's nextHolder numbers claims
\* (Step("Claim") requires the two to agree), so every holder in the state
\* has a name; a sequence, so that this is O(1) on every line.  (A holder
\* no Claim line named, in a mutated spec, is a string no line carries.)
Name(h) ==
    IF h = 0 THEN ""
    ELSE IF h <= Len(names) THEN names[h]
    ELSE "holder " \o ToString(h) \o " that no Claim line named"

\* Ticks.  Every committed write makes the thread's version one higher and
\* carries the new version; a read or a refusal carries the version it saw.
\* Release is a write when it clears the writer's own lease, and a read
\* when the lease was no longer the writer's.
ReadActions  == {"Plan", "StartFenced", "ReplyFenced", "AbandonFenced",
                 "EndRefused", "Steer", "SteerRefused", "Crash"}
IsRead == line.read

Ticks ==
    /\ IF line.action = "Release" THEN IsRead <=> ~HasLease(P)
       ELSE IsRead <=> line.action \in ReadActions
    /\ IF IsRead THEN line.tick = ver /\ ver' = ver
                 ELSE line.tick = ver + 1 /\ ver' = line.tick

\* The values a line carries, all of them: msg, req, run, taken (after the
\* action), the process's holder (after a Claim; before anything else),
\* the lease's holder ("" where the action does not read the lease), the
\* plan's kind ("" but for Plan), and output (true only on a RunEnd that
\* recorded the run's output: the output of an active run of the writer,
\* which RunEnd(P) requires).
Values(msg, req, rn, holder, ls, kind) ==
    /\ line.msg = msg
    /\ line.req = req
    /\ line.run = rn
    /\ line.taken = taken'
    /\ line.holder = holder
    /\ line.lease = ls
    /\ Field(line, "kind", "") = kind
    /\ Field(line, "output", FALSE) => line.action = "RunEnd"

Own == Name(hold[P])   \* the process's holder, as a string

\* Each action, its parameters bound from the line, with the line's values.
Step(a) ==
    CASE a = "Post" ->
            /\ Post
            /\ line.holder = ""
            /\ Values(msgs', 0, 0, "", "", "")
      [] a = "Claim" ->
            /\ line.holder # ""
            /\ \A h \in 1..Len(names) : names[h] # line.holder
            /\ nextHolder = Len(names) + 1
            /\ Claim(P)
            /\ names' = Append(names, line.holder)
            /\ Values(0, 0, 0, line.holder, line.holder, "")
      [] a = "Renew" ->
            /\ Renew(P)
            /\ Values(0, 0, 0, Own, Name(lease'.holder), "")
      [] a = "Release" ->
            /\ Release(P)
            /\ Values(0, 0, 0, Own, Name(lease'.holder), "")
      [] a = "Abandon" ->
            /\ line.run \in RunIds
            /\ Abandon(P, line.run)
            /\ Values(0, 0, line.run, Own, Name(lease'.holder), "")
      [] a = "AbandonFenced" ->
            \* the run it would have abandoned, as the caller named it: the
            \* fence refuses before the run is looked at, and the spec's
            \* AbandonFenced(p) has no run (Workspace.Abandon of a run
            \* that does not exist, by a claim that lost the lease, is this)
            /\ AbandonFenced(P)
            /\ Values(0, 0, line.run, Own, Name(lease.holder), "")
      [] a = "Plan" ->
            /\ Plan(P)
            /\ Values(plan'[P].msg, plan'[P].req, 0, Own, "", plan'[P].kind)
      [] a = "RunStart" ->
            /\ RunStart(P)
            /\ Values(plan[P].msg, 0, Len(runs'), Own, Name(lease'.holder), "")
      [] a = "StartFenced" ->
            /\ StartFenced(P)
            /\ Values(plan[P].msg, 0, 0, Own, Name(lease.holder), "")
      [] a = "Reply" ->
            /\ Reply(P)
            /\ Values(plan[P].msg, plan[P].req, 0, Own, Name(lease'.holder), "")
      [] a = "ReplyFenced" ->
            /\ ReplyFenced(P)
            /\ Values(plan[P].msg, plan[P].req, 0, Own, Name(lease.holder), "")
      [] a = "Ask" ->
            /\ Ask(P)
            /\ Values(0, Len(reqs'), run[P], Own, "", "")
      [] a = "RunEnd" ->
            /\ RunEnd(P)
            /\ Values(0, 0, run[P], Own, "", "")
      [] a = "EndRefused" ->
            /\ EndRefused(P)
            /\ Values(0, 0, run[P], Own, "", "")
      [] a = "Steer" ->
            /\ Steer(P)
            /\ Values(plan'[P].msg, 0, run[P], Own, "", "")
      [] a = "SteerRecord" ->
            /\ SteerRecord(P)
            /\ Values(plan[P].msg, 0, run[P], Own, "", "")
      [] a = "SteerRefused" ->
            /\ SteerRefused(P)
            /\ Values(plan[P].msg, 0, run[P], Own, "", "")
      [] a = "Crash" ->
            /\ Crash(P)
            /\ Values(0, 0, 0, IF line.holder = "" THEN "" ELSE Own, "", "")
      [] OTHER -> FALSE

\* Clock values, exact.  A batch line's "clock" field holds its now, ttl,
\* expires and replaced, each an int64 v as <<a, b, c>> with
\* v + 2^63 = a * 2^44 + b * 2^22 + c (tlc/batchline.go): every limb, and
\* the sum of two, is a TLC integer, and the limbs' order is the values'.
\* A line without the field has none of them (all four zero).
Limb == 4194304                   \* 2^22
Z    == <<524288, 0, 0>>          \* 0, that is 2^63 = 2^19 * 2^44
NoClock == [now |-> Z, ttl |-> Z, expires |-> Z, replaced |-> Z]
Clk  == Field(line, "clock", NoClock)

Lt(x, y) == \/ x[1] < y[1]
            \/ x[1] = y[1] /\ x[2] < y[2]
            \/ x[1] = y[1] /\ x[2] = y[2] /\ x[3] < y[3]

\* The sum of two encoded values, (u + 2^63) + (w + 2^63), normalised.
Plus(x, y) ==
    LET c == x[3] + y[3]
        b == x[2] + y[2] + c \div Limb
    IN <<x[1] + y[1] + b \div Limb, b % Limb, c % Limb>>

\* The lines' timing rules, as the Go checker has them (tracecheck's stamp
\* and claimTiming): only Claim and Renew carry timing, and only Claim
\* replaced; a line's now, ttl and expires are all there or none (and
\* replaced needs them); ttl > 0 and expires = now + ttl, exactly; a timed
\* Claim of a free lease replaces nothing, and one of a held lease names
\* the expiry it took (the last stamped, when there is one) and reads a
\* clock that has reached it.  And what the step leaves stamped.
Timing ==
    LET c == Clk
        timed == line.action \in {"Claim", "Renew"}
    IN /\ ~timed => c = NoClock
       /\ line.action = "Renew" => c.replaced = Z
       /\ timed =>
             IF c.now = Z /\ c.ttl = Z /\ c.expires = Z
             THEN c.replaced = Z
             ELSE /\ c.now # Z
                  /\ Lt(Z, c.ttl)
                  /\ Plus(c.expires, Z) = Plus(c.now, c.ttl)
       /\ line.action = "Claim" /\ c.now # Z =>
             IF lease.holder = 0 THEN c.replaced = Z
             ELSE /\ c.replaced # Z
                  /\ stamped # Z => c.replaced = stamped
                  /\ ~Lt(c.now, c.replaced)
       /\ stamped' = CASE timed -> c.expires
                       [] line.action = "Release" /\ HasLease(P) -> Z
                       [] OTHER -> stamped

\* What must hold of every step of a trace: it is a step of the spec
\* (refinement), it keeps the spec's invariants, and takes no live lease.
Refines ==
    /\ [Next]_vars
    /\ (TypeOK /\ I1_ConsumedAtMostOnce /\ I3_OneActiveRun /\ NoLiveAbandon
        /\ SteeringException)'
    /\ ~LiveTakeover

\* Explain line l with the action it names, and move on.
StepLine ==
    /\ l <= Len(Log)
    /\ line.thread = Log[1].thread
    /\ line.action # "Post" => P \in Procs
    /\ line.action # "Claim" => UNCHANGED names
    /\ Step(line.action)
    /\ Ticks
    /\ Timing
    /\ l' = l + 1
    /\ UNCHANGED t
    /\ Refines
    /\ TLCSet(t, l)     \* lines matched so far (see Result)

\* The lease lapses unseen, just before a Claim that needs it expired.
HiddenLapse ==
    /\ l <= Len(Log)
    /\ line.action = "Claim"
    /\ Lapse
    /\ UNCHANGED <<t, l, ver, names, stamped>>
    /\ Refines

TraceInit ==
    /\ \A i \in Traces : TLCSet(i, 0)
    /\ t \in Traces
    /\ Init
    /\ l = 1
    /\ ver = 0
    /\ names = << >>
    /\ stamped = Z

TraceNext == StepLine \/ HiddenLapse

TraceSpec == TraceInit /\ [][TraceNext]_traceVars

\* Every trace is a single chain: a state is known by its trace, its line,
\* and whether the hidden lapse before that line happened.
TraceView == <<t, l, lease.expired>>

-----------------------------------------------------------------------------
\* The result of a batch: for each trace, the most lines any worker matched.
\* TLCGet("all") builds every worker's registers anew: it is read once,
\* not once per trace (that made a batch of 6,000 traces take 11 minutes).
Matched(all, i) ==
    LET ws  == IF i \in DOMAIN all THEN all[i] ELSE << >>
        vs  == {ws[w] : w \in DOMAIN ws}
    IN IF vs = {} THEN 0 ELSE CHOOSE v \in vs : \A u \in vs : u <= v

WriteResult ==
    LET all == TLCGet("all")
    IN JsonSerialize(Env("TRACE_RESULT", "trace-result.json"),
                     [i \in Traces |-> Matched(all, i)])

\* One trace (JSON): accepted when TLC reaches its end.  As in etcd-io/raft's
\* Traceetcdraft.tla, a temporal property, so that TLC checks it after it has
\* generated every successor of a state: a state before the end with nothing
\* left on TLC's queue is one where nothing explains line l.  One worker.
\* (JSON mode has one trace: its length is a constant, which TLC's liveness
\* checker needs, as it evaluates parts of the formula without a state.)
TraceLen == Len(Batch[1])
TraceAccepted ==
    [](l <= TraceLen => [](TLCGet("queue") > 0 \/ l > TraceLen))

\* What TLC prints for each state of a rejected trace: the line it stopped
\* at, and the state it could not explain that line from.
TraceAlias ==
    [l |-> l, ver |-> ver,
     line |-> IF l <= Len(Log) THEN line ELSE "end of trace",
     lines |-> Len(Log),
     msgs |-> msgs, taken |-> taken, lease |-> lease,
     runs |-> runs, reqs |-> reqs,
     given |-> given, steered |-> steered,
     pc |-> pc, hold |-> hold, plan |-> plan, run |-> run,
     nextHolder |-> nextHolder]

=============================================================================
