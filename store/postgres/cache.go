package postgres

import (
	"sync/atomic"

	"github.com/threadclaim/threadclaim/core"
)

// cacheEntry is a thread's state folded through its first n events, with
// its lease, as a committed transaction of this Store left them (or a
// View read them). Transactions share its state without copying it: a
// transaction copies what it changes (see cow), so the state a cacheEntry
// holds is never modified, except past its slices' lengths by the one
// transaction that wins the right to append there.
type cacheEntry struct {
	created int64 // the row's identity, so a re-created thread is not mistaken
	n       int64
	// last is event n, as folded: a transaction that reads the log checks
	// that storage still has it (see behind).
	last  core.Event
	state *core.Thread
	lease core.Lease
	// ownLease: this Store wrote the lease for its holder, so no other
	// process is expected to write the thread until the lease is released
	// or lapses; a transaction may speculate on the entry (see txn).
	ownLease bool
	// distrusted: a check that speculated on the entry failed (Store's
	// distrust), so no transaction speculates on it; the next transaction
	// that reads the thread from the server and commits leaves an entry
	// that is not.
	distrusted bool
	cow        cow
}

// rights is the append rights one entry made new. It is an allocation of
// its own, not a field of the entry: a later entry that shares one of
// them points into it, and a pointer into an entry would keep that
// entry, its state and the entries its own rights point into alive, one
// chain a thread long, each link with the state's copies of its slices
// (see entry).
type rights [nSlices]atomic.Bool

// The two slices of a core.Thread, as cow's indices. (Its runs need no
// cow: Apply never changes them in place; core.Thread.)
const (
	sliceMessages = iota
	sliceRequests
	nSlices
)

// cow is what a transaction may change in place of a state it shares with
// a cache entry.
//
// States derived one from another share their slices' arrays. Writing at
// index len of an array is safe for exactly one of the states that end at
// len: the one whose transaction wins that slice's append right, an
// atomic flag shared by every state with the same array and length. A
// transaction that loses it, or that changes an element below len (an
// answered request), copies the slice first. An append thus costs O(1)
// however long the thread's log, with no lock. The runs are not here:
// core.Thread holds them so that no event changes them in place, and a
// RunEnd costs the same on a thread of any length (BenchmarkLongThread;
// store/postgres/BENCH.md, "A long thread").
type cow struct {
	header bool                  // the state's header is the transaction's own
	own    [nSlices]bool         // the slice's array is the transaction's own
	append [nSlices]*atomic.Bool // the append right of the slice's (array, length); nil: none
	won    [nSlices]bool         // this transaction holds the append right
}

// header makes the thread's header (version, taken, slices' lengths) this
// transaction's own.
func (th *txThread) header() {
	if th.base == nil || th.cow.header {
		return
	}
	c := *th.state
	th.state = &c
	th.cow.header = true
}

// apply folds ev into the thread, copying first whatever ev would change
// that the transaction shares.
func (th *txThread) apply(ev core.Event) {
	if th.base != nil {
		th.header()
		switch ev.Kind {
		case core.MessagePosted:
			appendable(th, sliceMessages, &th.state.Messages)
		case core.Asked:
			appendable(th, sliceRequests, &th.state.Requests)
		case core.Answered:
			own(th, sliceRequests, &th.state.Requests)
		}
	}
	th.state.Apply(ev)
	th.last = ev
}

// appendable makes slice i of the thread, s, safe to append to.
func appendable[T any](th *txThread, i int, s *[]T) {
	if th.cow.own[i] || th.cow.won[i] {
		return
	}
	if f := th.cow.append[i]; f != nil && f.CompareAndSwap(false, true) {
		th.cow.won[i] = true
		return
	}
	own(th, i, s)
}

// own gives slice i of the thread an array of the transaction's own,
// with room for one element more: one allocation and one copy (a clone
// grown afterwards made two of each, the second of up to twice the size).
func own[T any](th *txThread, i int, s *[]T) {
	if th.cow.own[i] {
		return
	}
	c := make([]T, len(*s), len(*s)+1)
	copy(c, *s)
	*s = c
	th.cow.own[i] = true
}

// entry returns the cache entry the thread's state becomes once the
// transaction commits, or th.base when it left the state as it found it.
func (th *txThread) entry(lease core.Lease, leaseKnown bool) *cacheEntry {
	if th.base != nil && !th.cow.header && th.base.n == th.n &&
		th.base.lease == lease && th.base.ownLease == th.ownLease && !th.base.distrusted {
		return th.base
	}
	e := &cacheEntry{created: th.created, n: th.n, last: th.last, state: th.state, lease: lease, ownLease: th.ownLease && leaseKnown}
	var made *rights
	for i := range nSlices {
		if th.base == nil || th.cow.own[i] || th.cow.won[i] || th.cow.append[i] == nil {
			// A new array, or new length: a new append right. (A slice
			// whose right this transaction did not win is unchanged
			// unless it owns it: then it is new too.)
			if made == nil {
				made = new(rights)
			}
			e.cow.append[i] = &made[i]
		} else {
			e.cow.append[i] = th.cow.append[i] // same array, same length: the same right
		}
	}
	return e
}

// behind reports whether storage is behind what the cache entry says this
// Store saw committed: the log lacks the event the entry ended on (evs
// is the log from event c.n on), or holds another there. Storage that
// lost acknowledged commits (a crash with synchronous_commit = off, a
// failover to an asynchronous replica, a restore) is so; the entry must
// then be dropped and the log read anew, or a write would be appended
// past the log's end, a gap that no Store could fold again. A lost write
// with no event (a Renew) needs nothing: the row's version, taken and
// lease, which the transaction reads, are storage's.
func behind(c *cacheEntry, evs []eventRow) bool {
	if c.n == 0 {
		return false
	}
	return len(evs) == 0 || evs[0].seq != c.n || !sameEvent(evs[0].event(), c.last)
}

// sameEvent reports whether a and b are the same event of a log.
func sameEvent(a, b core.Event) bool {
	return a.Version == b.Version && a.Kind == b.Kind && a.At.Equal(b.At) && a.Message == b.Message &&
		a.Text == b.Text && a.Run == b.Run && a.Request == b.Request && a.Holder == b.Holder
}
