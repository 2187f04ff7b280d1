package testkit

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// ClosedAddr is a loopback address ("127.0.0.1:port") that refuses every
// TCP connection for the test's life: a socket bound to the port without
// listening, and without SO_REUSEADDR, so that no other listener of the
// machine (another test's, which Go binds with SO_REUSEADDR) can take
// the port meanwhile. A port merely given by a listener and closed again
// can be handed to a parallel test's listener before it is dialled (seen
// in CI: an interface meant to be silent answered the check).
func ClosedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("a socket to hold a closed port: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("binding a closed port: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("the closed port's address: %v", err)
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("the closed port's address is %T", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in.Port))
}
