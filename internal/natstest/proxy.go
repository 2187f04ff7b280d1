package natstest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server (a NATS server's client
// port): Cut closes them and refuses new ones until Heal, as a network
// blip or a server restart does to a client's connection.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

// NewProxy listens on a loopback port and forwards to target (host:port)
// until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close(); p.Cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
	return p
}

func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		_ = c.Close()
		return
	}
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.conns = append(p.conns, c, u)
	go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
	go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
}

// URL is the proxy's NATS URL.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Cut closes every connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// Heal accepts connections again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
