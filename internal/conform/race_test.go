//go:build race

package conform

// raceEnabled: the race detector slows the Go code tenfold; the full
// cfg's run is left to the ordinary test run.
const raceEnabled = true
