package core

// The specification's names besides its actions' (actions.go): its
// invariants and the values of its variables, as spec/ThreadClaimLapse.tla
// writes them. The trace checkers, the Go model of the spec and the
// simulations print and compare these names; they are defined here once.
// The values of runs[r].state and reqs[q].state are the run and request
// states of a thread (StateActive, RequestOpen, ...).

// The invariants and the action property of spec/ThreadClaimLapse.tla, by
// the names the spec and its cfgs give them.
const (
	InvTypeOK             = "TypeOK"
	InvConsumedAtMostOnce = "I1_ConsumedAtMostOnce"
	InvOneActiveRun       = "I3_OneActiveRun"
	InvNoLiveAbandon      = "NoLiveAbandon"
	// PropNoLiveTakeover is the action property [][~LiveTakeover]_vars.
	PropNoLiveTakeover = "NoLiveTakeover"
)

// The values of pc[p]: where process p is in its round. A Workspace
// follows each claim's round through them.
const (
	PCIdle    = "idle"
	PCClaimed = "claimed"
	PCPlanned = "planned"
	PCRunning = "running"
)

// The values of plan[p].kind. A Plan trace line's Kind is PlanKindRun or
// PlanKindReply; PlanKindNone, a process with no plan, is on no line.
const (
	PlanKindNone  = "none"
	PlanKindRun   = "run"
	PlanKindReply = "reply"
)
