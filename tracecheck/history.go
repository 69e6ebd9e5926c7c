package tracecheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// A history file is what one OS process of a many-process run writes: one
// JSON object a line, {"call":NS,"return":NS,"line":TRACE-LINE}, where the
// times are the machine's wall clock in nanoseconds (one machine, so the
// processes' readings compare; the processes' skewed lease clocks are
// separate) and TRACE-LINE is a trace line. Each line is written whole,
// unbuffered, before the process goes on, so a process killed at any point
// loses at most the line of the write it was committing, whose commit the
// storage's own record of writes (postgres.Options.KeepTrace) keeps.

// HistoryWriter is a core.Tracer and core.TraceClock that writes a
// history file. It is safe for concurrent use.
type HistoryWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
}

var (
	_ core.Tracer     = (*HistoryWriter)(nil)
	_ core.TraceClock = (*HistoryWriter)(nil)
)

// NewHistoryWriter returns a HistoryWriter writing to w. A nil w (or the
// zero HistoryWriter) keeps an error for Err at the first line.
func NewHistoryWriter(w io.Writer) *HistoryWriter { return &HistoryWriter{w: w} }

// TraceNow reads the machine's wall clock, in nanoseconds.
func (h *HistoryWriter) TraceNow() int64 { return time.Now().UnixNano() }

type historyLine struct {
	Call   int64           `json:"call"`
	Return int64           `json:"return"`
	Line   json.RawMessage `json:"line"`
}

// Trace writes ev with its call and return times as one line.
func (h *HistoryWriter) Trace(ev core.TraceEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil && h.w == nil {
		h.err = errNoWriter
	}
	if h.err != nil {
		return
	}
	line := appendLine(nil, &ev)
	b, err := json.Marshal(historyLine{Call: ev.Call, Return: ev.Return, Line: line[:len(line)-1]})
	if err != nil {
		h.err = err
		return
	}
	h.buf = append(append(h.buf[:0], b...), '\n')
	if _, err := h.w.Write(h.buf); err != nil {
		h.err = fmt.Errorf("write history line: %w", err)
	}
}

// Err returns the first error writing a line, or nil.
func (h *HistoryWriter) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// ReadHistory reads a history file: trace lines with Call and Return set.
// A last line cut short (the process was killed while writing it) is
// dropped; any other malformed line is an error naming name and the line.
func ReadHistory(r io.Reader, name string) ([]core.TraceEvent, error) {
	if r == nil {
		return nil, &LineError{File: name, Line: 1, Err: errNoSource}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var out []core.TraceEvent
	var pending error
	n := 0
	for sc.Scan() {
		n++
		if pending != nil {
			return nil, pending
		}
		var h historyLine
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			pending = &LineError{File: name, Line: n, Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
			continue
		}
		ev, err := parseLine(h.Line)
		if err != nil {
			return nil, &LineError{File: name, Line: n, Err: err}
		}
		ev.Call, ev.Return = h.Call, h.Return
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// MergeHistories makes one trace of a many-process run: the writes as
// storage committed them (stored), and the reads and refusals from the
// processes' histories. A write takes its call and return times from the
// history line of the same write (thread, tick, action, process, holder
// and the write's message, request and run); a write no history has (its
// process was killed after the commit, or its commit's outcome was
// unknown to it) is pending: called at no known time (0), returned at no
// known time. Its call is not bounded by the process's other lines: a
// process works several threads and renews beside its turns, so a write
// in flight may have begun before every line the process recorded.
//
// lost are the writes a history records as committed (their process was
// told so) that stored does not hold: storage lost commits it had
// acknowledged (synchronous_commit = off and a crash, say). The trace is
// what storage kept: a lost write lends its times to no stored write,
// though the same thread and tick may since be another write's, and the
// reads and refusals of a lost write's claim (its holder) from the lost
// write's call on are left out, since they were decided from a state
// storage no longer has, and so are the reads of any claim that saw a
// state storage then lost (staleRead; and sawLostLease: a refusal naming
// a lease whose Claim storage kept nowhere, recorded or not), unless the claim's round went on
// and storage kept its next write (nextKeptWrite), which places the read
// at the state that write read — unless storage lost the claim's Claim
// itself: that round has no claim in what storage kept, its reads are
// left out, and a write of it that storage kept is checked (and
// rejected) as a write of a process without a claim; a Crash of such a claim's process
// follows its last line kept (see lostCrashes; MergedCrash tells those
// Crash lines, which no process traced, apart). A Crash also follows the
// writes of its claim that committed after it (crashAfterLateWrites).
//
// stored may hold reads too: the read a later write of its transaction
// went by (RunEndThenStart's Plan, before its RunStart), which storage
// keeps so that a process killed after the commit leaves it with the
// writes. Such a read takes its times from its process's line of it, if
// any, which then is not taken again.
//
// merged is not in trace order: Sort it before checking it. Each
// process's history is given once: a history given twice holds each of
// its writes twice, and the copy no stored write takes is reported lost
// (with what follows from a lost write). nil stored or histories are
// empty ones.
func MergeHistories(stored []core.TraceEvent, histories [][]core.TraceEvent) (merged, lost []core.TraceEvent) {
	type key struct {
		thread core.ThreadID
		tick   uint64
	}
	// The histories' writes, and their reads at a tick where storage kept
	// a read too.
	written, readAt := map[key][]core.TraceEvent{}, map[key][]core.TraceEvent{}
	for _, ev := range stored {
		if ev.Read {
			readAt[key{ev.Thread, ev.Tick}] = nil
		}
	}
	for _, h := range histories {
		for _, ev := range h {
			k := key{ev.Thread, ev.Tick}
			if !ev.Read {
				written[k] = append(written[k], ev)
			} else if r, ok := readAt[k]; ok {
				readAt[k] = append(r, ev)
			}
		}
	}
	writes := make([]core.TraceEvent, 0, len(stored))
	var storedReads []core.TraceEvent
	type readKey struct {
		thread core.ThreadID
		tick   uint64
		proc   string
		action core.Action
		call   int64
	}
	tookRead := map[readKey]bool{} // the histories' reads a stored read took the times of
	for _, ev := range stored {
		ev.Call, ev.Return = 0, math.MaxInt64
		if ev.Read {
			k := key{ev.Thread, ev.Tick}
			if i := slices.IndexFunc(readAt[k], func(r core.TraceEvent) bool { return sameWrite(r, ev) }); i >= 0 {
				r := readAt[k][i]
				ev.Call, ev.Return = r.Call, r.Return
				tookRead[readKey{r.Thread, r.Tick, r.Proc, r.Action, r.Call}] = true
				readAt[k] = slices.Delete(readAt[k], i, i+1)
			}
			storedReads = append(storedReads, ev)
			continue
		}
		k := key{ev.Thread, ev.Tick}
		match := -1 // of writes alike, the last called: any before it was lost
		for i, h := range written[k] {
			if sameWrite(h, ev) && (match < 0 || h.Call > written[k][match].Call) {
				match = i
			}
		}
		if match >= 0 {
			ev.Call, ev.Return = written[k][match].Call, written[k][match].Return
			written[k] = slices.Delete(written[k], match, match+1)
		}
		writes = append(writes, ev)
	}
	since := map[core.Holder]int64{}    // a lost write's holder: the earliest call of its lost writes
	lostClaim := map[core.Holder]bool{} // holders whose Claim storage lost
	for _, h := range histories {
		for _, ev := range h {
			if ev.Read || !slices.ContainsFunc(written[key{ev.Thread, ev.Tick}], func(w core.TraceEvent) bool {
				return sameWrite(w, ev) && w.Call == ev.Call && w.Return == ev.Return
			}) {
				continue
			}
			lost = append(lost, ev)
			if ev.Action == core.ActionClaim {
				lostClaim[ev.Holder] = true
			}
			if c, ok := since[ev.Holder]; ev.Holder != "" && (!ok || ev.Call < c) {
				since[ev.Holder] = ev.Call
			}
		}
	}
	byThread := lostByThread(lost, writes)
	kept := make(map[key]core.TraceEvent, len(writes))
	for _, w := range writes {
		kept[key{w.Thread, w.Tick}] = w
	}
	claims := keptClaims(writes)
	var out []core.TraceEvent
	for _, h := range histories {
		for _, ev := range h {
			if !ev.Read || tookRead[readKey{ev.Thread, ev.Tick, ev.Proc, ev.Action, ev.Call}] {
				continue
			}
			c, ok := since[ev.Holder]
			afterLost := ok && ev.Holder != "" && ev.Call >= c
			stale := staleRead(ev, byThread, kept[key{ev.Thread, ev.Tick}]) || sawLostLease(ev, claims[ev.Thread])
			if (afterLost || stale) && !lostClaim[ev.Holder] {
				if w, ok := nextKeptWrite(ev, writes); ok {
					// The round went on, and storage kept its next write:
					// the read is placed at the state that write read.
					ev.Tick, ev.Return = w.Tick-1, max(ev.Return, w.Return)
					out = append(out, ev)
					continue
				}
			}
			if afterLost {
				continue // decided from what storage lost
			}
			if stale {
				if _, ok := since[ev.Holder]; ev.Holder != "" && !ok {
					since[ev.Holder] = ev.Call // its round read what storage lost: a Crash ends it
				}
				continue
			}
			out = append(out, ev)
		}
	}
	crashAfterLateWrites(out, writes)
	out = append(out, writes...)
	out = append(out, storedReads...)
	return append(out, lostCrashes(out, since)...), lost
}

// nextKeptWrite returns the first write storage kept of the read's claim
// (its holder) on its thread that was called after the read returned:
// the claim's round went on past a read of a state storage then lost,
// and that write committed on what storage kept. The read is then
// explained at the state that write's transaction read (its tick less
// one), where the checker holds it to what storage kept: the same plan,
// or the same steering, there, or a rejection naming it.
func nextKeptWrite(r core.TraceEvent, writes []core.TraceEvent) (core.TraceEvent, bool) {
	var next core.TraceEvent
	found := false
	for _, w := range writes {
		if r.Holder == "" || w.Holder != r.Holder || w.Thread != r.Thread || w.Call < r.Return || w.Call == 0 {
			continue
		}
		if !found || w.Call < next.Call {
			next, found = w, true
		}
	}
	return next, found
}

// crashAfterLateWrites moves each Crash in reads after the last stored
// write of its claim (holder) on its thread, when that write's tick is
// later. A write whose commit the process could not learn (a Renew whose
// COMMIT a slow network held past the caller's deadline) may commit after
// the process gave its round up with a Crash: the process crashed after
// that write, as the spec has it, and the write was in flight when it
// did. Read at its own tick, the Crash would put the process idle before
// its own claim's write.
func crashAfterLateWrites(reads, writes []core.TraceEvent) {
	type key struct {
		thread core.ThreadID
		holder core.Holder
	}
	last := map[key]int{}
	for i, w := range writes {
		if w.Holder == "" {
			continue
		}
		k := key{w.Thread, w.Holder}
		if j, ok := last[k]; !ok || writes[j].Tick < w.Tick {
			last[k] = i
		}
	}
	for i := range reads {
		c := &reads[i]
		if c.Action != core.ActionCrash || c.Holder == "" {
			continue
		}
		if j, ok := last[key{c.Thread, c.Holder}]; ok && writes[j].Tick > c.Tick {
			c.Tick, c.Taken = writes[j].Tick, writes[j].Taken
		}
	}
}

// lostWrite is a lost write w and when storage had a state again at its
// tick or later: the call of the first write storage kept there whose call
// came after w's return.
type lostWrite struct {
	w     core.TraceEvent
	again int64
}

// lostByThread returns the lost writes of each thread, each with its
// again.
func lostByThread(lost, writes []core.TraceEvent) map[core.ThreadID][]lostWrite {
	out := map[core.ThreadID][]lostWrite{}
	for _, w := range lost {
		out[w.Thread] = append(out[w.Thread], lostWrite{w: w, again: math.MaxInt64})
	}
	for _, k := range writes {
		for i := range out[k.Thread] {
			l := &out[k.Thread][i]
			if k.Tick >= l.w.Tick && k.Call >= l.w.Return && k.Call < l.again {
				l.again = k.Call
			}
		}
	}
	return out
}

// staleRead reports whether the read ev saw a state that storage then
// lost: on the thread of a lost write w, at w's tick or later, returned
// after w's call, and called before storage had a state there again
// (lostWrite.again) — a read after the loss and before that saw a tick
// below w's —; or at a tick whose write storage kept (at, when it has
// one) was called after the read returned, so that the read saw another
// write there, one that storage lost and no history records (its process
// died with it in flight). A read at the tick of its own claim's kept
// write, called when or after that write was, saw that write: it is not
// stale.
func staleRead(ev core.TraceEvent, lost map[core.ThreadID][]lostWrite, at core.TraceEvent) bool {
	if at.Call != 0 && at.Call > ev.Return {
		return true
	}
	if at.Call != 0 && at.Holder != "" && at.Holder == ev.Holder && at.Call <= ev.Call {
		// The read saw its own claim's write there, which storage kept:
		// a Plan in its Claim's transaction, say, made while the process
		// whose Claim storage lost at the same tick had not yet been told
		// that its Claim committed (so that the lost write's return, and
		// with it lostWrite.again, come after this read). A write still in
		// flight when the read began (a Renew beside the turn) may also
		// have committed after the read saw a state storage then lost at
		// that tick: nothing in a Plan's or a Steer's line tells the two
		// apart, and the read is taken as one of that write (a soak's
		// Steer of the Renew's state, rejected when it was left out). A
		// refusal's line does: it names the lease it saw (sawLostLease).
		return false
	}
	for _, l := range lost[ev.Thread] {
		if ev.Tick >= l.w.Tick && ev.Return > l.w.Call && ev.Call < l.again {
			return true
		}
	}
	return false
}

// keptClaims returns, for each thread, the holders of the Claims storage
// kept.
func keptClaims(writes []core.TraceEvent) map[core.ThreadID]map[core.Holder]bool {
	out := map[core.ThreadID]map[core.Holder]bool{}
	for _, w := range writes {
		if w.Action != core.ActionClaim {
			continue
		}
		if out[w.Thread] == nil {
			out[w.Thread] = map[core.Holder]bool{}
		}
		out[w.Thread][w.Holder] = true
	}
	return out
}

// sawLostLease reports whether ev, a read that carries the lease it saw
// (a refusal of a fenced write), saw a lease whose Claim storage did not
// keep at all: a holder that no kept Claim of the thread names (the kept
// writes leave another at ev's tick, then). It read a state storage
// then lost (the lost Claim's process may have recorded it or not, and
// another write took its tick since). Without this, such a refusal was
// checked against what storage kept, where its own claim held the lease,
// and rejected (~HasLease(p); soaks with the rewind nemesis: a Renew of
// the refused claim, called before the refusal and slowed, committed at
// the lost Claim's tick once it was rewound). A refusal that names a
// holder storage did keep is checked as it is: a Store that refused from
// a stale state is rejected.
func sawLostLease(ev core.TraceEvent, claims map[core.Holder]bool) bool {
	info, ok := core.Info(ev.Action)
	return ok && ev.Read && info.Carries.Has(core.FieldLease) && ev.Lease != "" && !claims[ev.Lease]
}

// MergedCrash reports whether ev is a Crash line MergeHistories added
// after storage lost a claim's writes, rather than one a process traced:
// it returns at no known time.
func MergedCrash(ev core.TraceEvent) bool {
	return ev.Action == core.ActionCrash && ev.Return == math.MaxInt64
}

// lostCrashes returns a Crash for each claim that lost writes (since's
// holders) and whose last line kept leaves its round open. Storage that
// loses commits loses a suffix of them: what it kept is what it would
// hold had each process whose writes it lost crashed right after its
// last write kept, and the spec's Crash says so. Without it the process's
// next claim would find it still in its old round.
func lostCrashes(lines []core.TraceEvent, since map[core.Holder]int64) []core.TraceEvent {
	last := map[core.Holder]int{}
	for i, ev := range lines {
		if _, ok := since[ev.Holder]; !ok || ev.Holder == "" {
			continue
		}
		if j, ok := last[ev.Holder]; !ok || orderKey(&lines[j]) <= orderKey(&ev) {
			last[ev.Holder] = i
		}
	}
	var out []core.TraceEvent
	for h, i := range last {
		ev := lines[i]
		if info, _ := core.Info(ev.Action); info.EndsRound {
			continue // the round is over (Release, a refusal, Crash)
		}
		out = append(out, core.TraceEvent{Tick: ev.Tick, Read: true, Action: core.ActionCrash, Thread: ev.Thread,
			Proc: ev.Proc, Holder: h, Taken: ev.Taken, Call: since[h], Return: math.MaxInt64})
	}
	slices.SortFunc(out, func(a, b core.TraceEvent) int { return strings.Compare(string(a.Holder), string(b.Holder)) })
	return out
}

// sameWrite reports whether a history's write and a stored one are the
// same write.
func sameWrite(a, b core.TraceEvent) bool {
	return a.Thread == b.Thread && a.Tick == b.Tick && a.Action == b.Action && a.Proc == b.Proc &&
		a.Holder == b.Holder && a.Msg == b.Msg && a.Req == b.Req && a.Run == b.Run
}
