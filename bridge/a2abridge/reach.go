package a2abridge

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// answering is usable without the interfaces whose address takes no TCP
// connection within timeout (refused, or silent), when another one's
// does, and the locations of those left out, for the log. An agent's card
// lists its interfaces in its order of preference, which a2a-go's client
// follows: the Python SDK's samples list gRPC first, on a port of its own
// that a deployment need not expose (a Kubernetes Service or a container
// publishing the HTTP port only), and every call failed unreachable
// while the JSON-RPC interface, on the port the card was read from,
// answered. A single interface is not checked; when none answers, usable
// is kept whole (the calls' errors then say why); an interface reached
// through a proxy (HTTP_PROXY, HTTPS_PROXY) or whose address cannot be
// read is kept unchecked.
func answering(ctx context.Context, usable []*a2a.AgentInterface, timeout time.Duration) ([]*a2a.AgentInterface, []string) {
	if len(usable) < 2 {
		return usable, nil // nothing to choose between
	}
	addrs := make([]string, len(usable))
	for i, iface := range usable {
		if ep, ok := endpointOf(iface); ok && !proxied(ep) {
			addrs[i] = net.JoinHostPort(ep.host, ep.port)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		silent = map[string]bool{}
	)
	for _, a := range addrs {
		if a == "" {
			continue
		}
		// An address listed again (gRPC and JSON-RPC on one port) is
		// dialled once; its result, which may be in already, stays.
		mu.Lock()
		_, seen := silent[a]
		if !seen {
			silent[a] = false
		}
		mu.Unlock()
		if seen {
			continue
		}
		wg.Go(func() {
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
			if err == nil {
				_ = conn.Close()
			}
			mu.Lock()
			silent[a] = err != nil
			mu.Unlock()
		})
	}
	wg.Wait()
	var kept []*a2a.AgentInterface
	var left []string
	for i, iface := range usable {
		if silent[addrs[i]] {
			left = append(left, where(iface)+" ("+string(iface.ProtocolBinding)+")")
			continue
		}
		kept = append(kept, iface)
	}
	if len(kept) == 0 {
		return usable, nil
	}
	return kept, left
}

// proxied reports whether calls to ep go through a proxy the
// environment names (a gRPC target as https, as grpc-go reads it).
func proxied(ep endpoint) bool {
	scheme := ep.scheme
	if scheme == "" {
		scheme = "https"
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(ep.host, ep.port)}
	p, err := http.ProxyFromEnvironment(&http.Request{URL: u})
	return err != nil || p != nil
}
