//go:build race

package agent

// raceEnabled: the race detector changes allocation counts (crypto/rand
// copies through the heap, sync.Pool drops what it holds at random).
const raceEnabled = true
