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
	// InvSteeringException is ADR-0069's one exception, stated exactly: a
	// message is given to a model more than once only by steering that
	// its run's abandonment kept from being recorded.
	InvSteeringException = "SteeringException"
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
	// PCSteered: the run was given a message as steering (Steer) that
	// is not recorded yet (SteerRecord).
	PCSteered = "steered"
)

// The values of plan[p].kind. A Plan trace line's Kind is PlanKindRun or
// PlanKindReply; PlanKindNone, a process with no plan, is on no line.
const (
	PlanKindNone  = "none"
	PlanKindRun   = "run"
	PlanKindReply = "reply"
	// PlanKindSteer is plan[p].kind between Steer and its record: the
	// message given as steering. No Plan line carries it.
	PlanKindSteer = "steer"
)
