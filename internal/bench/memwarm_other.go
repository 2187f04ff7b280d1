//go:build !unix

package bench

import "errors"

func warmMemory(int) (*MemoryWarmup, error) {
	return nil, errors.New("bench: warm memory: not supported on this platform")
}
