package push

import (
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzAllowHosts: any E2A_PUSH_ALLOW_HOSTS entry, and a host a webhook
// URL names. parseAllowHosts never panics; a refusal is ErrInvalidOption
// and escaped. An entry that a URL's authority reads as a host, with no
// port or one of 1..65535 in decimal and no "*", and a name without an
// empty label, is taken (the stricter reading never refuses what it
// names); a taken entry has no empty label and its port, if any, without
// leading zeros; a taken entry without "*" allows a webhook URL to the
// host it names (at its port, or any port without one), and one
// "*.domain" allows sub.domain but not the domain itself.
func FuzzAllowHosts(f *testing.F) {
	for _, s := range []string{"hooks.example.com", "Hooks.Example.COM.:8443", "*.example.com", "[::1]:8443", "::1",
		"10.0.0.1", "[::ffff:10.0.0.1]", "fe80::1%eth0", "a.com:0", "a.com:65536", "a.com:080", "*.", "*..", "**.x",
		"https://a.com", "a.com/x", "a, b c", "a.com:"} {
		f.Add(s, "sub")
	}
	f.Fuzz(func(t *testing.T, entry, sub string) {
		rules, err := parseAllowHosts([]string{entry})
		if err != nil {
			m := err.Error()
			if !errors.Is(err, ErrInvalidOption) || !utf8.ValidString(m) || strings.ContainsFunc(m, unicode.IsControl) {
				t.Fatalf("%q refused with %q", entry, m)
			}
			if ref, ok := authority(entry); ok {
				t.Fatalf("%q (the host %q of a URL) refused: %v", entry, ref.Host, err)
			}
			return
		}
		if strings.ContainsAny(entry, ", ") {
			return // several entries
		}
		if len(rules) > 1 {
			t.Fatalf("one entry %q read as %d rules", entry, len(rules))
		}
		if len(rules) == 0 {
			if strings.TrimSpace(entry) != "" {
				t.Fatalf("entry %q read as no rule", entry)
			}
			return
		}
		p := urlPolicy{allow: rules}
		r := rules[0]
		if r.port != "" && r.port != strings.TrimLeft(r.port, "0") {
			t.Fatalf("%q taken with the port %q", entry, r.port)
		}
		if emptyLabel(strings.TrimPrefix(r.host, "*.")) {
			t.Fatalf("%q taken with the host %q", entry, r.host)
		}
		if rest, ok := strings.CutPrefix(r.host, "*."); ok {
			port := r.port
			if port == "" {
				port = "443"
			}
			if label := strings.ToLower(sub); label != "" && !strings.ContainsAny(label, ".[]") && !p.allowed(label+"."+rest, port) {
				t.Fatalf("%q does not allow %s.%s:%s", entry, label, rest, port)
			}
			if p.allowed(rest, port) {
				t.Fatalf("%q allows %s itself", entry, rest)
			}
			return
		}
		u, ok := authority(entry)
		if !ok {
			return
		}
		host, port := hostPort(u)
		if !p.allowed(host, port) {
			t.Fatalf("%q (rule %+v) does not allow the URL %s naming it (host %q port %q)", entry, r, u, host, port)
		}
	})
}

// authority reads entry as a URL's authority does (https://entry/): a
// host without "*" (a name without an empty label: no host a URL reaches
// has one), a port absent (no ":" either) or of 1..65535 written in
// decimal.
func authority(entry string) (*url.URL, bool) {
	e := strings.TrimSpace(entry)
	if e == "" || strings.ContainsAny(e, "*/,?#@ ") {
		return nil, false
	}
	u, err := url.Parse("https://" + e + "/")
	if err != nil || u.Host != e || strings.HasSuffix(e, ":") || u.Hostname() == "" || strings.TrimSuffix(u.Hostname(), ".") == "" ||
		emptyLabel(strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")) {
		return nil, false
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || strings.Trim(p, "0123456789") != "" {
			return nil, false
		}
	}
	return u, true
}

// emptyLabel reports whether host, a name (not an IP address), has an
// empty label.
func emptyLabel(host string) bool {
	_, err := netip.ParseAddr(host)
	return err != nil && slices.Contains(strings.Split(host, "."), "")
}
