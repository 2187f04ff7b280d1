//go:build unix

package bench

import (
	"fmt"
	"os"
	"syscall"
)

func warmMemory(mib int) (*MemoryWarmup, error) {
	b, err := syscall.Mmap(-1, 0, mib<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("bench: warm memory: map %d MiB: %w", mib, err)
	}
	m := &MemoryWarmup{MiB: mib}
	touchPages(b, os.Getpagesize(), m)
	if err := syscall.Munmap(b); err != nil {
		return nil, fmt.Errorf("bench: warm memory: unmap: %w", err)
	}
	return m, nil
}
