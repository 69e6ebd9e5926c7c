package postgres

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/threadclaim/threadclaim/core"
)

// TestCacheEntriesLetTheirPastGo: a thread's cache entry, one a committed
// transaction, shares its slices and some of its append rights with the
// entries before it, but keeps none of them alive. A turn changes the
// messages at its claim and the runs at its RunEnd, each entry taking
// the other slice's right from the entry before; when the rights were a
// field of the entry, each entry kept the one before it, a chain back to
// the thread's first with a copy of the runs at every RunEnd: O(runs²)
// bytes a thread, the heap of BenchmarkRunnerLoadedLatency growing from
// 13 to 51 MB in five seconds and the collector's mark taking up to 46 ms.
func TestCacheEntriesLetTheirPastGo(t *testing.T) {
	const turns = 50
	at := time.Unix(0, 0)
	th := &txThread{state: &core.Thread{ID: "t"}}
	var v uint64
	apply := func(th *txThread, ev core.Event) {
		v++
		ev.Version, ev.At = v, at
		th.apply(ev)
		th.n++
	}
	apply(th, core.Event{Kind: core.MessagePosted, Message: 1, Text: "m"})
	e := th.entry(core.Lease{}, true)
	var past []weak.Pointer[cacheEntry]
	for k := 1; k <= turns; k++ {
		// The claim: the turn reads a message posted since.
		past = append(past, weak.Make(e))
		th = &txThread{created: e.created, n: e.n, last: e.last, state: e.state, base: e, cow: e.cow}
		if k > 1 {
			apply(th, core.Event{Kind: core.MessagePosted, Message: core.Seq(k), Text: "m"})
		}
		e = th.entry(core.Lease{}, true)
		// The RunStart, then the RunEnd: a change below the runs' length.
		for _, ev := range []core.Event{
			{Kind: core.RunStarted, Run: core.RunID(k), Message: core.Seq(k), Holder: "h"},
			{Kind: core.RunEnded, Run: core.RunID(k)},
		} {
			past = append(past, weak.Make(e))
			th = &txThread{created: e.created, n: e.n, last: e.last, state: e.state, base: e, cow: e.cow}
			apply(th, ev)
			e = th.entry(core.Lease{}, true)
		}
	}
	if got := len(e.state.Runs()); got != turns {
		t.Fatalf("the last entry has %d runs, want %d", got, turns)
	}
	runtime.GC()
	kept := 0
	for _, p := range past {
		if p.Value() != nil {
			kept++
		}
	}
	// The last entry's rights may come from the two entries before it.
	if kept > 2 {
		t.Errorf("%d of %d earlier entries are still alive with only the last one held; want at most 2", kept, len(past))
	}
	runtime.KeepAlive(e)
}
