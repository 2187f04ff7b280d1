package redact

import (
	"net/url"
	"strings"
)

// URL is raw's scheme and host, "/…" standing for a path or query: a
// webhook's path may be its secret (Slack's and Discord's hooks are), as
// its query and user information may be. "(invalid url)" when raw does
// not parse.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid url)"
	}
	out := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		out += "/…"
	}
	return out
}

// urls redacts the credentials of the URLs ("scheme://…") in s, any
// string the walk reaches outside a secret or a reference: the value of a query or fragment parameter whose
// name is a secret key, or key or sig (?token=, ?api_key=, ?key= for
// Google's API keys, ?sig= for Azure's shared access signatures,
// #access_token=), and the user information's password, or the user
// alone when there is no password (https://<token>@github.com/…). A URL
// runs to white space, a quote or '<' '>'; its authority to the first
// '/', '?' or '#'. It returns s and how many values it replaced.
func (w *walker) urls(s string) (string, int) {
	if !strings.Contains(s, "://") {
		return s, 0
	}
	s, n := w.urlParams(s)
	s, c := w.userinfo(s)
	return s, n + c
}

// urlParams redacts the secret parameters of the URLs in s. Every '?',
// '&' and '#' after a URL's authority starts a parameter, so that those
// of a URL inside another's query are found too
// (?next=https://h/?token=X).
func (w *walker) urlParams(s string) (string, int) {
	var e paramEdit
	for off := 0; ; {
		i := strings.Index(s[off:], "://")
		if i < 0 {
			break
		}
		i += off
		if urlStart(s, i) < 0 {
			off = i + 3
			continue
		}
		end := urlEnd(s, i+3)
		off = end
		for p := i + 3 + authorityLen(s[i+3:]); p < end; {
			q := p + 1
			for q < end && s[q] != '?' && s[q] != '&' && s[q] != '#' {
				q++
			}
			if s[p] != '?' && s[p] != '&' && s[p] != '#' {
				p = q // the path
				continue
			}
			w.param(&e, s, p, q, w.secretParam)
			p = q
		}
	}
	return e.result(s)
}

// secretParam reports whether a URL parameter named name (as written,
// percent-encoded) holds a secret.
func (w *walker) secretParam(name string) bool {
	if u, err := url.QueryUnescape(name); err == nil {
		name = u
	}
	return w.isSecret(name) || strings.EqualFold(name, "key") || strings.EqualFold(name, "sig")
}

// userinfo redacts the user information of the URLs in s: its password,
// or the user when it has none.
func (w *walker) userinfo(s string) (string, int) {
	var b strings.Builder
	last, n := 0, 0
	for off := 0; ; {
		i := strings.Index(s[off:], "://")
		if i < 0 {
			break
		}
		i += off
		off = i + 3
		if urlStart(s, i) < 0 {
			continue
		}
		auth := s[i+3 : i+3+authorityLen(s[i+3:])]
		at := strings.LastIndexByte(auth, '@')
		start, key := i+3, "userinfo"
		if c := strings.IndexByte(auth[:max(at, 0)], ':'); c >= 0 {
			start, key = i+3+c+1, "password"
		}
		if at < 0 || start >= i+3+at {
			continue // no user information, or an empty password
		}
		if r, ok := w.replace(key, s[start:i+3+at]); ok {
			b.WriteString(s[last:start])
			b.WriteString(r.(string))
			last = i + 3 + at
			n++
		}
	}
	if n == 0 {
		return s, 0
	}
	b.WriteString(s[last:])
	return b.String(), n
}

// urlStart returns where the scheme before the "://" at i starts, or -1
// when there is none (a letter, then letters, digits, '+', '-' or '.').
func urlStart(s string, i int) int {
	j := i
	for j > 0 && (isAlnumASCII(s[j-1]) || s[j-1] == '+' || s[j-1] == '-' || s[j-1] == '.') {
		j--
	}
	for j < i && !(s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// urlEnd returns where a URL whose text continues at from ends: at white
// space, a quote, '<' or '>', or the end of s.
func urlEnd(s string, from int) int {
	if k := strings.IndexAny(s[from:], " \t\n\r\f\v\"'`<>"); k >= 0 {
		return from + k
	}
	return len(s)
}

// authorityLen returns the length of the authority at the start of rest
// (what follows "://"): up to the first '/', '?' or '#', or where the URL
// ends. (Each scan stops before the next "://", so a string of many costs
// one pass.)
func authorityLen(rest string) int {
	if k := strings.IndexAny(rest, "/?# \t\n\r\f\v\"'`<>"); k >= 0 {
		return k
	}
	return len(rest)
}
