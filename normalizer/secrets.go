package normalizer

import (
	"net/url"
	"sort"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// Redacted replaces a secret value when no SecretRef hook gives a reference
// and the key must stay (free-form objects).
const Redacted = "[redacted]"

// secretKeys are the keys (lower case, '-' read as '_') whose scalar values
// are secrets wherever they appear in a free-form object of an envelope.
var secretKeys = []string{
	"authorization", "proxy_authorization", "x_api_key", "api_key", "apikey",
	"bearer_token", "access_token", "refresh_token", "id_token", "client_secret",
	"private_key", "password", "cookie", "set_cookie",
}

// IsSecretKey reports whether a key of a free-form object holds a secret
// (Authorization, X-Api-Key, api_key, bearer_token, access_token, password,
// cookie …; case-insensitive, '-' and '_' alike). Scalar values under such
// keys never leave the normalizer; objects under them (e.g. an A2E
// {"credentialRef": {...}}) are references and are kept, searched further.
func IsSecretKey(k string) bool {
	if len(k) < 6 || len(k) > 19 {
		return false
	}
	for _, s := range secretKeys {
		if len(s) == len(k) && foldKeyEqual(k, s) {
			return true
		}
	}
	return false
}

// foldKeyEqual compares k with the lower-case key s, ASCII case-folded and
// with '-' equal to '_', without allocating.
func foldKeyEqual(k, s string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		} else if c == '-' {
			c = '_'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// stripSecrets removes every secret from env (spec §13, DESIGN guarantee 5)
// and returns how many values it removed or replaced by a reference:
//
//   - auth.bearer_token is removed; with a SecretRef hook its reference
//     lands in auth.credential_ref (when that is empty);
//   - every auth.extra_headers value is replaced by its reference, or the
//     entry is dropped and its name listed in auth._meta.stripped_headers;
//   - scalar values under secret keys ([IsSecretKey]) in params,
//     channel_context, a2a_metadata, acp_meta, auth._meta and
//     provenance.details are replaced by a reference or [Redacted].
func stripSecrets(env *e2a.Envelope, ref SecretRefFunc) int {
	n := 0
	if a := env.Auth; a != nil {
		if a.BearerToken != "" {
			n++
			if ref != nil {
				if r := ref("bearer_token", a.BearerToken); r != "" && a.CredentialRef == "" {
					a.CredentialRef = r
				}
			}
			a.BearerToken = ""
		}
		if len(a.ExtraHeaders) > 0 {
			var dropped []string
			kept := map[string]string{}
			for k, v := range a.ExtraHeaders {
				r := ""
				if ref != nil {
					r = ref("extra_header:"+k, v)
				}
				if r != v {
					n++
				}
				if r != "" {
					kept[k] = r
				} else {
					dropped = append(dropped, k)
				}
			}
			a.ExtraHeaders = nil
			if len(kept) > 0 {
				a.ExtraHeaders = kept
			}
			if len(dropped) > 0 {
				sort.Strings(dropped)
				if a.Meta == nil {
					a.Meta = map[string]any{}
				}
				names := make([]any, len(dropped))
				for i, d := range dropped {
					names[i] = d
				}
				a.Meta["stripped_headers"] = names
			}
		}
		n += scrubMap(a.Meta, ref, 0)
	}
	n += scrubMap(env.Params, ref, 0)
	n += scrubMap(env.ChannelContext, ref, 0)
	n += scrubMap(env.A2AMetadata, ref, 0)
	n += scrubMap(env.ACPMeta, ref, 0)
	if env.Provenance != nil {
		n += scrubMap(env.Provenance.Details, ref, 0)
	}
	return n
}

// scrubMap replaces scalar values under secret keys, recursively.
func scrubMap(m map[string]any, ref SecretRefFunc, depth int) int {
	if depth > e2a.MaxNesting+8 {
		return 0
	}
	n := 0
	for k, v := range m {
		switch t := v.(type) {
		case map[string]any:
			n += scrubMap(t, ref, depth+1)
		case []any:
			n += scrubSlice(t, ref, depth+1)
		case nil:
		default:
			if IsSecretKey(k) {
				val := scalarString(t)
				if val == Redacted {
					continue // already stripped
				}
				r := ""
				if ref != nil {
					r = ref("field:"+k, val)
					if r == val {
						continue // already a reference of the hook
					}
				}
				if r == "" {
					r = Redacted
				}
				n++
				m[k] = r
			}
		}
	}
	return n
}

func scrubSlice(s []any, ref SecretRefFunc, depth int) int {
	n := 0
	for _, v := range s {
		switch t := v.(type) {
		case map[string]any:
			n += scrubMap(t, ref, depth+1)
		case []any:
			n += scrubSlice(t, ref, depth+1)
		}
	}
	return n
}

func scalarString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case interface{ String() string }:
		return t.String()
	case bool:
		if t {
			return "true"
		}
		return "false"
	}
	return ""
}

// cleanURL removes credentials from a URL (userinfo, and query parameters
// under secret keys); an unparsable URL is dropped.
func cleanURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	u.User = nil
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k := range q {
			if IsSecretKey(k) || strings.EqualFold(k, "token") || strings.EqualFold(k, "key") || strings.EqualFold(k, "sig") || strings.EqualFold(k, "signature") {
				q.Set(k, Redacted)
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}
