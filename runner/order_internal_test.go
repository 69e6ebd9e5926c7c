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
		s.order(free)
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
	s.order([]core.ThreadID{"a", "b", "c"})
	free := []core.ThreadID{"d", "b", "e"}
	s.order(free)
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
