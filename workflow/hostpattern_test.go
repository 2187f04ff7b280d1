package workflow

import (
	"net/url"
	"strings"
	"testing"
)

// TestHostPatternRefused: a host pattern whose name has an empty label
// ("*..", whose domain is empty, "a..b") or whose port is no number of
// 1..65535 (nor "*") is refused when the policy is read: no URL an
// ApiCall may call matches it, so it allowed nothing while the policy
// was taken. "*.." was taken as "*." and "a.com:x" as the port "x".
func TestHostPatternRefused(t *testing.T) {
	for _, h := range []string{"*..", "*...", "*..x", "*.a..b", "a..b", ".a", "a.com..", "*..:443",
		"a.com:0", "a.com:65536", "a.com:x", "a.com:+80", "[::1]:0"} {
		if err := (&Policy{}).AllowHosts(h); err == nil || !strings.Contains(err.Error(), h) {
			t.Errorf("pattern %q: %v; want refused naming it", h, err)
		}
	}
	for _, h := range []string{"*", "a.com.", "*.a.com", "a.com:*", "a.com:443", "10.0.0.1", "[::1]:8443", "[::1]", "::1"} {
		if err := (&Policy{}).AllowHosts(h); err != nil {
			t.Errorf("pattern %q: %v", h, err)
		}
	}
}

// TestHostPatternPortLeadingZeros: a port written with leading zeros is
// the port its number names, in a host pattern ("127.0.0.1:0<port>") and
// in an ApiCall's URL, as the dialer reads it: such a pattern matched no
// URL, nor such a URL a pattern, ports being compared as written.
func TestHostPatternPortLeadingZeros(t *testing.T) {
	api := newTestAPI(t)
	pu, _ := url.Parse(api.URL)
	port := pu.Port()
	for _, tc := range []struct{ pattern, url string }{
		{"127.0.0.1:0" + port, api.URL + "/data"},
		{"127.0.0.1:" + port, "http://127.0.0.1:00" + port + "/data"},
	} {
		pol := &Policy{}
		if err := pol.AllowHosts(tc.pattern); err != nil {
			t.Fatal(err)
		}
		before := api.hit("GET /data")
		out, _ := execRaw(t, New(Options{Policy: pol, Clock: newFakeClock(), Cache: NoCache{}}), "agent-1", get(tc.url))
		if hits := api.hit("GET /data") - before; out.Error != nil || hits != 1 {
			t.Errorf("pattern %q, GET %s: %+v (hits %d); want answered", tc.pattern, tc.url, out.Error, hits)
		}
	}
}
