//go:build !race

package e2a

const raceEnabled = false
