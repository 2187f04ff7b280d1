package redact

import "net/url"

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
