package normalizer

import (
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/redact"
)

// Redacted replaces a secret value when no SecretRef hook gives a reference
// and the key must stay (free-form objects): the marker of package redact.
const Redacted = redact.Marker

// IsSecretKey reports whether a key of a free-form object holds a secret:
// the word rule of package redact (Authorization, X-Api-Key, api_key,
// bearer_token, auth_token, session_token, password, passwd, secret,
// credentials, cookie …; not max_tokens, token_count, session_id,
// credential_ref), with the words added by E2A_SECRET_KEYS. Scalar values
// under such keys never leave the normalizer; objects under them have their
// scalar leaves replaced, except references ({"credentialRef": {...}}),
// which are kept.
func IsSecretKey(k string) bool { return redact.IsSecretKey(k) }

// stripSecrets removes every secret from env (spec §13, DESIGN guarantee 5)
// and returns how many values it removed or replaced by a reference:
//
//   - auth.bearer_token is removed; with a SecretRef hook its reference
//     lands in auth.credential_ref (when that is empty);
//   - every auth.extra_headers value is replaced by its reference, or the
//     entry is dropped and its name listed in auth._meta.stripped_headers;
//   - params, channel_context, a2a_metadata, acp_meta, auth._meta and
//     provenance.details are redacted by package redact at every depth
//     (values under secret keys, scalar leaves of objects under them,
//     name/value pairs, secret command-line flags), each value replaced
//     by a reference or [Redacted];
//   - MCP servers (params.mcpServers or mcp_servers, at any depth: an
//     array, or an object of servers by name) lose every env and headers
//     value ([StripMCPServers]).
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
		// The client's _meta is redacted before the names of the headers
		// dropped below join it: a list of two names, the first a secret
		// one (["Authorization", "X-Trace"]), read as a name/value pair,
		// lost its second name.
		n += scrubMap(a.Meta, ref)
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
	}
	n += scrubMap(env.Params, ref)
	n += scrubMap(env.ChannelContext, ref)
	n += scrubMap(env.A2AMetadata, ref)
	n += scrubMap(env.ACPMeta, ref)
	if env.Provenance != nil {
		n += scrubMap(env.Provenance.Details, ref)
	}
	return n
}

// scrubMap redacts m in place with the policy of package redact, values
// replaced by ref's references (kind "field:<key>") or [Redacted], and
// returns how many it replaced. MCP server lists in it are stripped too,
// and the scheme prefix of A2E workflow credential headers is kept.
func scrubMap(m map[string]any, ref SecretRefFunc) int {
	if len(m) == 0 {
		return 0
	}
	var fn redact.Replacer
	if ref != nil {
		fn = func(key, value string) string { return ref("field:"+key, value) }
	}
	keep := workflowPrefixes(m, 0, nil)
	files := takeFileURIs(m)
	n := redact.Redact(m, fn) + stripMCPIn(m, 0)
	putFileURIs(files)
	for _, k := range keep {
		if k.h["prefix"] != k.prefix {
			k.h["prefix"] = k.prefix
			n--
		}
	}
	return n
}

// fileLists are the params members listing the files a message hands its
// agent (params.files and params.attachments, the E2AFileRef lists of spec
// §4.4, the resource_link blocks of content_blocks and an ACP prompt),
// whose uri the redaction leaves whole: a presigned URL (an S3
// X-Amz-Signature, an Azure sig) is how a client gives the agent a file to
// read, and without its signature the agent could not.
var fileLists = []string{"files", "attachments", "content_blocks", "prompt"}

// fileURI is a file list entry and its uri, taken out for the redaction.
type fileURI struct {
	f   map[string]any
	uri string
}

// takeFileURIs takes the uri of every entry of m's file lists out of m,
// and returns them to put back (putFileURIs): scrubMap's redaction does
// not see them.
func takeFileURIs(m map[string]any) []fileURI {
	var taken []fileURI
	for _, k := range fileLists {
		list, _ := m[k].([]any)
		for _, e := range list {
			if f, ok := e.(map[string]any); ok {
				if u, ok := f["uri"].(string); ok {
					taken = append(taken, fileURI{f, u})
					delete(f, "uri")
				}
			}
		}
	}
	return taken
}

// putFileURIs puts back what takeFileURIs took.
func putFileURIs(taken []fileURI) {
	for _, t := range taken {
		t.f["uri"] = t.uri
	}
}

// schemePrefix is an ApiCall credential header's prefix that names an
// auth scheme ("Bearer ", "Token ") and so carries no secret.
var schemePrefix = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,31} ?$`)

// keptPrefix is an A2E workflow ApiCall header {"credentialRef": {...},
// "prefix": "Bearer "}: a vault reference the executor resolves
// (workflow/doc.go); its scheme prefix must survive redaction.
type keptPrefix struct {
	h      map[string]any
	prefix string
}

// workflowPrefixes finds the ApiCall credential headers in v whose prefix
// names a scheme.
func workflowPrefixes(v any, depth int, out []keptPrefix) []keptPrefix {
	if depth > redact.MaxDepth {
		return out
	}
	switch t := v.(type) {
	case map[string]any:
		if call, ok := t["ApiCall"].(map[string]any); ok {
			headers, _ := call["headers"].(map[string]any)
			for _, hv := range headers {
				h, ok := hv.(map[string]any)
				if _, isRef := h["credentialRef"].(map[string]any); !ok || !isRef {
					continue
				}
				if p, ok := h["prefix"].(string); ok && schemePrefix.MatchString(p) {
					out = append(out, keptPrefix{h, p})
				}
			}
		}
		for _, x := range t {
			out = workflowPrefixes(x, depth+1, out)
		}
	case []any:
		for _, x := range t {
			out = workflowPrefixes(x, depth+1, out)
		}
	}
	return out
}

// stripMCPIn applies StripMCPServers to every mcpServers / mcp_servers
// list in v: an array of servers (ACP's form), or an object of servers by
// name, the form of the MCP configuration files of Claude Desktop, Cursor
// and the MCP SDKs' samples ({"mcpServers": {"github": {"command": …,
// "env": {…}}}}), whose env and headers values were kept when their names
// were not secret (GH_PAT, OPENAI_KEY).
func stripMCPIn(v any, depth int) int {
	if depth > redact.MaxDepth {
		return 0
	}
	n := 0
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if k == "mcpServers" || k == "mcp_servers" {
				switch s := x.(type) {
				case []any:
					n += StripMCPServers(s)
					continue
				case map[string]any:
					byName := make([]any, 0, len(s))
					for _, server := range s {
						byName = append(byName, server)
					}
					n += StripMCPServers(byName)
					continue
				}
			}
			n += stripMCPIn(x, depth+1)
		}
	case []any:
		for _, x := range t {
			n += stripMCPIn(x, depth+1)
		}
	}
	return n
}

// StripMCPServers removes the secrets of ACP MCP server configurations
// (session/new, session/load mcpServers) in place and returns how many
// values it replaced: every value of a server's env and headers, whatever
// their names (an MCP server's environment is its credentials, as a rule),
// given as [{"name","value"}] or as an object, becomes [Redacted]; names
// stay; a URL loses its user information and secret query parameters.
// Args and anything else follow the redact policy (["--token", X],
// "--api-key=X", "GITHUB_TOKEN=X").
func StripMCPServers(servers []any) int {
	n := 0
	for _, s := range servers {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		if u, ok := m["url"].(string); ok && u != "" {
			// An http or sse server's URL: its user information and
			// secret query parameters (cleanURL), which the key-name
			// policy below does not see inside a value.
			if c := cleanURL(u); c != u {
				m["url"] = c
				n++
			}
		}
		for _, k := range []string{"env", "headers"} {
			switch t := m[k].(type) {
			case []any:
				for _, e := range t {
					if em, ok := e.(map[string]any); ok {
						n += blank(em, "value")
					}
				}
			case map[string]any:
				for name := range t {
					n += blank(t, name)
				}
			}
		}
	}
	return n + redact.Redact(servers, nil)
}

// blank replaces m[k] by [Redacted] unless it is absent, null or already
// the marker.
func blank(m map[string]any, k string) int {
	switch v := m[k].(type) {
	case nil:
		return 0
	case string:
		if v == Redacted || v == "" {
			return 0
		}
	}
	m[k] = Redacted
	return 1
}

// webhookURL is how a webhook's URL (an inline A2A push config's,
// AgentVault's webhookUrl) is kept in an envelope: its scheme and host,
// "/…" for a path or query (redact.URL, as the console and the logs show
// it), since a webhook's path or query may be its secret (Slack's and
// Discord's hooks) and the envelope reaches the streams, the audit role
// and the agent. Nothing delivers from this copy: the front doors
// register a push config from the call itself. It is "" for a URL that
// does not parse; creds says raw held credentials (user information,
// secret query parameters: cleanURL), counted as stripped secrets.
func webhookURL(raw string) (u string, creds bool) {
	c := cleanURL(raw)
	if c == "" {
		return "", raw != ""
	}
	return redact.URL(raw), c != raw
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
			if IsSecretKey(k) || strings.EqualFold(k, "key") || strings.EqualFold(k, "sig") {
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
