package core

// TraceEvent is one line of a trace: one action of the specification, with
// the values its variables need. The JSON names are the specification's.
//
// Tick is the thread's version. A write (Read false) carries the version
// its transaction made; a read or a refusal (Read true) carries the version
// it saw. One thread's lines are ordered by Tick, writes before reads at
// equal Tick, then in the order written. A Crash whose read of the thread
// failed (storage unreachable) carries the last version its round's own
// lines saw, so it may be written after other processes' lines of higher
// Tick: the order by Tick places it where its process was still in its
// round, which is what a checker must follow, not the order of writing.
type TraceEvent struct {
	Tick   uint64    `json:"tick"`
	Read   bool      `json:"read"`
	Action Action    `json:"action"`
	Thread ThreadID  `json:"thread"`
	Proc   string    `json:"proc"`
	Holder Holder    `json:"holder"`
	Msg    Seq       `json:"msg"`
	Req    RequestID `json:"req"`
	Run    RunID     `json:"run"`
	Taken  Seq       `json:"taken"`
	// Lease is the lease's holder as the transaction saw it ("" for none):
	// after the write for Claim, Renew, Release, Abandon, RunStart and
	// Reply; as refused for AbandonFenced, StartFenced and ReplyFenced.
	// Other actions do not read the lease and leave it empty.
	Lease Holder `json:"lease"`
	Kind  string `json:"kind,omitempty"` // Plan: PlanKindRun or PlanKindReply

	// Timing, on Claim and Renew lines only (0 when absent): the
	// claimant's clock reading (Unix nanoseconds), the ttl it asked for
	// (nanoseconds), the expiry it stamped on the lease (Unix
	// nanoseconds), and for a Claim over a lease someone held, that
	// lease's expiry. The spec has no clock; tracecheck checks these
	// against the lease rules (expires = now + ttl; a Claim takes another
	// holder's lease only once now has reached its expiry).
	Now      int64 `json:"now,omitempty"`
	TTL      int64 `json:"ttl,omitempty"`
	Expires  int64 `json:"expires,omitempty"`
	Replaced int64 `json:"replaced,omitempty"`

	// Output is set on a RunEnd line whose write recorded the run's
	// output with its end (core.RunOutput). Only RunEnd carries it: the
	// output belongs to an active run of the writer, ended by that line.
	Output bool `json:"output,omitempty"`

	// Call and Return are when the Workspace call began and returned, read
	// from the Tracer's own clock when it implements TraceClock (a
	// linearizability check needs them). They are not part of the trace
	// format.
	Call   int64 `json:"-"`
	Return int64 `json:"-"`
}

// TraceClock is implemented by a Tracer that wants each line stamped with
// its call's start and return, in its own monotonic units.
type TraceClock interface {
	TraceNow() int64
}

// Tracer receives trace lines. It must be safe for concurrent use; the
// Workspace calls it after the transaction it describes has ended.
type Tracer interface {
	Trace(TraceEvent)
}
