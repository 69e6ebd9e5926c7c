package shrink

import (
	"context"
	"slices"
)

// minimizer is delta debugging over a list of items named by their
// indices: it removes items while fails, the test of a candidate (the
// items kept, ascending), still says the failure remains. The trace and
// history shrinkers use it; what an item is, and what "the same failure"
// means, is theirs.
type minimizer struct {
	ctx   context.Context
	fails func(keep []int) (bool, error)
	tries int
	err   error // the first test that could not run, or ctx's end
}

// accept replaces *cur with cand when cand is shorter and still fails.
func (m *minimizer) accept(cur *[]int, cand []int) bool {
	if m.err != nil || len(cand) >= len(*cur) {
		return false
	}
	if err := m.ctx.Err(); err != nil {
		m.err = err
		return false
	}
	m.tries++
	ok, err := m.fails(cand)
	if err != nil {
		m.err = err
		return false
	}
	if ok {
		*cur = cand
	}
	return ok
}

// without returns cur less the items in drop.
func without(cur []int, drop []int) []int {
	gone := map[int]bool{}
	for _, i := range drop {
		gone[i] = true
	}
	out := make([]int, 0, len(cur))
	for _, i := range cur {
		if !gone[i] {
			out = append(out, i)
		}
	}
	return out
}

// groups removes each group of items (a process's, a client's, a turn's)
// whole, while the failure remains.
func (m *minimizer) groups(cur *[]int, groups [][]int) bool {
	changed := false
	for _, g := range groups {
		changed = m.accept(cur, without(*cur, g)) || changed
	}
	return changed
}

// groupPairs removes two groups at once, for groups that only go
// together (a turn and the message it consumed, two processes' rounds),
// when there are at most limit groups.
func (m *minimizer) groupPairs(cur *[]int, groups [][]int, limit int) bool {
	if len(groups) > limit {
		return false
	}
	changed := false
	for i := range groups {
		for j := i + 1; j < len(groups) && m.err == nil; j++ {
			changed = m.accept(cur, without(*cur, slices.Concat(groups[i], groups[j]))) || changed
		}
	}
	return changed
}

// windows removes runs of consecutive groups at once, the longest first,
// when there are at most limit groups: links of a chain that only go
// together (each turn answering the question the turn before asked, so
// that any one of them dropped alone breaks the next), which ddmin's
// chunks, cut anywhere, rarely match.
func (m *minimizer) windows(cur *[]int, groups [][]int, limit int) bool {
	if len(groups) > limit {
		return false
	}
	changed := false
	for w := len(groups); w >= 2 && m.err == nil; w-- {
		for i := 0; i+w <= len(groups) && m.err == nil; i++ {
			changed = m.accept(cur, without(*cur, slices.Concat(groups[i:i+w]...))) || changed
		}
	}
	return changed
}

// ddmin is delta debugging's minimising loop: remove one of n chunks
// while the failure remains; refine down to single items. What is left
// is 1-minimal: no single item can go.
func (m *minimizer) ddmin(cur *[]int) bool {
	return ddmin(func() []int { return *cur }, func(cand []int) bool { return m.accept(cur, cand) }, func() bool { return m.err == nil })
}

// ddmin is delta debugging's minimising loop over the items items
// returns: try each candidate without one of n chunks, which accept keeps
// (so that items returns it next) when the failure remains; refine down to
// single items while goOn holds. It reports whether anything went.
func ddmin[T any](items func() []T, accept func(cand []T) bool, goOn func() bool) bool {
	changed := false
	n := 2
	for len(items()) >= 1 && goOn() {
		cur := items()
		size := (len(cur) + n - 1) / n
		removed := false
		for start := 0; start < len(cur); start += size {
			cand := slices.Concat(cur[:start], cur[min(start+size, len(cur)):])
			if accept(cand) {
				removed, changed = true, true
				n = max(n-1, 2)
				break
			}
		}
		if removed {
			continue
		}
		if size == 1 {
			break
		}
		n = min(2*n, len(cur))
	}
	return changed
}

// pairs removes two items at once where neither can go alone (a plan
// and the write that carries it out), when at most limit are left.
func (m *minimizer) pairs(cur *[]int, limit int) bool {
	changed := false
	for i := 0; i < len(*cur) && len(*cur) <= limit && m.err == nil; i++ {
		for j := i + 1; j < len(*cur) && m.err == nil; j++ {
			items := *cur
			if m.accept(cur, slices.Concat(items[:i], items[i+1:j], items[j+1:])) {
				changed = true
				j = i // start again from the next pair at i
			}
		}
	}
	return changed
}

// maxExactItems bounds the stories fewestStates searches (their subsets
// grow as 2^n), and maxExactTries the candidates it checks: past it, the
// best story found so far stands.
const (
	maxExactItems = 24
	maxExactTries = 1 << 18
)

// fewestStates searches the subsets of cur (a 1-minimal story, at most
// maxExactItems long) that keep its last item, the rejected line, smallest
// first, for the one whose states (what cost returns of a subset that
// still fails; false where it does not) are fewest, and returns it, or cur
// when none is fewer. It stops at the first size that cannot beat the
// best found (a subset of k items costs at least k+1 states) or after
// maxExactTries candidates, counted in *tries.
func fewestStates(ctx context.Context, cur []int, cost func(keep []int) (int, bool), tries *int) ([]int, error) {
	n := len(cur)
	if n <= 1 || n > maxExactItems {
		return cur, nil
	}
	best, ok := cost(cur)
	*tries++
	if !ok {
		return cur, nil
	}
	bestKeep := cur
	budget := maxExactTries
	pick := make([]int, 0, n) // positions in cur[:n-1] of the subset
	keep := make([]int, 0, n)
	for k := 1; k < n && k+1 < best && budget > 0; k++ {
		// Every choice of k-1 of the first n-1 items, in lexicographic
		// order, with the last item after them.
		pick = pick[:0]
		for i := range k - 1 {
			pick = append(pick, i)
		}
		for budget > 0 {
			if budget%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			keep = keep[:0]
			for _, i := range pick {
				keep = append(keep, cur[i])
			}
			keep = append(keep, cur[n-1])
			budget--
			*tries++
			if c, ok := cost(keep); ok && c < best {
				best, bestKeep = c, slices.Clone(keep)
			}
			// The next choice: move the last position that can move on
			// by one, and the ones after it right behind it.
			j := len(pick) - 1
			for j >= 0 && pick[j] == n-1-len(pick)+j {
				j--
			}
			if j < 0 {
				break
			}
			pick[j]++
			for i := j + 1; i < len(pick); i++ {
				pick[i] = pick[i-1] + 1
			}
		}
	}
	return bestKeep, nil
}
