// Package conform is model-based testing of the real code against the
// spec's state graph: the converse of trace validation. Trace validation
// shows that what the code did is a behaviour of spec/ThreadClaimLapse.tla;
// conform shows that every behaviour the spec allows (for a cfg's bounds)
// is one the code performs, and that the code refuses what the spec does
// not allow.
//
// Run takes the graph specmodel explores for a cfg and drives
// core.Workspace over a real core.Storage (store/memory, or PostgreSQL)
// along every edge of it, with one simclock per process. Each state is
// reached by replaying its shortest path on a fresh thread (the tree of
// shortest paths is walked depth first, so a state's first child is
// reached by committing one more step on its parent's thread). From each
// state every edge is driven through the public API as a probe: a storage
// wrapper lets the Workspace's transaction run, reads the thread and lease
// it made, and rolls it back, so that the next edge starts from the same
// stored state. A Lapse moves every process's clock past the lease's
// expiry; a probe's Lapse is undone by giving the processes new clocks at
// the old readings. Three checks, for each state:
//
//   - (a) every action the spec enables succeeds in Go, or is refused the
//     way the spec's refusal action says: ErrThreadBusy for StartFenced,
//     ReplyFenced and AbandonFenced, ErrRunAbandoned for EndRefused;
//   - (b) every write the spec does not enable, where a runner could ask
//     for it (a Claim of a live lease, a Renew of a lost lease, an Abandon
//     of a run that is not active or is the claim's own, or fenced, a
//     Reply to an answered request, an Ask of an abandoned run, a Plan with
//     a run active or nothing to consume), is refused and writes nothing;
//     the model's bounds (MaxMsgs, MaxClaims, MaxAsks) are not asked;
//   - (c) Go's state after each edge, abstracted to the spec's variables
//     (Abstract), is the spec's successor.
//
// core.Workspace keeps each process's round (the spec's pc) and refuses
// calls out of its order. A probe's rollback cannot move a Workspace's
// round back, so the probing walk runs the Workspaces without rounds
// (core.WithoutRoundsForTesting) and keeps each process's round itself, as
// the spec's pc; the sampled walk (Options.Sample), which commits, runs
// them with rounds on, as deployed.
//
// Abstract is the abstraction function: from a thread as storage holds it,
// its lease, the processes' latest clock, each process's round (Proc),
// the claims made in order and the liveAbandoned ghost, it gives the spec
// state (holders numbered by their claims' order, the lease expired when
// its expiry is not after the latest clock). The randomised executions use
// it to measure which of the cfg's states they reach.
//
// With Options.Unfenced the Workspaces run with those fences off
// (core.WithFencesForTesting), the mutant the spec's fences exist for: conform must report divergences, and its tests require it.
// With Options.Sample, a seeded sample of edges is driven and committed
// instead of probed, each on a thread of its own; that is how a
// PostgreSQL run stays short.
//
// Figures (this project's machine, 2 cores shared with many other jobs,
// Go 1.26): the fenced cfg's 1,044,026 edges from 228,049 states, with
// 811,224 refusals asked, 0 divergences, in 1 min 33 s at a load average
// of 15 and 3 min 11 s at 48, over store/memory (go test ./conform -run
// TestConformFenced -v, or tracecheck conform); 1,000 sampled edges over
// PostgreSQL, rounds on, 0 divergences, in 43 s to 81 s
// (scripts/with-postgres go test ./conform -run TestConformPostgres -v).
package conform
