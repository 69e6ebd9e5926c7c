// Package fleet runs the thread claim as a fleet of runner OS processes
// (tracecheck worker) on PostgreSQL under a seeded nemesis, and checks
// what they did: the soak behind `tracecheck fleet`.
//
// A run has four parts, one file each:
//
//   - the fleet (fleet.go, procs.go): a fresh schema, posters posting the
//     messages, and the workers, each started behind its own TCP proxy
//     (package proxy) with its lease clock offset from the machine's;
//   - the nemesis (nemesis.go, cluster.go): faults drawn from the seed,
//     each kind once before any twice,
//     until every message is consumed: SIGSTOP past the TTL, SIGKILL and a
//     replacement, lease-clock jumps, pg_terminate_backend mid-transaction,
//     PostgreSQL restarts, partitions, latency, COMMITs held back past
//     the TTL, a worker cut off and then stopped cleanly (KindRetire),
//     PostgreSQL losing acknowledged commits (KindLose), and storage
//     losing one acknowledged Claim, emulated with SQL (KindRewind,
//     rewind.go). Once the nemesis has returned, no fault may be left in
//     force (a proxy's partition, latency or held COMMITs, a lease clock
//     off its skew, a worker stopped): the run is then an error, not a
//     verdict, since the checks would judge a fleet never let recover;
//   - the checks (checks.go): every message consumed exactly once (from
//     storage), at most one run active per thread and no live run
//     abandoned (replayed from the trace), the whole trace by the Go trace
//     checker, the history by porcupine, the handover after each SIGKILL,
//     and the writes whose commit was unknown (doubts.go: each worker
//     reports them, core.WithDoubts, and the fleet checks each resolution
//     against storage's log), and what storage lost: the writes a
//     process was told committed that storage's log no longer holds
//     (tracecheck.MergeHistories), by action; the checks judge what
//     storage kept;
//   - the report (report.go, html.go): text, JSON and an HTML timeline of
//     the faults against throughput and handovers.
//
// The workers reconnect by themselves; nothing restarts them but a
// SIGKILL. The fleet's choices (faults, targets, the workers' seeds) come
// from Config.Seed; the interleaving is the machine's, so a seed does not
// replay a run.
package fleet
