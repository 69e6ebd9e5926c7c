//go:build !race

package specmodel_test

const raceEnabled = false
