// Package conform is model-based testing of the real code against the
// spec's state graph: the converse of trace validation. Trace validation
// shows that what the code did is a behaviour of spec/ThreadClaimLapse.tla;
// conform shows that every behaviour the spec allows (for a cfg's bounds)
// is one the code performs, and that the code refuses what the spec does
// not allow.
//
// Run takes the graph specmodel explores for a cfg and drives
// core.Workspace over a real core.Storage (store/memory, or PostgreSQL)
// along every edge of it, with one manual clock per process. Each state is
// reached by replaying its shortest path on a fresh thread (the tree of
// shortest paths is walked depth first, so a state's first child is
// reached by committing one more step on its parent's thread). From each
// state every edge is driven through the public API as a probe: a storage
// wrapper lets the Workspace's transaction run, reads the thread and lease
// it made, and rolls it back, so that the next edge starts from the same
// stored state. The wrapper reads the thread before the Workspace's
// transaction runs, so that a storage's one-statement writes, which commit
// as they are sent when they come first (the PostgreSQL Store's post and
// claim), take their reading path inside the transaction instead; the
// committed edges drive them as deployed. A Lapse moves every process's clock past the lease's
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
// calls out of its order; the Workspaces run with their rounds, as
// deployed, and each process's claim is the one Workspace.Claim made. A
// probe's rollback cannot move a Workspace's round back, so a probe runs
// on a fork of the process's Workspace (core.Workspace.ForkForTesting),
// its round copied in the phase the path left it in, and the fork is
// dropped after the probe; the driver keeps each process's round too, as
// the spec's pc, for the abstraction.
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
// Its figures, each with its command: internal/cli/BENCH.md, "conform".
package conform
