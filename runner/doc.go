// Package runner claims threads and turns their messages into runs of an
// agent, one claim ("a turn") at a time: claim the thread with a fresh
// holder, abandon the runs earlier claims left active, plan, start a run or
// answer a request (both fenced by the claim), run the agent, record the
// run's end (not fenced), go on while messages remain, release. The claim
// and the first plan, and each run's end and the plan after it, are one
// transaction each (core.Workspace.ClaimThenStart, RunEndThenStart); the
// planned run's start goes with the claim when storage can write it there
// (a PostgreSQL Store that knows the thread), and with a run's end while
// three messages or more wait behind its prompt, and the release with the
// last run's end when nothing is left to plan, unless Config.SeparatePlans
// is set.
//
// A timer renews the claim every RenewEvery; a renewal that finds the claim
// gone cancels the running agent's context. Renewal is about liveness only:
// a claim can lapse under a live holder (a write in flight past ClaimTTL, a
// clock running ahead elsewhere), and what keeps a message from being
// consumed twice is the fence in core, checked inside each consuming
// write's transaction. A start the fence refuses consumed nothing; the
// run's handle returns core.ErrThreadBusy from Wait, the turn ends as a
// failed turn (OutcomeFenced), and the thread is the new holder's.
//
// The agent's error, and its panic, which the runner recovers, end its run
// like its return: the run's end is recorded (its message stays consumed),
// the run's handle returns the error from Wait, and the turn goes on. A
// Runner has one Run at a time.
//
// Stopping is graceful: when Run's context ends, the running agent's
// context is cancelled, its run's end is recorded and the claim released
// (OutcomeStopped), and Run returns nil: a stop is not an error. Storage calls are not cut off by that context, since a
// write cut off in flight may or may not have committed; only a turn still
// going ShutdownGrace later is.
//
// Run keeps up to MaxConcurrentTurns turns going at once, each on its own
// thread, and bounds each turn (MaxTurnMessages, MaxTurnDuration): a turn
// that reaches its bound releases the thread (OutcomeYielded) and the
// thread waits behind the others for a later turn. It starts first the
// threads whose lease has expired by its clock (their holder stopped
// renewing), and while every slot is taken it still looks for those every
// PollEvery and takes them over in a takeover slot (TakeoverTurns): a
// short turn that abandons what the lapsed claim left and releases the
// thread. So a thread whose runner died is claimed within ClaimTTL +
// PollEvery of its last renewal however busy the runners are
// (TestTakeoverWhileSaturated shows it with manual clocks; BenchmarkHandover
// measures it: runner/BENCH.md). With Config.Wake (the PostgreSQL Store's
// Wakeups), a message posted to a thread nobody holds and that had no work
// names the thread,
// and Run claims it at once, with no look for work; its polls leave a
// thread given work since the last look to the runner its wake-up went
// to, and take it at the next poll if it still waits.
//
// A turn that gives up after a write whose commit is unknown ends its
// round with Crash; when storage cannot answer that Crash either, the
// round stays open, and Run tries its Crash again at a later look, at
// most once every PollEvery, until storage answers, and once more as it
// stops (OpenRounds counts them). The retry is never a loop inside the
// turn, which a deterministic scheduler drives step by step.
//
// An agent answers the person with Session.Output: the text is recorded
// with its run's end, in the same transaction, as the run's output
// (core.Run.Output, a core.RunOutput event). It is no message, so it never
// becomes a prompt: an agent that posted its reply to the thread instead
// would start a run on it, and on that run's reply, without end. A
// service sees the reply, a question asked and everything else that
// happens to a thread by following its events from a position
// (core.Workspace.Follow), without polling.
//
// An agent may ask the person a question and wait for the answer
// (Session.Await): its run's end is recorded, since a request is answered
// only while no run of the thread is active, and whichever runner next
// holds the thread answers it with the next message through a fenced
// Reply; the waiting agent hears it at once from its own runner, or at
// its next poll from another process's. The answer is the thread's next
// unconsumed message, whatever it says: one posted before the question
// was asked answers it (ExampleSession_Await_queuedMessageAnswers).
//
// While its run works, an agent hears the messages the person posts after
// its prompt, oldest first, as steering (Session.Steer,
// ExampleSession_Steer). Steering is given first and recorded after: the
// record, which consumes the message and lists it in the run's Steering,
// is the run's next write: the next Steer, Ask or Await makes it first,
// and when the agent returns, the turn makes it as a step of its own
// (StepSteerRecord) before the run's end. Like the run's end, the record is not fenced by the
// claim, and is refused once a later claim abandoned the run: the message
// was given and not consumed, and the thread's next holder gives it again
// (ADR-0069's one exception: given twice, consumed once). A refused record
// ends the turn as a refused end does (OutcomeLost): the agent's ctx is
// cancelled, and its later calls and its run's handle return
// core.ErrRunAbandoned.
//
// A turn is a span ("threadclaim.turn"); the runner counts turns by
// outcome, fenced refusals by write, runs started, ended and abandoned,
// steering given, recorded and refused (each also an event of the turn's
// span: "steer", "steer_recorded", "steer_refused"), and records how long
// messages waited to be consumed. Each turn is also
// logged (Config.Logger) and reported (Config.OnTurn, a TurnReport); each
// run's handle is handed to Config.OnRun as soon as it is planned.
//
// A runner's Store may keep threads' states in memory (store/postgres's
// cache: Options.CachedThreads), and each message makes garbage: 14.6 KB
// in store/postgres's RunnerLoadedLatency, posters included. On a small
// machine the collector's cycles lengthen the tail of post-to-start at a
// steady rate: on 2 cores at 1,500–2,000 messages a second the p99 was
// within 5 ms in 9 runs of 11 with the collector off (GOGC=off under a
// GOMEMLIMIT; 2.2–3.3 ms in eight of them) and in 7 of 11 with Go's
// default (store/postgres/BENCH.md, "The tail at half of saturation: a
// turn a message"). A process that runs runners may so trade memory for
// its tail, with GOGC or GOMEMLIMIT; the package sets neither.
//
// A program that embeds the runner uses New, Run (or TakeTurn for one
// turn, TakeTurns for one on each thread with work), Config, Agent,
// Session and RunHandle; ExampleRunner_Run is the quick start. Turn, NewTurn, Step, the Step
// constants and Steps serve the deterministic simulator (internal/sim),
// which interleaves many processes' turns one step at a time.
package runner
