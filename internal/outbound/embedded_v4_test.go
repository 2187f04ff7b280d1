package outbound

import (
	"net/netip"
	"testing"
)

// TestSpecialEmbeddedIPv4: IPv6 forms that carry an IPv4 address (IPv4-
// compatible ::a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d, NAT64
// 64:ff9b::a.b.c.d) and the other IPv6 space outside global unicast
// (2000::/3: site-local fec0::/10, unassigned 4000::/2) are special: a
// host literal or a name resolving to one reached loopback or the
// metadata address. https://[::7f00:1]/, https://[::a9fe:a9fe]/ and
// https://[::ffff:0:a9fe:a9fe]/ were accepted as webhooks.
func TestSpecialEmbeddedIPv4(t *testing.T) {
	for _, s := range []string{
		"::7f00:1", "::127.0.0.1", "::a9fe:a9fe", "::169.254.169.254", "::a00:1", "::808:808",
		"::ffff:0:a9fe:a9fe", "::ffff:0:7f00:1", "::ffff:0:808:808", "64:ff9b::7f00:1", "64:ff9b::808:808",
		"fec0::1", "4000::1", "8000::1", "::2", "100::1", "1234::1",
	} {
		if !Special(netip.MustParseAddr(s)) {
			t.Errorf("%s is not special", s)
		}
	}
	for _, s := range []string{"2606:4700::1111", "2a00:1450::1", "2001:4860:4860::8888", "3fff:ffff::1", "::ffff:8.8.8.8"} {
		if Special(netip.MustParseAddr(s)) {
			t.Errorf("%s is special", s)
		}
	}
}
