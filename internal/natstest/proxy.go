package natstest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server (a NATS server's client
// port): Cut closes them and refuses new ones until Heal, as a network
// blip or a server restart does to a client's connection; Hold keeps what
// clients send from the server until Cut, as a server that stopped
// answering.
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
	gate   chan struct{} // while held: closed by Cut
	held   int           // client writes waiting at the gate
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
	go func() { p.copyHeld(u, c); _ = u.Close() }()
	go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
}

// copyHeld copies what client c sends to the server u, each read waiting
// while the proxy holds.
func (p *Proxy) copyHeld(u, c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			if gate != nil {
				p.held++
			}
			p.mu.Unlock()
			if gate != nil {
				<-gate
			}
			if _, werr := u.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Hold keeps what clients send from here on from the server (their
// connections stay open) until Cut.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate == nil {
		p.gate, p.held = make(chan struct{}), 0
	}
}

// Held is how many client writes wait since Hold.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// URL is the proxy's NATS URL.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Cut closes every connection (what Hold kept is lost with them) and
// refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	if p.gate != nil {
		// Opened only once every connection is closed: a held write let
		// through before would reach the server, whose answer could reach
		// the client ahead of the close.
		close(p.gate)
		p.gate = nil
	}
}

// Heal accepts connections again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
