package coretest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/threadclaim/threadclaim/core/coretest"
)

var start = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

// fired returns what ch holds now, without waiting.
func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case t := <-ch:
		return t, true
	default:
		return time.Time{}, false
	}
}

func TestClockAfterFiresWhenDue(t *testing.T) {
	c := coretest.NewClock(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	late, early := c.After(3*time.Second), c.After(time.Second)
	if n := c.Waiters(); n != 2 {
		t.Fatalf("Waiters = %d, want 2", n)
	}
	c.Advance(999 * time.Millisecond)
	if _, ok := fired(early); ok {
		t.Fatal("After(1s) fired 999ms in")
	}
	c.Advance(time.Millisecond)
	if got, ok := fired(early); !ok || !got.Equal(start.Add(time.Second)) {
		t.Fatalf("After(1s) at 1s: %v %v, want the clock's time", got, ok)
	}
	if _, ok := fired(late); ok {
		t.Fatal("After(3s) fired at 1s")
	}
	if n := c.Waiters(); n != 1 {
		t.Fatalf("Waiters = %d after one fired, want 1", n)
	}
	c.Advance(time.Hour) // past it: fires with the clock's time then
	if got, ok := fired(late); !ok || !got.Equal(start.Add(time.Hour+time.Second)) {
		t.Fatalf("After(3s) past its time: %v %v", got, ok)
	}
	if n := c.Waiters(); n != 0 {
		t.Fatalf("Waiters = %d, want 0", n)
	}
}

// A timer of no time, or a negative one, has fired on return.
func TestClockAfterNowOrBefore(t *testing.T) {
	c := coretest.NewClock(start)
	for _, d := range []time.Duration{0, -time.Second} {
		if got, ok := fired(c.After(d)); !ok || !got.Equal(start) {
			t.Errorf("After(%v): %v %v, want fired at once with the clock's time", d, got, ok)
		}
	}
	if n := c.Waiters(); n != 0 {
		t.Errorf("Waiters = %d, want 0", n)
	}
}

// Advance fires what came due, whatever the order After was called in; a
// clock moved back (a jump, as a process's clock may make) fires nothing.
func TestClockAdvanceFiresWhatCameDue(t *testing.T) {
	c := coretest.NewClock(start)
	third, first, second := c.After(3*time.Second), c.After(time.Second), c.After(2*time.Second)
	c.Advance(-time.Minute)
	if n := c.Waiters(); n != 3 {
		t.Fatalf("a clock moved back fired timers: %d left of 3", n)
	}
	if got := c.Now(); !got.Equal(start.Add(-time.Minute)) {
		t.Fatalf("Now = %v after Advance(-1m)", got)
	}
	c.Advance(time.Minute + 2*time.Second)
	for i, ch := range []<-chan time.Time{first, second} {
		if _, ok := fired(ch); !ok {
			t.Errorf("timer %d not fired", i+1)
		}
	}
	if _, ok := fired(third); ok {
		t.Error("After(3s) fired at 2s")
	}
}

// Concurrent use, under -race: the clock is shared by a test and the
// runners it drives.
func TestClockConcurrent(t *testing.T) {
	c := coretest.NewClock(start)
	var wg sync.WaitGroup
	chans := make(chan (<-chan time.Time), 400)
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				chans <- c.After(time.Millisecond)
				_ = c.Now()
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(time.Microsecond)
				_ = c.Waiters()
			}
		}()
	}
	wg.Wait()
	close(chans)
	c.Advance(time.Second)
	for ch := range chans {
		if _, ok := fired(ch); !ok {
			t.Fatal("a timer did not fire once the clock was past it")
		}
	}
}
