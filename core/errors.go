package core

import (
	"errors"
	"fmt"
)

// Refusals. Callers check them with errors.Is; the Workspace wraps them with
// the thread, run or request they concern.
var (
	// ErrThreadBusy: the claim's holder does not hold the thread's lease. A
	// fenced write refused with it wrote nothing; a Claim refused with it
	// found another holder's unexpired lease.
	ErrThreadBusy = errors.New("thread busy: the claim does not hold the thread's lease")

	// ErrUnknownThread: no thread has that id.
	ErrUnknownThread = errors.New("unknown thread")

	// ErrThreadExists: CreateThread was given an id already in use.
	ErrThreadExists = errors.New("thread already exists")

	// ErrUnknownMessage: the message seq names no posted message.
	ErrUnknownMessage = errors.New("unknown message")

	// ErrUnknownRun: the run id names no run of the thread.
	ErrUnknownRun = errors.New("unknown run")

	// ErrUnknownRequest: the request id names no request of the thread.
	ErrUnknownRequest = errors.New("unknown request")

	// ErrRunAbandoned: the run was abandoned by a later claim, so its end,
	// a question it asks, a steering record and a second abandon are
	// refused.
	ErrRunAbandoned = errors.New("run was abandoned")

	// ErrRunNotActive: the run has already ended (its end, a question, a
	// steering record or an abandon of it is refused), or is not one an
	// earlier holder left active.
	ErrRunNotActive = errors.New("run is not active")

	// ErrAlreadyAnswered: the request has an answer already; a second one
	// is refused.
	ErrAlreadyAnswered = errors.New("request already answered")

	// ErrInvalidArgument: the call's arguments are malformed (an empty
	// holder or thread id, or one longer than MaxIDBytes; an id, text or
	// holder with a NUL byte or invalid UTF-8, CheckText; a non-positive
	// TTL, or one whose expiry is past April 2262; a holder that already
	// holds the lease; a Claim that this
	// Workspace's Claim did not make, or that was changed; a nil context,
	// which every Workspace call refuses before it does anything).
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrHolderReused: a lease was to be acquired by a holder that has
	// held that lease before, or a Workspace was to claim with a holder it
	// claimed with before, on any thread. Holders are fresh for every
	// claim: a holder that claimed a thread never claims it again, or a
	// round it left behind would pass a later claim's fence. Storage
	// enforces it for each thread; it wraps ErrInvalidArgument.
	ErrHolderReused = fmt.Errorf("%w: holder already used by an earlier claim", ErrInvalidArgument)
	// ErrOutOfOrder: the call is not one the specification allows next in
	// the claim's round (a RunStart or Reply that is not the current plan,
	// a Plan or Release during a run, a second Claim on a thread whose
	// round is open). Nothing was written or traced.
	ErrOutOfOrder = errors.New("call out of the round's order")

	// ErrRoundOver: the claim's round has ended (a Release, a refusal of a
	// fenced write or of a run's end, or a Crash ended it), so the claim
	// can do nothing more. Nothing was written or traced.
	ErrRoundOver = errors.New("claim's round is over")

	// ErrCommitUnknown: the storage could not tell whether the transaction
	// committed (the connection broke during COMMIT). A caller must treat
	// its claim as lost and never retry the write under the same holder.
	ErrCommitUnknown = errors.New("commit outcome unknown")

	// ErrInconsistentLog: a storage read a thread's stored events and they
	// do not fold into a thread (an event that does not follow the one
	// before it): storage holds what no sequence of writes makes. Or a
	// write of a claim's round found storage behind what the round saw
	// (it lost commits it had acknowledged): a consuming write would skip
	// a message, a run's start would make a second run active, or an Ask
	// would take the id of one the round saw opened. The write wrote
	// nothing.
	ErrInconsistentLog = errors.New("stored log is inconsistent")
)
