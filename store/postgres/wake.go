package postgres

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// Wakeups adapts Listen to runner.Config.Wake: a channel that receives
// the id of a thread of this listener's share once work for it commits,
// by any process, while nobody holds the thread: a message posted to a
// thread that had no work and has no live lease (postSQL), or a thread
// released with work left. A post to a thread whose holder's lease is
// live wakes nobody: the holder plans its message, or its release wakes;
// nor does a post to a thread that has work already. It never blocks the
// listener: while the runner is busy, the ids wait in a set, each once,
// oldest first; past maxPendingWakes of them the set becomes one empty
// ThreadID (look at every thread). A reconnection of the listening
// connection (Listen's empty ThreadID, after which posts may have been
// missed) is an empty ThreadID too.
//
// The share: every Wakeups listener of the schema, in any process, is
// known to the others by its listening connection (whose application_name
// is "tc-wake " and the schema, visible in pg_stat_activity), which each
// reads again every shareEvery; every shareEveryUnsettled while its view
// has not settled (a listener came or went); and at once when another
// listener says, on the schema's control channel, that its own view
// changed. A thread belongs to one of them, by its
// wake-up shard (a hash of its id, wakeShards of them) over the listeners
// ordered by backend process id, so a post wakes one runner, not all: the
// others would claim the thread the woken one claims. The connection
// LISTENs only on its own shards' channels, so it does not even read the
// others' wake-ups. When a listener sees
// the listeners change, it says so on the control channel, and it also
// takes the threads that were its own before until it has read the same
// listeners twice more on its own schedule (a read that another's word
// made does not count): a listener that has not seen the change yet
// decides by the listeners before it, so the thread's listener by those,
// or by the new ones, wakes (two may). A
// listener whose context ends says on the control channel that it goes
// (when its Store's pool is still open), and the others leave it out of
// their views from then on; one whose process died takes its threads'
// wake-ups with it until the others see it gone. A listener that cannot read the others, or is
// not among them yet, wakes for every thread.
//
// Wake-ups are hints, never claims, and can come late or not at all: a
// listening connection cut off without the client noticing keeps silent
// until TCP gives up on it, and a thread whose holder died is not woken
// by a post until its lease has expired by the server's clock. Polling
// (runner.Config.PollEvery) stays the fallback and should stay on; with
// wake-ups it can be slow, since it only bounds how late work is found
// when a wake-up is lost.
//
// The channel is closed when ctx ends. Pass the context the runner's Run
// gets, or one that outlives it: a closed channel is always ready, and a
// runner still running would then look for work without pause.
//
// It returns Listen's error when the first connection or its LISTEN
// fails, or the Store is closed.
func (s *Store) Wakeups(ctx context.Context) (<-chan core.ThreadID, error) {
	ids, _, err := s.wakeups(ctx)
	return ids, err
}

// wakeups is Wakeups, with the listener's view of the share (for a test
// or a benchmark to wait on: settled).
func (s *Store) wakeups(ctx context.Context) (<-chan core.ThreadID, *share, error) {
	return s.wakeupsEvery(ctx, shareEvery)
}

// wakeupsEvery is wakeups whose listener, once its view has settled,
// reads the listeners every every (a test's hour: only another's word
// makes it read).
func (s *Store) wakeupsEvery(ctx context.Context, every time.Duration) (<-chan core.ThreadID, *share, error) {
	sh := &share{all: s.wakeAll, every: every, poke: make(chan struct{}, 1)}
	ids, err := s.listenAs(ctx, func() []string { return sh.channels(s) }, &sh.moves, s.wakeApp(), sh.connected, sh.told)
	if err != nil {
		return nil, nil, err
	}
	if !sh.all {
		go s.watchShare(ctx, sh)
	}
	return coalesce(ids, sh.mine), sh, nil
}

// shareEvery is how often a Wakeups listener whose view has settled reads
// the schema's listeners again, and shareEveryUnsettled how often one
// whose view has not: for a while after it saw them change (or began),
// the listener wakes for the threads of its share before the change as
// well, each such thread waking two, and its runner claims threads
// another was woken for. Read every 500ms, that while was 1 to 1.5s
// after the runners started, and a runner woken for every thread fell
// behind: of the first 1,500 messages posted at 2,000 a second, 289 to
// 485 waited over 20ms for their start, a few over 100ms
// (internal/bench/BENCH.md, "The wake-up share settles sooner").
const (
	shareEvery          = 500 * time.Millisecond
	shareEveryUnsettled = 100 * time.Millisecond
)

// wordGap is the least time between two reads of the listeners that
// other listeners' word made: when many come at once (a fleet starting),
// each says so, and each listener reads at most once a wordGap for all
// of them, not once for each. A listener that said so settles no sooner
// than two shareEveryUnsettled later, by when the others have read.
const wordGap = 50 * time.Millisecond

// wakeShards is how many channels the wake-ups go out on. A wake-up for a
// thread NOTIFYs the channel of the thread's shard (a hash of its id), and
// a Wakeups listener LISTENs only on its own shards' channels: it does not
// read, and throw away, the wake-ups of the threads of the others' share
// (three in four of them among four listeners: 1.6–17% of the benchmark
// process's CPU, BENCH.md). A multiple of 2, 4 and 8, and enough for
// sixty-four listeners each to have one.
const wakeShards = 64

// shardOf is the wake-up shard of the thread id.
func shardOf(id string) uint32 { return fnv32(id) % wakeShards }

// shardChannel is the NOTIFY channel of wake-up shard k.
func (s *Store) shardChannel(k uint32) string { return s.shards + strconv.FormatUint(uint64(k), 10) }

// wakeChannel is the NOTIFY channel of the thread's wake-ups.
func (s *Store) wakeChannel(id string) string { return s.shardChannel(shardOf(id)) }

// wakeApp is the application_name of the schema's Wakeups listeners, at
// most 63 bytes (PostgreSQL's NAMEDATALEN - 1).
func (s *Store) wakeApp() string { return "tc-wake " + s.schema }

// share is one Wakeups listener's view of the schema's listeners.
type share struct {
	all   bool          // every thread is this listener's (a benchmark's before)
	every time.Duration // how often to read the listeners once settled
	// poke makes watchShare read the listeners now: another listener
	// said on the control channel that its view changed.
	poke  chan struct{}
	mu    sync.Mutex
	pid   uint32   // the listening connection's backend
	peers []uint32 // the listeners' backends, in order; nil: unknown
	// prev is the listeners before they last changed, kept until the
	// same listeners are read twice more; nil: none kept.
	prev   []uint32
	stable int // reads since peers changed
	// gone is the listeners that said they go, left out of the listeners
	// read until a read no longer has them (or goneReads reads have):
	// their connections may outlast their word. The count is of the
	// reads that had them since.
	gone map[uint32]int
	// moves counts the changes of the shards this listener may own, so
	// that its connection LISTENs again (listenAs), and those it has.
	moves
}

func (sh *share) connected(pid uint32) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.pid, sh.peers, sh.prev = pid, nil, nil
	sh.changes.Add(1)
}

// saw records a read of the listeners (nil: the read failed); timed
// when the read was on the listener's own schedule, not made by another's
// word, which does not count towards settling: the listeners that said
// their view changed each made every other read, and a few of them
// could settle a view before a slower listener has read the change.
func (sh *share) saw(peers []uint32, timed bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	peers = sh.leaveOut(peers)
	if slices.Equal(peers, sh.peers) && (peers == nil) == (sh.peers == nil) {
		if !timed {
			return
		}
		if sh.stable++; sh.stable >= 2 && sh.prev != nil {
			sh.prev = nil
			sh.changes.Add(1)
		}
		return
	}
	if sh.peers != nil {
		sh.prev = sh.peers
	}
	sh.peers, sh.stable = peers, 0
	sh.changes.Add(1)
}

// goneReads is how many reads of the listeners may still have one that
// said it goes before it counts again: a connection that lingers that
// long is not closing.
const goneReads = 10

// leaveOut returns peers without the listeners that said they go, and
// forgets those peers no longer has. sh.mu is held.
func (sh *share) leaveOut(peers []uint32) []uint32 {
	if len(sh.gone) == 0 || peers == nil {
		return peers
	}
	out := make([]uint32, 0, len(peers))
	for _, pid := range peers {
		n, ok := sh.gone[pid]
		switch {
		case !ok:
			out = append(out, pid)
		case n+1 >= goneReads:
			delete(sh.gone, pid) // there after all
			out = append(out, pid)
		default:
			sh.gone[pid] = n + 1
		}
	}
	for pid := range sh.gone {
		if !slices.Contains(peers, pid) {
			delete(sh.gone, pid) // gone indeed
		}
	}
	return out
}

// next is how long until the listener reads the listeners again on its
// own schedule: shareEveryUnsettled while its view has not settled (it
// read them, and the same twice more, keeping none from before), else
// every. A failed read is retried at every.
func (sh *share) next() time.Duration {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.peers != nil && (sh.prev != nil || sh.stable < 2) {
		return min(shareEveryUnsettled, sh.every)
	}
	return sh.every
}

// told is what the listening connection does with a notification on the
// control channel: one from another listener (its payload is not this
// one's backend) makes watchShare read the listeners now. A payload of
// "-" and a backend's id says that listener goes: it is left out.
func (sh *share) told(payload string) {
	sh.mu.Lock()
	self := payload == sh.selfLocked()
	if id, ok := strings.CutPrefix(payload, "-"); ok {
		if pid, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(pid) != sh.pid {
			if sh.gone == nil {
				sh.gone = map[uint32]int{}
			}
			sh.gone[uint32(pid)] = 0
		}
	}
	sh.mu.Unlock()
	if self {
		return
	}
	select {
	case sh.poke <- struct{}{}:
	default: // a read is due already
	}
}

// self is the listening connection's backend id, as the control
// channel's words carry it.
func (sh *share) self() string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.selfLocked()
}

// selfLocked is self, with sh.mu held.
func (sh *share) selfLocked() string { return strconv.FormatUint(uint64(sh.pid), 10) }

// settled reports whether this listener's view has settled on n
// listeners, itself among them: it read them, then the same twice more,
// so it keeps no listeners from before (and a listener that sees every
// thread's wake-ups sees them from the start).
func (sh *share) settled(n int) bool {
	if sh.all {
		return true
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.peers) == n && slices.Contains(sh.peers, sh.pid) && sh.prev == nil && sh.stable >= 2
}

// listening reports whether this listener's view has settled on n
// listeners (settled) and its connection LISTENs on the shards that view
// gives it (its nudge was read): from then on, each thread's wake-ups
// come to one listener of the n, and this one hears only its own.
func (sh *share) listening(n int) bool {
	return sh.settled(n) && (sh.all || sh.followed.Load() == sh.changes.Load())
}

// mine reports whether a wake-up for the thread is this listener's: the
// empty ThreadID (any thread) always is, and every thread is while the
// listeners are unknown or this one is not among them.
func (sh *share) mine(id core.ThreadID) bool {
	if id == "" || sh.all {
		return true
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.owns(shardOf(string(id)))
}

// owns reports whether wake-up shard k is this listener's: by the
// listeners it read last, or by those before while it keeps them. sh.mu
// is held.
func (sh *share) owns(k uint32) bool {
	ours := func(peers []uint32) bool {
		rank := slices.Index(peers, sh.pid)
		return rank < 0 || len(peers) < 2 || int(k%uint32(len(peers))) == rank
	}
	return ours(sh.peers) || sh.prev != nil && ours(sh.prev)
}

// channels lists the channels this listener LISTENs on: its own shards'
// (every shard while it owns them all), the one channel of an earlier
// binary's wake-ups, and the channel it is nudged on (watchShare).
func (sh *share) channels(s *Store) []string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	out := []string{s.channel, s.control}
	for k := range uint32(wakeShards) {
		if sh.all || sh.owns(k) {
			out = append(out, s.shardChannel(k))
		}
	}
	return out
}

// watchShare reads the schema's listeners until ctx ends: on its own
// schedule (share.next), and at once when another listener says its view
// changed (share.told), but not twice within a wordGap. When its own view
// changes, it says so on the control channel, with its backend's id; when
// ctx ends, it says that it goes (sayGoing).
func (s *Store) watchShare(ctx context.Context, sh *share) {
	q := `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database() ORDER BY pid`
	var (
		nudged uint64
		last   time.Time // the last read
	)
	timed := true
	defer s.sayGoing(ctx, sh) // it returns only when ctx ends
	for {
		last = time.Now()
		var peers []uint32
		rows, err := s.pool.Query(ctx, q, s.wakeApp())
		if err == nil {
			for rows.Next() {
				var pid int32
				if err = rows.Scan(&pid); err != nil {
					break
				}
				peers = append(peers, uint32(pid))
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
		if err != nil {
			peers = nil // unknown: wake for every thread
		}
		sh.saw(peers, timed)
		if n := sh.changes.Load(); n != nudged {
			// The shards this listener owns may have changed: its
			// connection, waiting for a notification, LISTENs again at
			// the next it reads; this one is for that, and tells the
			// other listeners to read the listeners now.
			if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.control, sh.self()); err == nil {
				nudged = n
			}
		}
		t := time.NewTimer(sh.next())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			timed = true
		case <-sh.poke:
			t.Stop()
			timed = false
			if d := wordGap - time.Since(last); d > 0 {
				w := time.NewTimer(d)
				select {
				case <-ctx.Done():
					w.Stop()
					return
				case <-w.C:
				}
			}
		}
	}
}

// sayGoing tells the other listeners, on the control channel, that this
// one goes (its context ended), so that they take its threads at once
// rather than at their next read without it. It is a word, not a
// promise: once the Store is closed it says nothing, and the others see
// the listener gone when its connection is.
func (s *Store) sayGoing(ctx context.Context, sh *share) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.control, "-"+sh.self())
}

// fnv32 is the 32-bit FNV-1a hash of s.
func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// maxPendingWakes is how many threads' wake-ups a Wakeups listener keeps
// while its runner is busy, before it keeps one wake-up for every thread.
const maxPendingWakes = 1024

// coalesce passes on each id from ids that mine accepts, never blocking
// ids' sender: the ids not yet received wait in a set, each once, oldest
// first, and past maxPendingWakes of them in one empty ThreadID (any
// thread). It closes its channel once ids is closed.
func coalesce(ids <-chan core.ThreadID, mine func(core.ThreadID) bool) <-chan core.ThreadID {
	out := make(chan core.ThreadID)
	go func() {
		defer close(out)
		var queue []core.ThreadID
		queued := map[core.ThreadID]bool{}
		for {
			var send chan core.ThreadID
			var next core.ThreadID
			if len(queue) > 0 {
				send, next = out, queue[0]
			}
			select {
			case id, ok := <-ids:
				switch {
				case !ok:
					return
				case !mine(id) || queued[id] || queued[""]:
				case id == "" || len(queue) == maxPendingWakes:
					queue, queued = append(queue[:0], ""), map[core.ThreadID]bool{"": true}
				default:
					queue = append(queue, id)
					queued[id] = true
				}
			case send <- next:
				queue = queue[1:]
				delete(queued, next)
			}
		}
	}()
	return out
}
