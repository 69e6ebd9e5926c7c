package core

import (
	"context"
	"time"
)

// Lease is a thread's claim as storage holds it. The zero Lease (empty
// Holder) means nobody holds the thread.
type Lease struct {
	Thread    ThreadID // the thread whose lease it is
	Holder    Holder
	ExpiresAt time.Time // stamped with the claimant's own clock
}

// Expired reports whether the lease has expired by the clock reading now.
func (l Lease) Expired(now time.Time) bool { return !now.Before(l.ExpiresAt) }

// Storage is the Workspace's port to where threads and leases live.
type Storage interface {
	// Update runs fn in a transaction and commits it when fn returns nil;
	// when fn returns an error nothing fn wrote is kept and Update returns
	// that error, and when fn panics nothing is kept either and the panic
	// goes on. Update returns an error wrapping ErrCommitUnknown when it
	// cannot tell whether the commit happened, and other errors (wrapped)
	// when storage fails. ctx is passed to fn. A storage may call fn more
	// than once (an optimistic attempt found its reads stale and was
	// discarded, nothing of it kept): fn must leave no effect outside tx
	// that a second call would not overwrite. tx is fn's only while fn
	// runs: fn must not keep it. A storage refuses each later call of it
	// with an error wrapping ErrInvalidArgument, and keeps nothing of it
	// (storetest's KeptTransactionRefused).
	Update(ctx context.Context, fn func(ctx context.Context, tx Transaction) error) error
}

// Transaction reads and writes one storage consistently. A lease is its
// thread's: the lease methods name the thread, and a storage may keep the
// lease with the thread (to lock a thread and its lease in one order).
// Writes on one thread are serialised: from the first call naming a thread
// (Thread, Events, Bump, Append, SaveTaken, Lease, HoldsLease, PutLease,
// DeleteLease) to the transaction's end, no other transaction writes that
// thread or its lease. A transaction reads its own writes.
type Transaction interface {
	// CreateThread adds an empty thread. It returns ErrThreadExists, and
	// CheckText's error (ErrInvalidArgument) for an id it refuses.
	CreateThread(ctx context.Context, id ThreadID) error

	// ThreadIDs lists every thread, in creation order.
	ThreadIDs(ctx context.Context) ([]ThreadID, error)

	// Thread returns the thread's state. The value belongs to the
	// transaction: the caller must not modify it, and must not keep it
	// past the transaction's end. It returns ErrUnknownThread.
	Thread(ctx context.Context, id ThreadID) (*Thread, error)

	// Events returns the thread's log, oldest first. It returns
	// ErrUnknownThread.
	Events(ctx context.Context, id ThreadID) ([]Event, error)

	// Bump increments the thread's version and returns the new value. Each
	// write the Workspace makes bumps it once. It returns ErrUnknownThread.
	Bump(ctx context.Context, id ThreadID) (uint64, error)

	// Append adds ev to the thread's log and folds it into the thread's
	// state (Thread.Apply). The caller has checked it (Thread.Check). It
	// returns ErrUnknownThread, and CheckText's error (ErrInvalidArgument)
	// for an event whose text or holder it refuses.
	Append(ctx context.Context, id ThreadID, ev Event) error

	// SaveTaken sets the thread's taken cursor. It returns ErrUnknownThread.
	SaveTaken(ctx context.Context, id ThreadID, taken Seq) error

	// Lease returns the thread's lease, the zero Lease if it has none (a
	// thread that does not exist has none), and keeps it from changing
	// until the transaction ends.
	Lease(ctx context.Context, id ThreadID) (Lease, error)

	// HoldsLease reports whether holder has the thread's lease, expired or
	// not, and keeps it so until the transaction ends: another holder's
	// acquire waits for this transaction. It also returns the lease seen
	// (as Lease does).
	HoldsLease(ctx context.Context, id ThreadID, holder Holder) (bool, Lease, error)

	// PutLease writes l as the lease of thread l.Thread. A lease written
	// for a holder other than the one that had it is an acquire: storage
	// refuses, with ErrHolderReused, an acquire by a holder that has held
	// that thread's lease before (now or in any earlier claim), from
	// PutLease or from Update when the transaction commits. It returns
	// ErrUnknownThread, and ErrInvalidArgument for an empty thread or
	// holder, or a holder CheckText refuses.
	PutLease(ctx context.Context, l Lease) error

	// DeleteLease removes the thread's lease; removing none is no error.
	// It returns ErrUnknownThread.
	DeleteLease(ctx context.Context, id ThreadID) error
}

// Viewer is implemented by a Storage that runs read-only transactions
// that take no locks and read one consistent snapshot, so that a read (a
// Plan, a look at a thread) neither waits for a thread's writes nor holds
// them up. fn must not write; View returns fn's error, or storage's.
type Viewer interface {
	View(ctx context.Context, fn func(ctx context.Context, tx Transaction) error) error
}

// PendingThread is a thread that may have work, with its lease as the
// listing read it. A runner claims the threads whose lease has expired by
// its own clock first: their holder stopped renewing (its process may be
// dead), and a claim of an expired lease is the specification's Claim
// after Lapse.
type PendingThread struct {
	ID    ThreadID
	Lease Lease // the zero Lease when nobody holds the thread
}

// PendingLister is implemented by a Storage that can list, without
// taking locks, the threads that may have work (a message not yet taken,
// or a run still active) with each one's lease. The answer may be stale by
// the time it is used; the turn that claims the thread decides in its own
// transactions.
type PendingLister interface {
	PendingThreads(ctx context.Context) ([]PendingThread, error)
}

// messagePoster is implemented by a Transaction that can post a message
// without reading the thread first, deciding in storage: PostMessage
// appends the MessagePosted event (text, stamped at) as the thread's next
// message at the thread's next version, saves the bumped version, and
// returns the message's Seq, that version and the thread's taken cursor
// as the write saw them. It is what Thread, Check, Bump and Append would
// do for a post, in one step; it returns ErrUnknownThread, and CheckText's
// error for a text it refuses. Workspace.Post calls it as the
// transaction's first call, and writes nothing else in the transaction
// but the post's trace line (TraceLog). (Unexported, as the library's
// exported identifiers have a budget: a storage implements it by the
// method alone; the PostgreSQL Store does.)
type messagePoster interface {
	PostMessage(ctx context.Context, id ThreadID, at time.Time, text string) (msg Seq, version uint64, taken Seq, err error)
}

// leaseClaimer is implemented by a Transaction that can make a Claim's
// decision in storage, in the statement that writes it: ClaimLease takes
// the thread's lease for holder until expires, and bumps the thread's
// version, exactly when nobody else holds the lease or it has expired at
// now (Lease.Expired) and holder does not hold it. It returns the thread
// as the claim left it, the lease as it found it, and the new version (0
// when it claimed nothing: then it wrote nothing). It is what Thread,
// Lease, Bump and PutLease would do for a Claim, in one step; it returns
// ErrUnknownThread, ErrHolderReused and CheckText's error for a holder it
// refuses. Workspace's Claim calls it as the transaction's first call.
// (Unexported like messagePoster; the PostgreSQL Store implements it.)
type leaseClaimer interface {
	ClaimLease(ctx context.Context, id ThreadID, holder Holder, now, expires time.Time) (t *Thread, was Lease, version uint64, err error)
}

// leaseStartClaimer is a leaseClaimer that can also start, in the
// statements that write the claim, the run the claim's plan will make:
// ClaimLeaseThenStart is ClaimLease, and, when the claim writes, it calls
// plan (once) with the thread as the claim left it; when plan returns a
// RunStarted event (and true) that storage wrote with the claim, the
// thread it returns has that event too, and so does start, stamped with
// its version (the claim's plus one). Storage writes the start only when
// it can tell, in those statements, that the thread is as the event's
// planner saw it: it never writes a start plan does not return. start's
// Version is 0 when it wrote none (the caller then plans and starts
// apart, as after ClaimLease).
type leaseStartClaimer interface {
	ClaimLeaseThenStart(ctx context.Context, id ThreadID, holder Holder, now, expires, at time.Time, plan func(*Thread) (Event, bool)) (t *Thread, was Lease, version uint64, start Event, err error)
}

// TraceLog is implemented by a Transaction that keeps the trace lines of
// the writes it commits, inside the same transaction. When the Workspace
// traces, it gives each write's line to such a transaction before commit,
// so the stored lines are exactly the writes storage committed: even those
// of a process killed between its commit and its own trace file, and those
// whose commit outcome the process never learned.
type TraceLog interface {
	LogTrace(ctx context.Context, ev TraceEvent) error
}

// traceKeeper is implemented by a TraceLogReader that may keep no lines
// at all (a PostgreSQL Store opened without KeepTrace): KeepsTrace false
// says that LoggedTrace's "not logged" means nothing, and a write in
// doubt is decided as when there is no log to ask. (Unexported like
// leaseClaimer.)
type traceKeeper interface {
	KeepsTrace() bool
}

// TraceLogReader is implemented by a Transaction whose storage keeps the
// trace lines of committed writes (TraceLog) and reads them back:
// LoggedTrace returns the line logged at the thread's tick, and false when
// no committed write logged one there. A Crash after a write whose commit
// is unknown asks it whether that write committed, since the trace such a
// storage makes has the write's line exactly when it did: a Release that
// committed has ended its round, and a Crash after it would be a second
// end.
type TraceLogReader interface {
	LoggedTrace(ctx context.Context, id ThreadID, tick uint64) (TraceEvent, bool, error)
}

// Clock tells the time and waits on it. Each process has its own; they may
// disagree. The Workspace stamps lease expiries with Now; a runner over the
// Workspace renews and polls with After on the same clock, so that a test
// clock (coretest.Clock) drives both. SystemClock is the machine's.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed on this
	// clock.
	After(d time.Duration) <-chan time.Time
}

// SystemClock reads the machine's clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After waits for d on the machine's clock.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
