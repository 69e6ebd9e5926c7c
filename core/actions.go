package core

// The action table: one row per action of spec/ThreadClaimLapse.tla, the
// single place that says what each action is. The Workspace's rounds, the
// trace checkers, the Go model of the spec, the trace viewer, the
// runner's steps, the porcupine model and the simulations read these
// facts from here, and TestActionTable (core/actions_test.go) holds the
// table to the spec and to every place an action lives: core/ACTIONS.md
// lists them, and an action added in one place only fails that test.

// Action is the name of one of the specification's actions. Trace lines
// carry it, and the Workspace's methods are named after it.
type Action string

// The specification's actions (spec/ThreadClaimLapse.tla). Lapse is never
// written: a lease lapses in the specification at any moment, and a trace
// checker infers it where a Claim takes a lease another holder had.
const (
	ActionPost          Action = "Post"
	ActionClaim         Action = "Claim"
	ActionRenew         Action = "Renew"
	ActionLapse         Action = "Lapse"
	ActionRelease       Action = "Release"
	ActionAbandon       Action = "Abandon"
	ActionAbandonFenced Action = "AbandonFenced"
	ActionPlan          Action = "Plan"
	ActionRunStart      Action = "RunStart"
	ActionStartFenced   Action = "StartFenced"
	ActionReply         Action = "Reply"
	ActionReplyFenced   Action = "ReplyFenced"
	ActionAsk           Action = "Ask"
	ActionRunEnd        Action = "RunEnd"
	ActionEndRefused    Action = "EndRefused"
	ActionSteer         Action = "Steer"
	ActionSteerRecord   Action = "SteerRecord"
	ActionSteerRefused  Action = "SteerRefused"
	ActionCrash         Action = "Crash"
)

// Actions returns every action, in the order the specification
// declares them (the action table's order).
func Actions() []Action {
	out := make([]Action, len(actionTable))
	for i, info := range actionTable {
		out[i] = info.Action
	}
	return out
}

// LineKind says how an action's trace line relates to the thread's
// version.
type LineKind uint8

// The kinds of trace line.
const (
	// LineNone: the action is never written to a trace (Lapse, which the
	// checkers infer).
	LineNone LineKind = iota
	// LineWrite: the action writes; its line carries the version its
	// transaction made ("read": false).
	LineWrite
	// LineRead: the action reads or is refused and writes nothing; its line
	// carries the version it saw ("read": true).
	LineRead
	// LineWriteOrRead: Release, a write when the lease is still the
	// process's and otherwise a read (the round ends either way).
	LineWriteOrRead
)

func (k LineKind) String() string {
	switch k {
	case LineNone:
		return "none"
	case LineWrite:
		return "write"
	case LineRead:
		return "read"
	case LineWriteOrRead:
		return "write-or-read"
	}
	return "LineKind(?)"
}

// Field is one of a trace line's optional values, as a bit set.
type Field uint8

// The values a trace line may carry besides tick, read, action, thread and
// proc (every line has those) and taken (every logged line carries the
// cursor as storage holds it).
const (
	FieldHolder Field = 1 << iota // the process's holder for its claim
	FieldMsg                      // a message
	FieldReq                      // a request
	FieldRun                      // a run
	FieldLease                    // the lease's holder seen in the transaction
	FieldKind                     // Plan's kind
)

// Has reports whether every field of g is in f.
func (f Field) Has(g Field) bool { return f&g == g }

// ActionInfo is one row of the action table.
type ActionInfo struct {
	Action Action
	// Line is how the action's trace line relates to the thread's version.
	Line LineKind
	// ByProcess is true for the actions a runner process takes under a
	// claim; Post (anyone) and Lapse (time) are not.
	ByProcess bool
	// WritesLease is true for the actions that change the lease.
	WritesLease bool
	// Consumes is true for the writes that consume a message: they save the
	// taken cursor at it. The fence guards those a plan leads to (RunStart,
	// Reply); SteerRecord, like RunEnd, is refused once its run is
	// abandoned instead.
	Consumes bool
	// Fenced is true for the writes that check, inside their own
	// transaction, that the claim's holder has the lease.
	Fenced bool
	// Refuses names, for a refusal, the write it refuses; "" otherwise.
	Refuses Action
	// EndsRound is true when the process is idle after the action: its
	// claim's round is over.
	EndsRound bool
	// PC is the pc[p] the spec's guard requires (PCIdle, PCClaimed,
	// PCPlanned, PCRunning or PCSteered); "" when it requires pc[p] # "idle" (Renew,
	// Crash) or the action has no process (Post, Lapse).
	PC string
	// NextPC is pc'[p] after the action; "" when it leaves pc[p] as it was.
	NextPC string
	// Event is the kind of event the action appends to the thread's log;
	// "" when it appends none.
	Event EventKind
	// Carries lists the values the action's trace line carries.
	Carries Field
}

// ActionTable returns every action's row, in the order the specification
// declares the actions (Actions' order).
func ActionTable() []ActionInfo {
	return append([]ActionInfo(nil), actionTable[:]...)
}

// actionTable is the table itself: constant data, never written.
var actionTable = [...]ActionInfo{
	{Action: ActionPost, Line: LineWrite, Event: MessagePosted, Carries: FieldMsg},
	{Action: ActionClaim, Line: LineWrite, ByProcess: true, WritesLease: true, PC: PCIdle, NextPC: PCClaimed, Carries: FieldHolder | FieldLease},
	{Action: ActionRenew, Line: LineWrite, ByProcess: true, WritesLease: true, Carries: FieldHolder | FieldLease},
	{Action: ActionLapse, Line: LineNone, WritesLease: true},
	{Action: ActionRelease, Line: LineWriteOrRead, ByProcess: true, WritesLease: true, EndsRound: true, PC: PCClaimed, NextPC: PCIdle, Carries: FieldHolder | FieldLease},
	{Action: ActionAbandon, Line: LineWrite, ByProcess: true, Fenced: true, Event: RunAbandoned, PC: PCClaimed, Carries: FieldHolder | FieldRun | FieldLease},
	{Action: ActionAbandonFenced, Line: LineRead, ByProcess: true, Refuses: ActionAbandon, EndsRound: true, PC: PCClaimed, NextPC: PCIdle, Carries: FieldHolder | FieldRun | FieldLease},
	{Action: ActionPlan, Line: LineRead, ByProcess: true, PC: PCClaimed, NextPC: PCPlanned, Carries: FieldHolder | FieldMsg | FieldReq | FieldKind},
	{Action: ActionRunStart, Line: LineWrite, ByProcess: true, Consumes: true, Fenced: true, Event: RunStarted, PC: PCPlanned, NextPC: PCRunning, Carries: FieldHolder | FieldMsg | FieldRun | FieldLease},
	{Action: ActionStartFenced, Line: LineRead, ByProcess: true, Refuses: ActionRunStart, EndsRound: true, PC: PCPlanned, NextPC: PCIdle, Carries: FieldHolder | FieldMsg | FieldLease},
	{Action: ActionReply, Line: LineWrite, ByProcess: true, Consumes: true, Fenced: true, Event: Answered, PC: PCPlanned, NextPC: PCClaimed, Carries: FieldHolder | FieldMsg | FieldReq | FieldLease},
	{Action: ActionReplyFenced, Line: LineRead, ByProcess: true, Refuses: ActionReply, EndsRound: true, PC: PCPlanned, NextPC: PCIdle, Carries: FieldHolder | FieldMsg | FieldReq | FieldLease},
	{Action: ActionAsk, Line: LineWrite, ByProcess: true, Event: Asked, PC: PCRunning, Carries: FieldHolder | FieldReq | FieldRun},
	{Action: ActionRunEnd, Line: LineWrite, ByProcess: true, Event: RunEnded, PC: PCRunning, NextPC: PCClaimed, Carries: FieldHolder | FieldRun},
	{Action: ActionEndRefused, Line: LineRead, ByProcess: true, Refuses: ActionRunEnd, EndsRound: true, PC: PCRunning, NextPC: PCIdle, Carries: FieldHolder | FieldRun},
	{Action: ActionSteer, Line: LineRead, ByProcess: true, PC: PCRunning, NextPC: PCSteered, Carries: FieldHolder | FieldMsg | FieldRun},
	{Action: ActionSteerRecord, Line: LineWrite, ByProcess: true, Consumes: true, Event: RunSteered, PC: PCSteered, NextPC: PCRunning, Carries: FieldHolder | FieldMsg | FieldRun},
	{Action: ActionSteerRefused, Line: LineRead, ByProcess: true, Refuses: ActionSteerRecord, EndsRound: true, PC: PCSteered, NextPC: PCIdle, Carries: FieldHolder | FieldMsg | FieldRun},
	{Action: ActionCrash, Line: LineRead, ByProcess: true, EndsRound: true, NextPC: PCIdle, Carries: FieldHolder},
}

// Info returns the action's row of the action table, and false for a name
// that is not an action.
func Info(a Action) (ActionInfo, bool) {
	for i := range actionTable {
		if actionTable[i].Action == a {
			return actionTable[i], true
		}
	}
	return ActionInfo{}, false
}
