//go:build !race

package specmodel

const raceIn = false
