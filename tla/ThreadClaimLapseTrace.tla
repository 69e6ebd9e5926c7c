------------------------ MODULE ThreadClaimLapseTrace ------------------------
(***************************************************************************)
(* Trace validation: is a trace of ONE thread, written by the Go code      *)
(* (core.TraceEvent, one JSON object per line), a behaviour of             *)
(* spec/ThreadClaimLapse.tla?                                              *)
(*                                                                         *)
(* TLC reads the trace named by the environment variable JSON, and walks   *)
(* it with the variable l, the next line to explain.  Each line must be    *)
(* matched by the spec action it names, with the line's values; between    *)
(* lines only a hidden Lapse may happen, and only where the next line is a *)
(* Claim of a lease that is still unexpired in the model (Lapse is never   *)
(* logged; expiry matters to nothing but Claim).  Every step is therefore  *)
(* forced, the behaviour is a single chain, and TLC accepts the trace when *)
(* the chain reaches the end of the file (TraceAccepted).                  *)
(*                                                                         *)
(* The constants of the spec are taken from the trace (see the cfg): its   *)
(* processes, and as many messages, claims and asks as it holds.  The      *)
(* spec is the fenced one: a trace from code whose fences are off should   *)
(* be rejected.                                                            *)
(*                                                                         *)
(* Run (one worker, as TraceAccepted reads TLC's queue):                   *)
(*   JSON=/abs/trace.ndjson java -DTLA-Library=<spec dir> \               *)
(*     -cp tla2tools.jar:CommunityModules-deps.jar tlc2.TLC -workers 1 \   *)
(*     -config ThreadClaimLapseTrace.cfg ThreadClaimLapseTrace.tla        *)
(***************************************************************************)
EXTENDS ThreadClaimLapse, Json, IOUtils, TLC, Naturals, Sequences

\* Trace validation relies on breadth-first model checking with one worker.
ASSUME TLCGet("config").mode = "bfs"

TraceFile ==
    IF "JSON" \in DOMAIN IOEnv THEN IOEnv.JSON
    ELSE Assert(FALSE, "set JSON to the path of an ndjson trace")

TraceLog == TLCEval(ndJsonDeserialize(TraceFile))

ASSUME Len(TraceLog) > 0

\* One thread per trace: the Go side splits its traces by thread.
ASSUME \A i \in 1..Len(TraceLog) : TraceLog[i].thread = TraceLog[1].thread

\* Line numbers holding a given action.
LinesOf(a) == {i \in 1..Len(TraceLog) : TraceLog[i].action = a}

\* The constants, from the trace.  Post lines name the poster, who need not
\* be a runner process, so they do not count among Procs.
TraceProcs ==
    LET ps == {TraceLog[i].proc : i \in 1..Len(TraceLog) \ LinesOf("Post")}
    IN IF ps = {} THEN {"none"} ELSE ps
TraceMaxMsgs   == Cardinality(LinesOf("Post"))
TraceMaxClaims == Cardinality(LinesOf("Claim"))
TraceMaxAsks   == Cardinality(LinesOf("Ask"))

\* Holders: Go's random strings, numbered by the order of their Claim lines.
\* "" is no holder (0); a string that no Claim took maps to a number no
\* claim has, so that every comparison with it fails.
ClaimIndex(i) == Cardinality({j \in LinesOf("Claim") : j <= i})
HolderNames == {TraceLog[i].holder : i \in LinesOf("Claim")}
HolderNum == TLCEval(
    [s \in HolderNames |->
        ClaimIndex(CHOOSE i \in LinesOf("Claim") :
                      /\ TraceLog[i].holder = s
                      /\ \A j \in LinesOf("Claim") : TraceLog[j].holder = s => i <= j)])
H(s) == IF s = "" THEN 0
        ELSE IF s \in DOMAIN HolderNum THEN HolderNum[s]
        ELSE TraceMaxClaims + 1

\* A field of a line, with a default when the line leaves it out (Go
\* omits "kind" when empty).
Field(rec, name, default) == IF name \in DOMAIN rec THEN rec[name] ELSE default

-----------------------------------------------------------------------------
VARIABLES
    l,     \* the next line of the trace to explain
    ver    \* the thread's version (tick) after the lines explained so far

traceVars == <<vars, l, ver>>

line == TraceLog[l]
P    == line.proc

\* What every line says about the state after it: the taken cursor as
\* storage holds it, and p's holder (Post and Crash may leave it "").
Common ==
    /\ taken' = line.taken
    /\ line.action = "Claim" => hold'[P] = H(line.holder)
    /\ line.action \notin {"Post", "Crash", "Claim"} => hold[P] = H(line.holder)

\* Ticks.  Every committed write makes the thread's version one higher and
\* carries the new version; a read or a refusal carries the version it saw.
\* Release is a write when it clears the writer's own lease, and a read
\* when the lease was no longer the writer's.
ReadActions  == {"Plan", "StartFenced", "ReplyFenced", "AbandonFenced",
                 "EndRefused", "Crash"}
WriteActions == {"Post", "Claim", "Renew", "Abandon", "RunStart", "Reply",
                 "Ask", "RunEnd"}
IsRead == Field(line, "read", FALSE)

Ticks ==
    /\ line.action \in ReadActions => IsRead
    /\ line.action \in WriteActions => ~IsRead
    /\ line.action = "Release" => (IsRead <=> ~HasLease(P))
    /\ IF IsRead THEN line.tick = ver /\ ver' = ver
                 ELSE line.tick = ver + 1 /\ ver' = line.tick

FirstVersion ==
    IF Field(TraceLog[1], "read", FALSE) THEN TraceLog[1].tick ELSE TraceLog[1].tick - 1

\* The lease holder a line reports: after the write, or as the refusal saw it.
LeaseAfter  == lease'.holder = H(line.lease)
LeaseBefore == lease.holder = H(line.lease)

IsPost ==
    /\ line.action = "Post"
    /\ Post
    /\ msgs' = line.msg

IsClaim ==
    /\ line.action = "Claim"
    /\ P \in Procs
    /\ Claim(P)
    /\ LeaseAfter

IsRenew ==
    /\ line.action = "Renew"
    /\ P \in Procs
    /\ Renew(P)
    /\ LeaseAfter

IsRelease ==
    /\ line.action = "Release"
    /\ P \in Procs
    /\ Release(P)
    /\ LeaseAfter

IsAbandon ==
    /\ line.action = "Abandon"
    /\ P \in Procs
    /\ line.run \in RunIds
    /\ Abandon(P, line.run)
    /\ LeaseAfter

IsAbandonFenced ==
    /\ line.action = "AbandonFenced"
    /\ P \in Procs
    /\ AbandonFenced(P)
    /\ LeaseBefore

IsPlan ==
    /\ line.action = "Plan"
    /\ P \in Procs
    /\ Plan(P)
    /\ plan'[P].kind = Field(line, "kind", "")
    /\ plan'[P].msg = line.msg
    /\ plan'[P].kind = "reply" => plan'[P].req = line.req

IsRunStart ==
    /\ line.action = "RunStart"
    /\ P \in Procs
    /\ plan[P].msg = line.msg
    /\ RunStart(P)
    /\ run'[P] = line.run
    /\ LeaseAfter

IsStartFenced ==
    /\ line.action = "StartFenced"
    /\ P \in Procs
    /\ plan[P].msg = line.msg
    /\ StartFenced(P)
    /\ LeaseBefore

IsReply ==
    /\ line.action = "Reply"
    /\ P \in Procs
    /\ plan[P].msg = line.msg
    /\ plan[P].req = line.req
    /\ Reply(P)
    /\ LeaseAfter

IsReplyFenced ==
    /\ line.action = "ReplyFenced"
    /\ P \in Procs
    /\ plan[P].msg = line.msg
    /\ plan[P].req = line.req
    /\ ReplyFenced(P)
    /\ LeaseBefore

IsAsk ==
    /\ line.action = "Ask"
    /\ P \in Procs
    /\ run[P] = line.run
    /\ Ask(P)
    /\ Len(reqs') = line.req

IsRunEnd ==
    /\ line.action = "RunEnd"
    /\ P \in Procs
    /\ run[P] = line.run
    /\ RunEnd(P)

IsEndRefused ==
    /\ line.action = "EndRefused"
    /\ P \in Procs
    /\ run[P] = line.run
    /\ EndRefused(P)

IsCrash ==
    /\ line.action = "Crash"
    /\ P \in Procs
    /\ line.holder # "" => hold[P] = H(line.holder)
    /\ Crash(P)

\* Explain line l with the action it names, and move on.
StepLine ==
    /\ l <= Len(TraceLog)
    /\ \/ IsPost \/ IsClaim \/ IsRenew \/ IsRelease
       \/ IsAbandon \/ IsAbandonFenced \/ IsPlan
       \/ IsRunStart \/ IsStartFenced \/ IsReply \/ IsReplyFenced
       \/ IsAsk \/ IsRunEnd \/ IsEndRefused \/ IsCrash
    /\ Common
    /\ Ticks
    /\ l' = l + 1

\* The lease lapses unseen, just before a Claim that needs it expired.
HiddenLapse ==
    /\ l <= Len(TraceLog)
    /\ line.action = "Claim"
    /\ Lapse
    /\ UNCHANGED <<l, ver>>

TraceInit == Init /\ l = 1 /\ ver = FirstVersion

TraceNext == StepLine \/ HiddenLapse

TraceSpec == TraceInit /\ [][TraceNext]_traceVars

-----------------------------------------------------------------------------
\* The trace is accepted when TLC reaches its end.  As in etcd-io/raft's
\* Traceetcdraft.tla, this is a temporal property so that TLC checks it after
\* it has generated every successor of a state: a state before the end with
\* nothing left on TLC's queue is one where no spec action explains line l.
TraceAccepted ==
    [](l <= Len(TraceLog) => [](TLCGet("queue") > 0 \/ l > Len(TraceLog)))

\* What TLC prints for each state of a rejected trace: the line it stopped
\* at, and the state it could not explain that line from.
TraceAlias ==
    [l |-> l, ver |-> ver,
     line |-> IF l <= Len(TraceLog) THEN line ELSE "end of trace",
     lines |-> Len(TraceLog),
     msgs |-> msgs, taken |-> taken, lease |-> lease,
     runs |-> runs, reqs |-> reqs,
     pc |-> pc, hold |-> hold, plan |-> plan, run |-> run,
     nextHolder |-> nextHolder]

\* The spec's invariants hold along an accepted trace too.
TraceInvariants ==
    TypeOK /\ I1_ConsumedAtMostOnce /\ I3_OneActiveRun /\ NoLiveAbandon

=============================================================================
