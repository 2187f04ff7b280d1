package push_test

import (
	"errors"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/push"
)

// forbidden reports whether a webhook must never reach ip: loopback,
// private, link-local, unspecified, multicast or the shared address space
// (100.64.0.0/10), IPv4-mapped forms included. It is written apart from
// the workflow executor's list on purpose, as the fuzz target's oracle.
func forbidden(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(ip)
}

// FuzzWebhookURL: a push config is created only for a URL a client could
// not turn against the pipeline's network: https (http only to an
// allow-listed host), no user information, and a host that resolves (with
// the test's table) to no forbidden address, unless allow-listed; any
// other URL is refused with ErrURLRefused. Never a panic.
func FuzzWebhookURL(f *testing.F) {
	s, res := urlRulesStore(f)
	for _, u := range []string{"https://public.test/hook", "http://dev.local:9999/hook", "http://127.0.0.2:8080/x",
		"https://127.0.0.1/hook", "https://[::ffff:127.0.0.1]/hook", "https://user:pw@public.test/hook", "https://mixed.corp.test/",
		"https://meta.test/latest/meta-data/", "https://mapped.test/", "https://PUBLIC.test./h?q=1#f", "https://0x7f.1/", "https://[fe80::1%25eth0]/"} {
		f.Add(u)
	}
	n := 0
	f.Fuzz(func(t *testing.T, raw string) {
		n++ // a principal a case: the limits on configs never refuse one
		_, err := s.Create(tctx(t), "p"+strconv.Itoa(n), push.Config{TaskID: "t", URL: raw})
		if err != nil {
			if !errors.Is(err, push.ErrURLRefused) && !errors.Is(err, push.ErrInvalidConfig) {
				t.Fatalf("%q: %v, want ErrURLRefused or ErrInvalidConfig", raw, err)
			}
			return
		}
		u, perr := url.Parse(raw)
		if perr != nil || u.User != nil {
			t.Fatalf("%q accepted: parse %v, user %v", raw, perr, u.User)
		}
		host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		port := u.Port()
		listed := host == "dev.local" || host == "127.0.0.2" && port == "8080"
		if u.Scheme != "https" && !(u.Scheme == "http" && listed) {
			t.Fatalf("%q accepted: scheme %q to %s", raw, u.Scheme, host)
		}
		if listed {
			return
		}
		ips := res.m[host]
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []string{ip.String()}
		}
		if len(ips) == 0 {
			t.Fatalf("%q accepted: host %q does not resolve", raw, host)
		}
		for _, s := range ips {
			if forbidden(netip.MustParseAddr(s)) {
				t.Fatalf("%q accepted: %s resolves to %s", raw, host, s)
			}
		}
	})
}
