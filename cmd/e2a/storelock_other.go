//go:build !unix

package main

// lockStoreDir does not lock where flock(2) is missing.
func lockStoreDir(string) (func(), error) { return func() {}, nil }
