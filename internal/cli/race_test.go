//go:build race

package cli

// raceEnabled: the race detector slows the walks of a whole state graph
// tenfold; the tests that drive them skip under it, and scripts/test runs
// them without it.
const raceEnabled = true
