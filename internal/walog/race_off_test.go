//go:build !race

package walog

const raceEnabled = false
