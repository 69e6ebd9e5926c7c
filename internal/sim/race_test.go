//go:build race

package sim

// raceEnabled: the race detector slows the single-goroutine explorations
// tenfold; the tests that only measure (coverage) skip under it.
const raceEnabled = true
