//go:build race

package specmodel_test

// raceEnabled: the race detector slows the cross-check tenfold; it runs on
// a smaller cfg then.
const raceEnabled = true
