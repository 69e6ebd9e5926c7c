package bench

import (
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
