//go:build !race

package bridge

const raceEnabled = false
