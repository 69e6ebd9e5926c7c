--------------------------- MODULE ThreadClaimLapse ---------------------------
(***************************************************************************)
(* One thread of a work-runner, claimed by runner processes through a     *)
(* lease in storage.  Every claim gets a fresh holder (1, 2, 3, ... never *)
(* reused).  A claim can lapse at any moment while its holder is alive    *)
(* (Lapse): that stands for a write in flight past the TTL and for a      *)
(* clock running ahead on another machine.  A process reads (Plan), may   *)
(* stall for any time, and then writes.                                   *)
(*                                                                         *)
(* The writes that consume a message (RunStart: a run's prompt; Reply: an *)
(* answer to an open request) are fenced by the claim: they commit only   *)
(* while the writer's holder is the lease's holder, checked in the same   *)
(* transaction.  Abandon is fenced the same way.  The end of a run is not *)
(* fenced; storage refuses it once the run was abandoned (EndRefused).    *)
(*                                                                         *)
(* Steering: while p's run is active and no request is open, p gives the  *)
(* run's agent the next unconsumed message (Steer, a read), then records  *)
(* it (SteerRecord, a write that consumes it).  Like the run's end, the   *)
(* record is not fenced: storage refuses it once the run was abandoned    *)
(* (SteerRefused).  This is ADR-0069's one exception: a message given as  *)
(* steering to a run abandoned before its record consumed nothing, and   *)
(* the next holder gives it again.  Given twice, consumed once; the ghost *)
(* given and SteeringException say exactly that.  FenceSteer and          *)
(* RefuseSteerAbandoned choose the record's guard (see the cfgs).         *)
(*                                                                         *)
(* FenceStart, FenceReply and FenceAbandon = FALSE switch one fence off  *)
(* each, so that TLC can show that each invariant is not vacuous: each    *)
(* fence guards one invariant, and a model with that fence alone off     *)
(* breaks it (see the cfgs).                                              *)
(*                                                                         *)
(* Action and variable names are shared with the Go code (core, runner)   *)
(* and with the trace line (core.TraceEvent); see spec/README.md.         *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    Procs,          \* runner processes, e.g. {"p1", "p2"}
    MaxMsgs,        \* messages that can be posted to the thread
    MaxClaims,      \* claims (= holders 1..MaxClaims) in a behaviour
    MaxAsks,        \* requests that runs can open
    FenceStart,     \* RunStart requires the lease to be the writer's
    FenceReply,     \* Reply requires the lease to be the writer's
    FenceAbandon,   \* Abandon requires the lease to be the writer's
    FenceSteer,     \* SteerRecord requires the lease to be the writer's
    RefuseSteerAbandoned, \* SteerRecord requires the writer's run active
    ClaimTakesLive  \* Claim may take a live lease (TRUE only to break NoLiveTakeover)

ASSUME /\ Procs # {}
       /\ MaxMsgs \in Nat /\ MaxClaims \in Nat /\ MaxAsks \in Nat
       /\ FenceStart \in BOOLEAN /\ FenceReply \in BOOLEAN
       /\ FenceAbandon \in BOOLEAN
       /\ FenceSteer \in BOOLEAN /\ RefuseSteerAbandoned \in BOOLEAN
       /\ ClaimTakesLive \in BOOLEAN

VARIABLES
    \* storage
    msgs,           \* messages posted so far; their seqs are 1..msgs
    taken,          \* the taken cursor: messages 1..taken are consumed
    lease,          \* [holder |-> 0 (none) or a holder, expired |-> BOOLEAN]
    runs,           \* sequence of runs; a run's id is its index
    reqs,           \* sequence of requests; a request's id is its index
    consumed,       \* ghost: how many times each message was consumed
    liveAbandoned,  \* ghost: a run was abandoned while its holder had the lease
    given,          \* ghost: how many times each message was given to a model
    steered,        \* ghost: the <<run, msg>> steering given and not recorded
    \* processes
    pc,             \* "idle", "claimed", "planned", "running" or "steered"
    hold,           \* the holder of the process's current claim (0 when idle)
    plan,           \* what the process read in Plan and is about to write
    run,            \* the run the process is running (0 when none)
    nextHolder      \* the holder the next Claim gets

storeVars == <<msgs, taken, lease, runs, reqs, consumed, liveAbandoned>>
giveVars  == <<given, steered>>
procVars  == <<pc, hold, plan, run, nextHolder>>
vars      == <<storeVars, giveVars, procVars>>

Holders   == 1..MaxClaims
Msgs      == 1..MaxMsgs
RunStates == {"active", "ended", "abandoned"}
NoLease   == [holder |-> 0, expired |-> FALSE]
NoPlan    == [kind |-> "none", msg |-> 0, req |-> 0]

RunIds == 1..Len(runs)
ReqIds == 1..Len(reqs)
ActiveRuns == {r \in RunIds : runs[r].state = "active"}
OpenReqs   == {q \in ReqIds : reqs[q].state = "open"}

\* The lease is p's: p's holder is the lease's holder (expired or not: the
\* fence is the holder, not the time).
HasLease(p) == hold[p] # 0 /\ lease.holder = hold[p]

Min(S) == CHOOSE x \in S : \A y \in S : x <= y

\* A bound on run ids for Abandon's parameter, so that TLC sees Abandon as an
\* action of its own (its name shows in counterexamples).  Fenced, runs never
\* exceed MaxMsgs (each run consumes a message once); this bound is generous.
MaxRuns == MaxClaims * MaxMsgs

-----------------------------------------------------------------------------
Init ==
    /\ msgs = 0
    /\ taken = 0
    /\ lease = NoLease
    /\ runs = << >>
    /\ reqs = << >>
    /\ consumed = [m \in Msgs |-> 0]
    /\ liveAbandoned = FALSE
    /\ given = [m \in Msgs |-> 0]
    /\ steered = {}
    /\ pc = [p \in Procs |-> "idle"]
    /\ hold = [p \in Procs |-> 0]
    /\ plan = [p \in Procs |-> NoPlan]
    /\ run = [p \in Procs |-> 0]
    /\ nextHolder = 1

\* Someone (a person, not a runner process) posts a message.
Post ==
    /\ msgs < MaxMsgs
    /\ msgs' = msgs + 1
    /\ UNCHANGED <<giveVars, taken, lease, runs, reqs, consumed, liveAbandoned, procVars>>

\* p takes the lease with a fresh holder; only a free or expired lease (any
\* lease with ClaimTakesLive, a defect for the model that must break
\* NoLiveTakeover).
Claim(p) ==
    /\ pc[p] = "idle"
    /\ nextHolder <= MaxClaims
    /\ ~ClaimTakesLive => (lease.holder = 0 \/ lease.expired)
    /\ lease' = [holder |-> nextHolder, expired |-> FALSE]
    /\ hold' = [hold EXCEPT ![p] = nextHolder]
    /\ pc' = [pc EXCEPT ![p] = "claimed"]
    /\ nextHolder' = nextHolder + 1
    /\ UNCHANGED <<giveVars, msgs, taken, runs, reqs, consumed, liveAbandoned, plan, run>>

\* p's renewal timer extends its lease; a lease that expired and that no one
\* took is still p's and renews fine.
Renew(p) ==
    /\ pc[p] # "idle"
    /\ HasLease(p)
    /\ lease' = [lease EXCEPT !.expired = FALSE]
    /\ UNCHANGED <<giveVars, msgs, taken, runs, reqs, consumed, liveAbandoned, procVars>>

\* The lease expires.  Its holder need not know: nothing in the process
\* changes.  Not logged in traces.
Lapse ==
    /\ lease.holder # 0
    /\ ~lease.expired
    /\ lease' = [lease EXCEPT !.expired = TRUE]
    /\ UNCHANGED <<giveVars, msgs, taken, runs, reqs, consumed, liveAbandoned, procVars>>

\* p ends its claim.  The lease is cleared only if it is still p's.
Release(p) ==
    /\ pc[p] = "claimed"
    /\ lease' = IF HasLease(p) THEN NoLease ELSE lease
    /\ pc' = [pc EXCEPT ![p] = "idle"]
    /\ hold' = [hold EXCEPT ![p] = 0]
    /\ UNCHANGED <<giveVars, msgs, taken, runs, reqs, consumed, liveAbandoned,
                   plan, run, nextHolder>>

\* p abandons an active run that an earlier claim started.
Abandon(p, r) ==
    /\ pc[p] = "claimed"
    /\ r \in RunIds
    /\ runs[r].state = "active"
    /\ runs[r].holder # hold[p]
    /\ FenceAbandon => HasLease(p)
    /\ runs' = [runs EXCEPT ![r].state = "abandoned"]
    /\ liveAbandoned' = (liveAbandoned \/ lease.holder = runs[r].holder)
    /\ UNCHANGED <<giveVars, msgs, taken, lease, reqs, consumed, procVars>>

\* The fence refuses p's abandon: p's claim is lost, its round is over.
AbandonFenced(p) ==
    /\ pc[p] = "claimed"
    /\ FenceAbandon
    /\ ~HasLease(p)
    /\ pc' = [pc EXCEPT ![p] = "idle"]
    /\ hold' = [hold EXCEPT ![p] = 0]
    /\ UNCHANGED <<giveVars, storeVars, plan, run, nextHolder>>

\* p reads the thread and decides its next write: the answer to the oldest
\* open request, or else a run, for the oldest unconsumed message.  A read:
\* nothing in storage changes, and p may stall for any time afterwards.
Plan(p) ==
    /\ pc[p] = "claimed"
    /\ ActiveRuns = {}
    /\ taken < msgs
    /\ plan' = [plan EXCEPT ![p] =
                  IF OpenReqs # {}
                  THEN [kind |-> "reply", msg |-> taken + 1, req |-> Min(OpenReqs)]
                  ELSE [kind |-> "run", msg |-> taken + 1, req |-> 0]]
    /\ pc' = [pc EXCEPT ![p] = "planned"]
    /\ UNCHANGED <<giveVars, storeVars, hold, run, nextHolder>>

\* p records the start of the planned run: its prompt is consumed.
RunStart(p) ==
    /\ pc[p] = "planned"
    /\ plan[p].kind = "run"
    /\ FenceStart => HasLease(p)
    /\ runs' = Append(runs, [holder |-> hold[p], prompt |-> plan[p].msg,
                             state |-> "active"])
    /\ taken' = plan[p].msg
    /\ consumed' = [consumed EXCEPT ![plan[p].msg] = @ + 1]
    /\ given' = [given EXCEPT ![plan[p].msg] = @ + 1]
    /\ run' = [run EXCEPT ![p] = Len(runs) + 1]
    /\ pc' = [pc EXCEPT ![p] = "running"]
    /\ plan' = [plan EXCEPT ![p] = NoPlan]
    /\ UNCHANGED <<msgs, lease, reqs, liveAbandoned, steered, hold, nextHolder>>

\* The fence refuses p's start: nothing is written, p's round is over.
StartFenced(p) ==
    /\ pc[p] = "planned"
    /\ plan[p].kind = "run"
    /\ FenceStart
    /\ ~HasLease(p)
    /\ pc' = [pc EXCEPT ![p] = "idle"]
    /\ hold' = [hold EXCEPT ![p] = 0]
    /\ plan' = [plan EXCEPT ![p] = NoPlan]
    /\ UNCHANGED <<giveVars, storeVars, run, nextHolder>>

\* p answers the planned request with the planned message, which is consumed.
Reply(p) ==
    /\ pc[p] = "planned"
    /\ plan[p].kind = "reply"
    /\ FenceReply => HasLease(p)
    /\ reqs[plan[p].req].state = "open"
    /\ reqs' = [reqs EXCEPT ![plan[p].req] =
                  [@ EXCEPT !.state = "answered", !.answer = plan[p].msg]]
    /\ taken' = plan[p].msg
    /\ consumed' = [consumed EXCEPT ![plan[p].msg] = @ + 1]
    /\ given' = [given EXCEPT ![plan[p].msg] = @ + 1]
    /\ pc' = [pc EXCEPT ![p] = "claimed"]
    /\ plan' = [plan EXCEPT ![p] = NoPlan]
    /\ UNCHANGED <<msgs, lease, runs, liveAbandoned, steered, hold, run, nextHolder>>

\* The fence refuses p's answer: nothing is written, p's round is over.
ReplyFenced(p) ==
    /\ pc[p] = "planned"
    /\ plan[p].kind = "reply"
    /\ FenceReply
    /\ ~HasLease(p)
    /\ pc' = [pc EXCEPT ![p] = "idle"]
    /\ hold' = [hold EXCEPT ![p] = 0]
    /\ plan' = [plan EXCEPT ![p] = NoPlan]
    /\ UNCHANGED <<giveVars, storeVars, run, nextHolder>>

\* p's running run opens a request (not fenced; it consumes nothing).
Ask(p) ==
    /\ pc[p] = "running"
    /\ runs[run[p]].state = "active"
    /\ Len(reqs) < MaxAsks
    /\ reqs' = Append(reqs, [run |-> run[p], state |-> "open", answer |-> 0])
    /\ UNCHANGED <<giveVars, msgs, taken, lease, runs, consumed, liveAbandoned, procVars>>

\* p records the end of its run (not fenced).
RunEnd(p) ==
    /\ pc[p] = "running"
    /\ runs[run[p]].state = "active"
    /\ runs' = [runs EXCEPT ![run[p]].state = "ended"]
    /\ pc' = [pc EXCEPT ![p] = "claimed"]
    /\ run' = [run EXCEPT ![p] = 0]
    /\ UNCHANGED <<giveVars, msgs, taken, lease, reqs, consumed, liveAbandoned,
                   hold, plan, nextHolder>>

\* Storage refuses the end of p's run, which was abandoned: the round is over.
EndRefused(p) ==
    /\ pc[p] = "running"
    /\ runs[run[p]].state = "abandoned"
    /\ pc' = [pc EXCEPT ![p] = "idle"]
    /\ hold' = [hold EXCEPT ![p] = 0]
    /\ run' = [run EXCEPT ![p] = 0]
    /\ UNCHANGED <<giveVars, storeVars, plan, nextHolder>>

\* p's active run is given the next unconsumed message as steering, while
\* no request is open (the oldest unconsumed message answers an open
\* request: Plan).  A read: nothing in storage changes; the message is
\* given to the agent, and p may stall for any time before it records it.
Steer(p) ==
    /\ pc[p] = "running"
    /\ runs[run[p]].state = "active"
    /\ OpenReqs = {}
    /\ taken < msgs
    /\ given' = [given EXCEPT ![taken + 1] = @ + 1]
    /\ steered' = steered \cup {<<run[p], taken + 1>>}
    /\ plan' = [plan EXCEPT ![p] = [kind |-> "steer", msg |-> taken + 1, req |-> 0]]
    /\ pc' = [pc EXCEPT ![p] = "steered"]
    /\ UNCHANGED <<storeVars, hold, run, nextHolder>>

\* p records the steering its run was given: the message is consumed, the
\* taken cursor moves to it.  Not fenced by the claim (unless FenceSteer);
\* refused once the run was abandoned (unless ~RefuseSteerAbandoned).
SteerRecord(p) ==
    /\ pc[p] = "steered"
    /\ RefuseSteerAbandoned => runs[run[p]].state = "active"
    /\ FenceSteer => HasLease(p)
    /\ taken' = plan[p].msg
    /\ consumed' = [consumed EXCEPT ![plan[p].msg] = @ + 1]
    /\ steered' = steered \ {<<run[p], plan[p].msg>>}
    /\ pc' = [pc EXCEPT ![p] = "running"]
    /\ plan' = [plan EXCEPT ![p] = NoPlan]
    /\ UNCHANGED <<msgs, lease, runs, reqs, liveAbandoned, given, hold, run,
                   nextHolder>>

\* Storage refuses the record: p's run was abandoned (or, with FenceSteer,
\* the lease is not p's).  Nothing is written, p's round is over, and the
\* message it gave stays unconsumed.
SteerRefused(p) ==
    /\ pc[p] = "steered"
    /\ \/ RefuseSteerAbandoned /\ runs[run[p]].state # "active"
       \/ FenceSteer /\ ~HasLease(p)
    /\ pc' = [pc EXCEPT ![p] = "idle"]
    /\ hold' = [hold EXCEPT ![p] = 0]
    /\ run' = [run EXCEPT ![p] = 0]
    /\ plan' = [plan EXCEPT ![p] = NoPlan]
    /\ UNCHANGED <<storeVars, giveVars, nextHolder>>

\* p dies.  Its lease and its run stay as they are in storage; the lease
\* lapses by Lapse, and the next claimant abandons the run.
Crash(p) ==
    /\ pc[p] # "idle"
    /\ pc' = [pc EXCEPT ![p] = "idle"]
    /\ hold' = [hold EXCEPT ![p] = 0]
    /\ run' = [run EXCEPT ![p] = 0]
    /\ plan' = [plan EXCEPT ![p] = NoPlan]
    /\ UNCHANGED <<giveVars, storeVars, nextHolder>>

ProcNext(p) ==
    \/ Claim(p) \/ Renew(p) \/ Release(p)
    \/ \E r \in 1..MaxRuns : Abandon(p, r)
    \/ AbandonFenced(p)
    \/ Plan(p) \/ RunStart(p) \/ StartFenced(p) \/ Reply(p) \/ ReplyFenced(p)
    \/ Ask(p) \/ RunEnd(p) \/ EndRefused(p)
    \/ Steer(p) \/ SteerRecord(p) \/ SteerRefused(p) \/ Crash(p)

Next ==
    \/ Post
    \/ Lapse
    \/ \E p \in Procs : ProcNext(p)

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Safety *)

TypeOK ==
    /\ msgs \in 0..MaxMsgs
    /\ taken \in 0..MaxMsgs
    /\ taken <= msgs
    /\ lease \in [holder : 0..MaxClaims, expired : BOOLEAN]
    /\ runs \in Seq([holder : Holders, prompt : Msgs, state : RunStates])
    /\ reqs \in Seq([run : Nat \ {0}, state : {"open", "answered"},
                     answer : 0..MaxMsgs])
    /\ consumed \in [Msgs -> Nat]
    /\ liveAbandoned \in BOOLEAN
    /\ given \in [Msgs -> Nat]
    /\ steered \subseteq (Nat \X Msgs)
    /\ pc \in [Procs -> {"idle", "claimed", "planned", "running", "steered"}]
    /\ hold \in [Procs -> 0..MaxClaims]
    /\ plan \in [Procs -> [kind : {"none", "run", "reply", "steer"},
                           msg : 0..MaxMsgs, req : Nat]]
    /\ run \in [Procs -> Nat]
    /\ nextHolder \in 1..(MaxClaims + 1)

\* I1: a message is consumed at most once, as a prompt or as an answer.
I1_ConsumedAtMostOnce == \A m \in Msgs : consumed[m] <= 1

\* I3: at most one run of the thread is active.
I3_OneActiveRun == Cardinality(ActiveRuns) <= 1

\* No run is abandoned while its own claim still holds the lease.
NoLiveAbandon == ~liveAbandoned

\* ADR-0069's one exception, exactly: a message is given to a model more
\* than once only by steering that was never recorded.  Every give of m is
\* the one that consumed it, or steering not recorded (a pair of steered):
\* to an active run, which can only be waiting for its record of the next
\* message, or to a run abandoned before its record; never to an ended run.
SteeringException ==
    /\ \A m \in Msgs :
          given[m] = consumed[m] + Cardinality({x \in steered : x[2] = m})
    /\ \A x \in steered :
          /\ x[1] \in RunIds
          /\ runs[x[1]].state # "ended"
          /\ runs[x[1]].state = "active" => x[2] = taken + 1

\* Negated in a cfg to show that the exception is reachable: TLC finds a
\* behaviour where a message is given twice.
GivenAtMostOnce == \A m \in Msgs : given[m] <= 1

\* No one takes a live lease: the lease passes to a new holder only when it
\* was free or had expired.  (An action property: a state alone cannot tell
\* a takeover of a live lease from one that lapsed first, since Lapse may
\* happen at any moment.)
LiveTakeover ==
    /\ lease'.holder \notin {0, lease.holder}
    /\ lease.holder # 0
    /\ ~lease.expired
NoLiveTakeover == [][~LiveTakeover]_vars

-----------------------------------------------------------------------------
(* Liveness *)

\* A lapse under a live holder: some process still works under that claim.
LiveLapse == Lapse /\ \E p \in Procs : hold[p] = lease.holder

\* A lapse of a lease whose holder no process works under any more (it
\* crashed, or went on without releasing): the TTL runs out for it.
OrphanLapse == Lapse /\ \A p \in Procs : hold[p] # lease.holder

\* Fairness: each process keeps taking the steps of its round (weak
\* fairness per action), and the lease of a dead claim eventually expires.
\* Post, Renew, Release, Ask, Crash and LiveLapse are the environment's
\* choice and get no fairness: they may happen, or not.  FairnessButClaim
\* is all of it but Claim's, for EveryPostConsumedButClaim below.
FairnessButClaim ==
    /\ \A p \in Procs :
          /\ WF_vars(\E r \in 1..MaxRuns : Abandon(p, r))
          /\ WF_vars(AbandonFenced(p))
          /\ WF_vars(Plan(p))
          /\ WF_vars(RunStart(p))
          /\ WF_vars(StartFenced(p))
          /\ WF_vars(Reply(p))
          /\ WF_vars(ReplyFenced(p))
          /\ WF_vars(RunEnd(p))
          /\ WF_vars(EndRefused(p))
          /\ WF_vars(SteerRecord(p))
          /\ WF_vars(SteerRefused(p))
    /\ WF_vars(OrphanLapse)

Fairness ==
    /\ \A p \in Procs : WF_vars(Claim(p))
    /\ FairnessButClaim

LiveSpec == Spec /\ Fairness

\* From some point on, no claim lapses under a live holder.
LapsesStop == <>[][~LiveLapse]_vars

\* Holders are bounded in the model: a behaviour can spend every claim and
\* leave the thread with no one able to claim it.  That is a model artefact,
\* excused only once no process holds a claim any more.
ClaimsSpent == nextHolder > MaxClaims /\ \A p \in Procs : pc[p] = "idle"

\* Once lapses stop, every posted message is eventually consumed.
EveryPostConsumed ==
    LapsesStop =>
        \A m \in Msgs : (msgs >= m) ~> (consumed[m] >= 1 \/ ClaimsSpent)

\* The same with every step fair but Claim's: a message posted while no
\* process holds a claim may wait for ever, since no one need claim.  It is
\* violated while a claim is left, so a cfg with one claim
\* (ThreadClaimLapseNoClaimFairness.cfg) shows that ClaimsSpent excuses no
\* behaviour before the last claim is spent.
EveryPostConsumedButClaim == FairnessButClaim => EveryPostConsumed

\* Every lease ends (is freed or expires) once lapses stop.  False, and
\* meant to be: a live holder may keep its lease for ever, since only a
\* dead claim's lease must expire (OrphanLapse's fairness).  Progress comes
\* from the holder's own steps, and safety from the fence, never from a
\* live lease's expiry.  ThreadClaimLapseLeaseKept.cfg must find it
\* violated under LiveSpec: fairness that made every lease expire would
\* make it hold.
EveryLeaseEnds ==
    LapsesStop => (lease.holder # 0 ~> (lease.holder = 0 \/ lease.expired))

=============================================================================
