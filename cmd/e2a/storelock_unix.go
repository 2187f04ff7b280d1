//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// storeLockName is the file in E2A_STORE_DIR that an embedding process
// holds locked while its server uses the store.
const storeLockName = ".e2a.lock"

// lockStoreDir locks dir for this process's embedded server and returns
// the unlock: two servers writing one JetStream store would each take the
// other's files for their own (nats-server does not refuse it). A lock
// held by another process is refused at once, naming the variable; the
// lock goes with the process, however it ends.
func lockStoreDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, storeLockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("E2A_STORE_DIR=%s cannot be locked: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("E2A_STORE_DIR=%s is in use by another process (another e2a dev?): two embedded NATS servers "+
				"must not share a store; stop the other, or set E2A_STORE_DIR to another directory", dir)
		}
		return nil, fmt.Errorf("E2A_STORE_DIR=%s cannot be locked: %w", dir, err)
	}
	return func() { _ = f.Close() }, nil
}
