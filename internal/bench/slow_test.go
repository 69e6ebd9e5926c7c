package bench

import (
	"slices"
	"testing"
	"time"
)

func TestSlowThreads(t *testing.T) {
	// 1,000 messages from message 50 on: the slowest 1% are the ten
	// with the longest waits, whichever their place.
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = time.Millisecond
	}
	for _, i := range []int{3, 103, 203, 303, 403, 503, 603, 703, 803, 903} {
		lat[i] = time.Second // all on thread (50+3) % 100
	}
	if got := slowThreads(lat, 50); got != 1 {
		t.Errorf("ten slowest on one thread: slowThreads = %d, want 1", got)
	}
	for k, i := range []int{3, 104, 205, 306, 407, 508, 609, 710, 811, 912} {
		lat[i] = time.Second + time.Duration(k)
	}
	lat[3], lat[103] = time.Millisecond, time.Millisecond
	lat[0] = 2 * time.Second
	if got := slowThreads(lat, 50); got != 10 {
		t.Errorf("ten slowest on ten threads: slowThreads = %d, want 10", got)
	}
	if got := slowThreads(lat[:5], 0); got != 1 {
		t.Errorf("five messages: slowThreads = %d, want 1 (the slowest alone)", got)
	}
	if got := slowThreads(nil, 0); got != 0 {
		t.Errorf("no messages: slowThreads = %d, want 0", got)
	}
}

// The slowest 1% posted within a tenth of a second make a short span at
// that time; spread over the run, a span near its length.
func TestTailWhen(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	posted := make([]time.Time, 1000)
	lat := make([]time.Duration, 1000)
	for i := range posted {
		posted[i] = t0.Add(time.Duration(i) * 10 * time.Millisecond) // 10 s
		lat[i] = time.Millisecond
	}
	for i := 500; i < 510; i++ { // a stall at 5 s
		lat[i] = 50 * time.Millisecond
	}
	at, span := tailWhen(lat, posted)
	if at < 5*time.Second || at > 5100*time.Millisecond || span > 100*time.Millisecond {
		t.Errorf("a stall at 5 s: at %v, span %v; want 5-5.1 s and at most 100 ms", at, span)
	}
	for i := 500; i < 510; i++ {
		lat[i] = time.Millisecond
	}
	for i := 0; i < 1000; i += 100 { // one slow message a second
		lat[i] = 50 * time.Millisecond
	}
	if _, span := tailWhen(lat, posted); span < 8*time.Second {
		t.Errorf("a tail spread over 10 s: span %v, want at least 8 s", span)
	}
}

// Started out of their order, the messages' p99 in post order is what the
// same start instants give the k-th post: here 3, 3 and 8 ms where the
// workers gave 10, 2 and 2.
func TestInPostOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	posted := []time.Time{ms(0), ms(1), ms(2)}
	started := []time.Time{ms(10), ms(3), ms(4)}
	got := inPostOrder(posted, started)
	want := []time.Duration{3 * time.Millisecond, 3 * time.Millisecond, 8 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("inPostOrder = %v, want %v", got, want)
	}
	if posted[0] != ms(0) || started[0] != ms(10) {
		t.Errorf("inPostOrder sorted its arguments in place: %v, %v", posted, started)
	}
	// A post's return read after its message's start counts 0.
	if got := inPostOrder([]time.Time{ms(5)}, []time.Time{ms(4)}); got[0] != 0 {
		t.Errorf("a start read before its post's return: %v, want 0", got[0])
	}
}
