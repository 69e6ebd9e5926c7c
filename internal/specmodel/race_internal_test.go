//go:build race

package specmodel

// raceIn: the model runs in one goroutine, so the race detector has
// nothing to find in it; the full cfgs are explored in the ordinary run.
const raceIn = true
