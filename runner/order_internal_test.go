package runner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/threadclaim/threadclaim/core"
)

// A free thread with work is taken within a bounded number of looks, under
// a steady stream of new threads with work: the look takes the longest
// waiting first (within its drawn window). Here each look takes one
// thread, the first of its order, and one new thread gets work, listed
// first in Pending's order (the worst case for an order by creation); 200
// threads wait at the start. Drawn over every waiting thread, as the look
// did before (lookWindow set to 1 << 30), some thread waited 1,560 looks
// in this run; the longest waiting first takes each within 362 (227 with
// a window of 4).
func TestLookTakesLongestWaitingFirst(t *testing.T) {
	const waiting, looks = 200, 4000
	s := &scheduler{rng: rand.New(rand.NewPCG(1, 2)), waiting: map[core.ThreadID]uint64{}}
	var pending []core.ThreadID // in Pending's order
	since := map[core.ThreadID]int{}
	for i := range waiting {
		id := core.ThreadID(fmt.Sprint("t", i))
		pending, since[id] = append(pending, id), 0
	}
	longest := 0
	for look := 1; look <= looks; look++ {
		free := slices.Clone(pending)
		s.order(free, true)
		taken := free[0]
		longest = max(longest, look-since[taken])
		pending = slices.DeleteFunc(pending, func(id core.ThreadID) bool { return id == taken })
		id := core.ThreadID(fmt.Sprint("n", look))
		pending, since[id] = append([]core.ThreadID{id}, pending...), look
	}
	if limit := 2 * waiting; longest > limit {
		t.Fatalf("a thread waited %d looks to be taken, over %d", longest, limit)
	}
	t.Logf("the longest wait: %d looks (%d threads waiting)", longest, waiting)
}

// The look's order forgets threads no longer free with work, and keeps
// every thread it was given, once each.
func TestLookOrderIsAPermutation(t *testing.T) {
	s := &scheduler{rng: rand.New(rand.NewPCG(3, 4)), waiting: map[core.ThreadID]uint64{}}
	s.order([]core.ThreadID{"a", "b", "c"}, true)
	free := []core.ThreadID{"d", "b", "e"}
	s.order(free, true)
	if len(s.waiting) != 3 || s.waiting["a"] != 0 {
		t.Fatalf("waiting after the second look: %v (a is no longer free with work)", s.waiting)
	}
	got := slices.Clone(free)
	slices.Sort(got)
	if !slices.Equal(got, []core.ThreadID{"b", "d", "e"}) {
		t.Fatalf("the order %v is not a permutation of d, b, e", free)
	}
	if free[0] != "b" && free[0] != "d" && free[0] != "e" {
		t.Fatalf("the order %v", free)
	}
}

// A look that is not fresh (with Wake: a poll, or the end of a turn that
// held the last free slot) takes only the free threads an earlier look
// found waiting, and still counts the new ones as waiting from this look:
// the next such look takes them.
func TestLookNotFreshTakesOnlyThoseWaiting(t *testing.T) {
	s := &scheduler{rng: rand.New(rand.NewPCG(5, 6)), waiting: map[core.ThreadID]uint64{}}
	if got := s.order([]core.ThreadID{"a", "b"}, false); len(got) != 0 {
		t.Fatalf("the first look, not fresh, took %v: no earlier look found them waiting", got)
	}
	got := s.order([]core.ThreadID{"c", "a", "b"}, false)
	slices.Sort(got)
	if !slices.Equal(got, []core.ThreadID{"a", "b"}) {
		t.Fatalf("the second look took %v, want a and b (found by the first) and not c (new)", got)
	}
	got = s.order([]core.ThreadID{"c", "d"}, false)
	if !slices.Equal(got, []core.ThreadID{"c"}) {
		t.Fatalf("the third look took %v, want c alone (found by the second)", got)
	}
	got = s.order([]core.ThreadID{"e", "d"}, true)
	slices.Sort(got)
	if !slices.Equal(got, []core.ThreadID{"d", "e"}) {
		t.Fatalf("a fresh look took %v, want every free thread with work", got)
	}
}

// TestStartWithinRotates: startWithin leaves list as list[k:] then
// list[:k], for a k below the window, in place.
func TestStartWithinRotates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 40 {
		for _, window := range []int{1, 4, 16, 64} {
			in := make([]int, n)
			for i := range in {
				in[i] = i
			}
			out := slices.Clone(in)
			startWithin(rng, out, window)
			k := 0
			if n > 0 {
				k = out[0]
			}
			if k >= max(min(n, window), 1) {
				t.Fatalf("n %d, window %d: starts at %d, outside the window", n, window, k)
			}
			if want := append(slices.Clone(in[k:]), in[:k]...); !slices.Equal(out, want) {
				t.Fatalf("n %d, window %d: %v, want %v", n, window, out, want)
			}
		}
	}
}
