//go:build race

package tlc

// raceEnabled: the race detector slows the Go model tenfold; the state
// graph comparison runs in scripts/test's step without it.
const raceEnabled = true
