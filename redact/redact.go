package redact

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Marker replaces every secret value.
const Marker = "[redacted]"

// MaxDepth bounds the nesting Redact descends into; a compound value
// deeper than that is replaced by Marker whole (decoded request bodies are
// refused long before: e2a.MaxNesting is 128).
const MaxDepth = 256

// secretWords are single words that make a key secret.
var secretWords = []string{
	"secret", "secrets", "password", "passwords", "passwd", "pwd", "passphrase",
	"token", "credential", "credentials", "apikey", "apikeys", "auth", "authorization",
	"cookie", "cookies", "bearer", "signature", "nkey", "privatekey", "clientsecret",
	// a JWT credential (NATS user JWTs, OAuth2 private_key_jwt); RFC
	// 7523's and RFC 8693's assertion, client_assertion
	"jwt", "assertion",
	// session cookies: Django's sessionid, Java's JSESSIONID, PHP's
	// PHPSESSID (session_id, sessionId are ids: two words)
	"sessionid", "sessid",
}

// gluedSuffixes make a single word secret when it ends with one of them
// (accesstoken, xapikey, setcookie, dbpassword).
var gluedSuffixes = []string{
	"token", "secret", "password", "passwd", "passphrase", "credential", "credentials",
	"apikey", "cookie", "authorization", "jwt", "assertion", "sessionid", "sessid",
}

// secretPhrases are runs of words that make a key secret.
var secretPhrases = [][]string{
	{"api", "key"}, {"api", "keys"}, {"private", "key"}, {"private", "keys"}, {"secret", "key"},
	{"session", "key"}, {"signing", "key"}, {"encryption", "key"}, {"master", "key"},
	{"access", "key"}, {"seed", "phrase"}, {"nats", "seed"},
	// Azure: API Management's Ocp-Apim-Subscription-Key, Storage's AccountKey
	{"subscription", "key"}, {"account", "key"},
	// lists of credentials ("tokens" alone is an LLM count)
	{"access", "tokens"}, {"refresh", "tokens"}, {"api", "tokens"}, {"session", "tokens"},
	// OIDC's id_token_hint is the ID token (hint is a qualifier elsewhere:
	// password_hint; token_type_hint keeps its qualifier type)
	{"token", "hint"},
}

// connWords as a key's last word (or ending it, glued), and connPhrases
// ending a key, name a connection string: its secret parts are redacted
// (connection), not the whole value.
var connWords = []string{"dsn", "connectionstring", "connectionstrings", "connstr", "connstring"}

var connPhrases = [][]string{
	{"connection", "string"}, {"connection", "strings"}, {"conn", "str"}, {"conn", "string"},
}

// connStores before url or uri make a key a connection string
// (DATABASE_URL, redis_url, SQLALCHEMY_DATABASE_URI, CELERY_BROKER_URL).
var connStores = []string{"database", "db", "redis", "mongo", "mongodb", "postgres", "postgresql", "pg", "mysql",
	"amqp", "rabbitmq", "broker", "cache", "sql"}

// plainPhrases end at a secret word without making it a match: a Gemini
// thought signature is the model's opaque state, which a client must send
// back with the next turn's tool calls (extra_content.google.thought_signature).
var plainPhrases = [][]string{{"thought", "signature"}}

// tokenIDWords after the word token name a token of an LLM's vocabulary
// (eos_token_id, stop_token_ids, token_logprobs): numbers under such a key
// are ids or scores, not secrets.
var tokenIDWords = []string{"id", "ids", "logprob", "logprobs"}

// qualifiers after the last secret match make a key name something about a
// secret, not the secret.
var qualifiers = []string{
	"ref", "refs", "reference", "references", "name", "names", "type", "types", "kind",
	"scheme", "schemes", "method", "methods", "mode", "format", "count", "counts", "number",
	"num", "size", "length", "len", "limit", "limits", "min", "max", "usage", "budget", "used",
	"remaining", "url", "uri", "endpoint", "path", "file", "location", "policy", "provider",
	"expires", "expiry", "expiration", "ttl", "required", "enabled", "present", "valid",
	"version", "hint", "scope", "scopes", "algorithm", "alg",
}

// countPrefixes as a key's first word make it a count, never a secret.
var countPrefixes = []string{"max", "min", "num", "total", "stripped", "redacted"}

// referenceWords as a key's last word make its value a reference.
var referenceWords = []string{"ref", "refs", "reference", "references"}

// table is an immutable snapshot of a policy's word lists.
type table struct {
	words    map[string]bool
	phrases  [][]string
	glued    []string // the phrases written as one word (secretkey, accesskey)
	extra    []string // the configured entries, as given (normalized)
	maxWords int      // longest phrase
	// memo remembers the class of the keys met (copy on write, at most
	// memoMax): requests repeat the same few dozen keys, and splitting a
	// key into words was a tenth of a normalization's allocations.
	memo atomic.Pointer[map[string]keyClass]
}

// keyClass is what the policy says of a key.
type keyClass uint8

const (
	classSecret    keyClass = 1 << iota // values under it are secrets
	classReference                      // it names a reference to a secret
	// classNumbers: numbers under it (a number or an array of numbers) are
	// no secret: it names LLM tokens' ids or a rate per token.
	classNumbers
	// classConn: it names a connection string (always with classSecret):
	// a string under it loses its secret parts only (connection).
	classConn
)

// memoMax bounds the keys a table remembers: beyond it (random keys) the
// class is computed each time.
const memoMax = 1024

// class returns the class of key, remembered.
func (t *table) class(key string) keyClass {
	if m := t.memo.Load(); m != nil {
		if c, ok := (*m)[key]; ok {
			return c
		}
	}
	c := t.classify(key)
	t.remember(key, c)
	return c
}

// classify computes the class of key from its words.
func (t *table) classify(key string) keyClass {
	ws := Words(key)
	var c keyClass
	if len(ws) > 0 && inList(referenceWords, ws[len(ws)-1]) {
		c |= classReference
	}
	if last := t.lastMatch(ws); last >= 0 {
		c |= classSecret
		if namesTokens(ws, last) {
			c |= classNumbers
		}
	} else if namesConnection(ws) {
		c |= classSecret | classConn
	}
	return c
}

// remember adds key's class to the memo unless it is full.
func (t *table) remember(key string, c keyClass) {
	for {
		old := t.memo.Load()
		var n int
		if old != nil {
			n = len(*old)
		}
		if n >= memoMax {
			return
		}
		m := make(map[string]keyClass, n+1)
		if old != nil {
			for k, v := range *old {
				m[k] = v
			}
		}
		m[strings.Clone(key)] = c
		if t.memo.CompareAndSwap(old, &m) {
			return
		}
	}
}

// Policy decides which keys are secret and redacts values. It is safe for
// concurrent use; the zero value is not usable, use [New].
type Policy struct {
	mu sync.Mutex // serializes AddWords
	t  atomic.Pointer[table]
}

// Default is the process's policy; cmd/e2a adds E2A_SECRET_KEYS to it at
// start-up.
var Default = New()

// New returns a policy with the built-in word list and the extra words or
// keys given (see [Policy.AddWords]).
func New(extra ...string) *Policy {
	t := &table{words: map[string]bool{}, maxWords: 2}
	for _, w := range secretWords {
		t.words[w] = true
	}
	t.phrases = append(t.phrases, secretPhrases...)
	for _, ph := range secretPhrases {
		t.glued = append(t.glued, strings.Join(ph, ""))
	}
	p := &Policy{}
	p.t.Store(t)
	p.AddWords(extra...)
	return p
}

// AddWords extends the policy: each entry is a word ("pin") or a key
// ("db_pass", "X-Vendor-Sig") split like any key ([Words]); a one-word
// entry becomes a secret word, a longer one a secret phrase. Blank entries
// are ignored. It is safe to call while other goroutines match.
func (p *Policy) AddWords(entries ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.t.Load()
	n := &table{words: make(map[string]bool, len(old.words)+len(entries)), phrases: append([][]string(nil), old.phrases...),
		glued: append([]string(nil), old.glued...), extra: append([]string(nil), old.extra...), maxWords: old.maxWords}
	for w := range old.words {
		n.words[w] = true
	}
	changed := false
	for _, e := range entries {
		ws := Words(e)
		switch len(ws) {
		case 0:
			continue
		case 1:
			n.words[ws[0]] = true
		default:
			n.phrases = append(n.phrases, ws)
			n.glued = append(n.glued, strings.Join(ws, ""))
			n.maxWords = max(n.maxWords, len(ws))
		}
		n.extra = append(n.extra, strings.Join(ws, "_"))
		changed = true
	}
	if changed {
		p.t.Store(n)
	}
}

// Extra returns the configured entries (as words joined by "_"), in the
// order they were added.
func (p *Policy) Extra() []string { return append([]string(nil), p.t.Load().extra...) }

// SecretWords returns the single secret words of the policy (built-in and
// configured), for displays that need a list; matching must use
// [Policy.IsSecretKey].
func (p *Policy) SecretWords() []string {
	t := p.t.Load()
	out := make([]string, 0, len(t.words))
	for _, w := range secretWords {
		out = append(out, w)
	}
	for w := range t.words {
		if !inList(secretWords, w) {
			out = append(out, w)
		}
	}
	return out
}

// Words splits a key into lower-case words: at every rune that is neither a
// letter nor a digit, at lower → upper case changes, before the last
// capital of a run followed by a lower-case letter, and between letters and
// digits. Words("X-Api-Key") = [x api key]; Words("APIKey") = [api key];
// Words("oauth2Token") = [oauth 2 token].
func Words(key string) []string {
	var out []string
	start := -1 // byte offset of the current word
	var prev rune
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, strings.ToLower(key[start:end]))
		}
		start = -1
	}
	for i, r := range key {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			prev = 0
			continue
		}
		if start >= 0 && prev != 0 {
			switch {
			case unicode.IsDigit(r) != unicode.IsDigit(prev):
				flush(i)
			case isUpper(r) && !isUpper(prev) && !unicode.IsDigit(prev):
				flush(i)
			case unicode.IsLower(r) && isUpper(prev):
				// "APIKey": at 'e', the word began before 'K' if the run
				// of capitals is longer than one.
				pi := i - utf8.RuneLen(prev)
				if pi > start {
					flush(pi)
					start = pi
				}
			}
		}
		if start < 0 {
			start = i
		}
		prev = r
	}
	flush(len(key))
	return out
}

// isUpper reports whether r is an upper-case letter that lower-casing
// changes. A capital without a lower-case form ('ⅅ', U+2145) is still one
// after strings.ToLower, so a word's case boundaries at it would move when
// the lowered word is split again ("ⅅⅅA" -> [ⅅⅅa], but "ⅅⅅa" -> [ⅅ ⅅa]):
// it is taken as caseless, like a letter of a script without case.
func isUpper(r rune) bool { return unicode.IsUpper(r) && unicode.ToLower(r) != r }

// IsSecretKey reports whether values under key are secrets (see the package
// documentation for the rule).
func (p *Policy) IsSecretKey(key string) bool {
	if key == "" {
		return false
	}
	return p.t.Load().class(key)&classSecret != 0
}

// lastMatch returns the index of the word at which the last secret match
// of a secret key's words ends, or -1 when the words name no secret.
func (t *table) lastMatch(ws []string) int {
	if len(ws) == 0 || inList(countPrefixes, ws[0]) && len(ws) > 1 {
		return -1
	}
	last := -1
	for i := len(ws) - 1; i >= 0 && last < 0; i-- {
		if t.endsMatch(ws, i) {
			last = i
		}
	}
	if last < 0 {
		return -1
	}
	for _, w := range ws[last+1:] {
		if inList(qualifiers, w) {
			return -1
		}
	}
	return last
}

// namesTokens reports whether a secret key whose last match ends at
// ws[last] names LLM tokens rather than a credential: the match is the
// word token, followed by token id words only (eos_token_id,
// stop_token_ids, token_logprobs) or preceded by per (cost_per_token,
// predicted_per_token_ms).
func namesTokens(ws []string, last int) bool {
	if ws[last] != "token" {
		return false
	}
	if last > 0 && ws[last-1] == "per" {
		return true
	}
	tail := ws[last+1:]
	if len(tail) == 0 {
		return false
	}
	for _, w := range tail {
		if !inList(tokenIDWords, w) {
			return false
		}
	}
	return true
}

// namesConnection reports whether a key's words name a connection string:
// they end with a connection word or phrase, or a store's url or uri.
func namesConnection(ws []string) bool {
	n := len(ws)
	if n == 0 || n > 1 && inList(countPrefixes, ws[0]) {
		return false
	}
	for _, s := range connWords {
		if strings.HasSuffix(ws[n-1], s) {
			return true
		}
	}
	for _, ph := range connPhrases {
		if endsPhrase(ws, n-1, ph) {
			return true
		}
	}
	return n > 1 && (ws[n-1] == "url" || ws[n-1] == "uri") && inList(connStores, ws[n-2])
}

// endsMatch reports whether a secret word or phrase ends at ws[i].
func (t *table) endsMatch(ws []string, i int) bool {
	w := ws[i]
	for _, ph := range plainPhrases {
		if endsPhrase(ws, i, ph) {
			return false
		}
	}
	if t.words[w] {
		return true
	}
	for _, s := range gluedSuffixes {
		if len(w) > len(s) && strings.HasSuffix(w, s) {
			return true
		}
	}
	// A phrase written as one word is the phrase: Docker registry's S3
	// driver takes accesskey and secretkey, and an upper-case env name has
	// no camelCase left to split (SECRETKEY, AWS_SECRETKEY).
	for _, s := range t.glued {
		if strings.HasSuffix(w, s) {
			return true
		}
	}
	for _, ph := range t.phrases {
		if endsPhrase(ws, i, ph) {
			return true
		}
	}
	return false
}

// endsPhrase reports whether the phrase ph ends at ws[i]: its words are
// ws's, except that its first may end a longer word, a run of capitals
// that Words could not split (XAPIKey → xapi, key; OpenAIAPIKey).
func endsPhrase(ws []string, i int, ph []string) bool {
	n := len(ph)
	if n > i+1 {
		return false
	}
	for k := n - 1; k > 0; k-- {
		if ws[i-n+1+k] != ph[k] {
			return false
		}
	}
	return strings.HasSuffix(ws[i-n+1], ph[0])
}

// IsReferenceKey reports whether key names a reference to a secret rather
// than a secret: its last word is ref(s) or reference(s) (credentialRef,
// api_key_ref, $ref).
func IsReferenceKey(key string) bool {
	ws := Words(key)
	return len(ws) > 0 && inList(referenceWords, ws[len(ws)-1])
}

// Replacer returns what replaces a secret scalar found under key (value is
// its text). Returning "" means [Marker]; returning value itself leaves it
// unchanged and uncounted (it already is one of the replacer's references).
type Replacer func(key, value string) string

// Redact replaces, in place, the secrets of a decoded JSON value
// (map[string]any, []any and scalars, as encoding/json decodes them) at
// every depth, and returns how many values it replaced. fn may be nil (the
// marker).
func (p *Policy) Redact(v any, fn Replacer) int {
	w := walker{t: p.t.Load(), fn: fn}
	switch t := v.(type) {
	case map[string]any:
		return w.object(t, false, "", 0)
	case []any:
		return w.array(t, false, "", 0)
	}
	return 0
}

type walker struct {
	t  *table
	fn Replacer
}

func (w *walker) isSecret(key string) bool { return key != "" && w.t.class(key)&classSecret != 0 }

// secretValue reports whether v, the value of key (at depth), is a secret:
// key is secret, and v is not the numbers of a key naming LLM tokens
// (stop_token_ids: [1, 2]).
func (w *walker) secretValue(key string, v any, depth int) bool {
	if key == "" {
		return false
	}
	c := w.t.class(key)
	return c&classSecret != 0 && !c.keeps(v, depth)
}

// keeps reports whether v, the value (at depth) of a key of class c, is
// kept although the key is secret: numbers under a key naming LLM tokens.
func (c keyClass) keeps(v any, depth int) bool { return c&classNumbers != 0 && numbers(v, depth) }

// keepsText reports whether v, a value written in a string (a flag's, a
// form's or URL's parameter's, a header line's) under a secret key of
// class c, is kept: the numbers of a key naming LLM tokens
// (--eos-token-id 2, ?stop_token_ids=1,2).
func (c keyClass) keepsText(v string) bool { return c&classNumbers != 0 && numberText(v) }

// numbers reports whether v, at depth, is a number (or a string that is
// numbers, numberText: env values are strings) or a non-empty array of
// numbers at every depth up to MaxDepth ([[1, 2], [3]]).
func numbers(v any, depth int) bool {
	switch t := v.(type) {
	case json.Number, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	case string:
		return numberText(t)
	case []any:
		if len(t) == 0 || depth >= MaxDepth {
			return false
		}
		for _, e := range t {
			if !numbers(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// numberText reports whether s is one or more decimal numbers separated
// by commas ("2", "-0.25", "1e-5", "128001,128009"): nothing but a
// sign, digits, a fraction and an exponent, as JSON writes numbers.
func numberText(s string) bool {
	for {
		i := 0
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		d := digits(s, i)
		if d == i {
			return false
		}
		i = d
		if i < len(s) && s[i] == '.' {
			if d = digits(s, i+1); d == i+1 {
				return false
			}
			i = d
		}
		if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
			i++
			if i < len(s) && (s[i] == '-' || s[i] == '+') {
				i++
			}
			if d = digits(s, i); d == i {
				return false
			}
			i = d
		}
		if i == len(s) {
			return true
		}
		if s[i] != ',' {
			return false
		}
		s = s[i+1:]
	}
}

// digits returns the index of the first byte of s at or after i that is
// no ASCII digit.
func digits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// replace returns the replacement of a secret scalar under key and
// whether it changed: a string under a connection string's key loses its
// secret parts (connection), any other scalar is replaced whole (scalar).
func (w *walker) replace(key string, v any) (any, bool) {
	if s, ok := v.(string); ok && w.t.class(key)&classConn != 0 {
		return w.connection(key, s)
	}
	return w.scalar(key, v)
}

// scalar returns the replacement of a secret scalar (the replacer's
// reference, or Marker) and whether it changed.
func (w *walker) scalar(key string, v any) (any, bool) {
	var s string
	switch t := v.(type) {
	case string:
		s = t
	case json.Number:
		s = t.String()
	case float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		b, _ := json.Marshal(t)
		s = string(b)
	default: // bool, nil and anything else carries no secret text
		return v, false
	}
	if s == Marker {
		return v, false
	}
	r := ""
	if w.fn != nil {
		r = w.fn(key, s)
		if r == s {
			return v, false
		}
	}
	if r == "" {
		r = Marker
	}
	return r, true
}

// object redacts m; secret says m is (inside) the value of a secret key.
func (w *walker) object(m map[string]any, secret bool, parent string, depth int) int {
	n, walked := 0, false
	if !secret {
		n, walked = w.nameValue(m, depth)
	}
	for k, v := range m {
		if walked && k == "value" {
			continue // walked as a secret, which finds everything
		}
		ks := secret
		key := parent
		if !ks || key == "" {
			key = k
		}
		switch c := w.t.class(k); {
		case c&classReference != 0:
			ks = false
		case !ks && k != "" && c&classSecret != 0 && !c.keeps(v, depth) && !replayed(m, k, parent):
			ks = true
		case !ks:
			// any string: a URL's password and secret parameters (an
			// array's strings get the URL rule from args)
			if s, ok := v.(string); ok {
				if r, c := w.urls(s); c > 0 {
					m[k], v = r, r
					n += c
				}
			}
		}
		r, set, c := w.child(v, ks, key, depth)
		if set {
			m[k] = r
		}
		n += c
	}
	return n
}

// replayed reports whether m's key k is the opaque field of a reasoning
// block, which the client sends back unchanged with the next turn; parent
// is the key m (or the array holding it) is the value of:
//   - Anthropic's extended thinking: a thinking block's signature
//     ({"type": "thinking", "thinking": …, "signature": …}, streamed as a
//     signature_delta) and a redacted_thinking block's data;
//   - Bedrock Converse's: a reasoningText's signature beside its text
//     (reasoningContent.reasoningText), and ConverseStream's
//     reasoningContent delta holding the signature alone (its
//     redactedContent is no secret key);
//   - OpenRouter's reasoning_details entries: a reasoning.text's signature
//     and a reasoning.encrypted's data.
//
// Elsewhere a signature (a webhook's) is a secret.
func replayed(m map[string]any, k, parent string) bool {
	t, _ := m["type"].(string)
	switch k {
	case "signature":
		_, text := m["text"].(string)
		return t == "thinking" || t == "signature_delta" ||
			parent == "reasoningText" && text || parent == "reasoningContent" && len(m) == 1 ||
			parent == "reasoning_details" && t == "reasoning.text"
	case "data":
		return t == "redacted_thinking" || parent == "reasoning_details" && t == "reasoning.encrypted"
	}
	return false
}

// nameValue applies the name/value pair rule to m; walked says it walked
// an object or array under "value".
func (w *walker) nameValue(m map[string]any, depth int) (n int, walked bool) {
	v, ok := m["value"]
	if !ok || v == nil {
		return 0, false
	}
	// Either names the value: [{"key": "openai_api_key", "name": "OpenAI",
	// "value": …}] is a settings list's entry as much as an env's.
	name, _ := m["name"].(string)
	if !w.secretValue(name, v, depth) {
		name, _ = m["key"].(string)
		if !w.secretValue(name, v, depth) {
			return 0, false
		}
	}
	switch t := v.(type) {
	case map[string]any:
		return w.object(t, true, name, depth+1), true
	case []any:
		return w.array(t, true, name, depth+1), true
	}
	if r, ok := w.replace(name, v); ok {
		m["value"] = r
		return 1, false
	}
	return 0, false
}

// array redacts a; secret says a is (inside) the value of a secret key.
func (w *walker) array(a []any, secret bool, parent string, depth int) int {
	n, walked := 0, false
	if !secret {
		// the pair first: ["Set-Cookie", "sessionid=X"] is one value,
		// which the command-line rule would count again
		n, walked = w.pair(a, depth)
		n += w.args(a)
	}
	for i, v := range a {
		if walked && i == 1 {
			continue // walked as a secret, which finds everything
		}
		r, set, c := w.child(v, secret, parent, depth)
		if set {
			a[i] = r
		}
		n += c
	}
	return n
}

// child redacts v, an element of a container at depth (of key name, the
// secret key it is inside when secret): an object or array is walked, or
// replaced by Marker beyond MaxDepth; a scalar is replaced when secret.
// set says the container must store r in v's place; c counts what was
// redacted.
func (w *walker) child(v any, secret bool, name string, depth int) (r any, set bool, c int) {
	switch t := v.(type) {
	case map[string]any:
		if depth >= MaxDepth {
			return Marker, true, 1
		}
		return nil, false, w.object(t, secret, name, depth+1)
	case []any:
		if depth >= MaxDepth {
			return Marker, true, 1
		}
		return nil, false, w.array(t, secret, name, depth+1)
	}
	if secret {
		if r, ok := w.replace(name, v); ok {
			return r, true, 1
		}
	} else if s, ok := v.(string); ok && mayBeShape(s) && w.t.class(name)&classReference == 0 {
		if r, ok := w.shape(name, s); ok {
			return r, true, 1
		}
	}
	return nil, false, 0
}

// pair applies the [name, value] rule to a: a two-element array whose
// first element is a secret key name (["Authorization", "Bearer X"],
// header tuples) has its second element redacted like the value of that
// key. A flag ("--auth", the command-line rule's) or a string holding
// white space, '=' or ':' is no key name. walked says it walked (or
// replaced) an object or array in a[1].
func (w *walker) pair(a []any, depth int) (n int, walked bool) {
	if len(a) != 2 {
		return 0, false
	}
	name, ok := a[0].(string)
	if !ok || !isKeyName(name) || !w.secretValue(name, a[1], depth) || w.t.class(name)&classReference != 0 {
		return 0, false
	}
	switch t := a[1].(type) {
	case map[string]any:
		if depth >= MaxDepth {
			a[1] = Marker
			return 1, true
		}
		return w.object(t, true, name, depth+1), true
	case []any:
		if depth >= MaxDepth {
			a[1] = Marker
			return 1, true
		}
		return w.array(t, true, name, depth+1), true
	}
	if r, ok := w.replace(name, a[1]); ok {
		a[1] = r
		return 1, false
	}
	return 0, false
}

// isKeyName reports whether s can be a key name in a [name, value] pair.
func isKeyName(s string) bool {
	return s != "" && s[0] != '-' && !strings.ContainsFunc(s, func(r rune) bool {
		return r == '=' || r == ':' || unicode.IsSpace(r)
	})
}

// args applies the command-line rule to the string elements of a.
func (w *walker) args(a []any) int {
	n := 0
	for i := 0; i < len(a); i++ {
		s, ok := a[i].(string)
		if !ok || s == "" {
			continue
		}
		if r, changed, isLine := w.headerLine(s); isLine {
			if changed {
				a[i] = r
				n++
			}
			continue
		}
		if r, c := w.urls(s); c > 0 {
			a[i], s = r, r
			n += c
		}
		if r, c := w.assignment(s); c > 0 {
			a[i] = r
			n += c
			continue
		}
		flag, isFlag := flagName(s)
		if !isFlag || !w.isSecret(flag) || i+1 >= len(a) {
			continue
		}
		next := a[i+1]
		if ns, ok := next.(string); ok && strings.HasPrefix(ns, "--") {
			continue
		}
		if !w.secretValue(flag, next, 0) {
			i++ // a token id's number: --eos-token-id 2
			continue
		}
		if r, ok := w.replace(flag, next); ok {
			a[i+1] = r
			n++
		}
		i++
	}
	return n
}

// headerLine redacts a header line "Name: X" (also "Name:X", with white
// space around; the form of ^\s*([A-Za-z0-9_-]+)\s*:\s*(.+)$, the value
// running to the end of s) when Name is a secret key: "Authorization:
// Bearer X" becomes "Authorization: [redacted]". isLine says s is such a
// line with a secret name (changed is false when it is already redacted).
func (w *walker) headerLine(s string) (r string, changed, isLine bool) {
	i := skipSpace(s, 0)
	start := i
	for i < len(s) && (isAlnumASCII(s[i]) || s[i] == '-' || s[i] == '_') {
		i++
	}
	if i == start {
		return s, false, false
	}
	name := s[start:i]
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != ':' {
		return s, false, false
	}
	v := skipSpace(s, i+1)
	if v >= len(s) || !w.isSecret(name) || w.t.class(name).keepsText(s[v:]) {
		return s, false, false
	}
	rv, ok := w.replace(name, s[v:])
	if !ok {
		return s, false, true
	}
	return s[:v] + rv.(string), true, true
}

// skipSpace returns the index of the first byte of s at or after i that is
// not ASCII white space (\s: tab, newline, form feed, carriage return,
// space).
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\f' || s[i] == '\r') {
		i++
	}
	return i
}

func isAlnumASCII(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// assignment redacts "--flag=X", "-flag=X" and "NAME=X" when the flag or
// name is a secret key; otherwise X is read as a header line
// ("--header=Authorization: Bearer X") or a form
// ("user=bob&password=X", curl's -d). A NAME holding white space or one of
// ":/?&#@" is none (a URL's query is the URL rule's). It returns s and how
// many values it replaced.
func (w *walker) assignment(s string) (string, int) {
	eq := strings.IndexByte(s, '=')
	if eq <= 0 || eq == len(s)-1 {
		return s, 0
	}
	name, v := s[:eq], s[eq+1:]
	if f, ok := flagName(name); ok {
		name = f
	} else if strings.HasPrefix(name, "-") || strings.ContainsFunc(name, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(":/?&#@", r)
	}) {
		return s, 0
	}
	if w.isSecret(name) {
		if w.t.class(name).keepsText(v) {
			return s, 0 // --eos-token-id=2
		}
		if r, ok := w.replace(name, v); ok {
			return s[:eq+1] + r.(string), 1
		}
		return s, 0
	}
	if r, changed, isLine := w.headerLine(v); isLine {
		if changed {
			return s[:eq+1] + r, 1
		}
		return s, 0
	}
	if r, n := w.form(v); n > 0 {
		return s[:eq+1] + r, n
	}
	return s, 0
}

// form redacts the values of the secret fields of v, the rest of a form
// after its first value ("bob&password=X&x=1"): each "&name=value" whose
// name is a secret key has its value, up to the next '&', replaced.
func (w *walker) form(v string) (string, int) {
	if strings.IndexByte(v, '&') < 0 {
		return v, 0
	}
	var e paramEdit
	for p := strings.IndexByte(v, '&'); p >= 0 && p < len(v); {
		q := p + 1
		for q < len(v) && v[q] != '&' {
			q++
		}
		w.param(&e, v, p, q, w.isSecret)
		p = q
	}
	return e.result(v)
}

// paramEdit is a string's parameters being redacted (param): what is
// written so far, up to last, and how many values were replaced.
type paramEdit struct {
	b       strings.Builder
	last, n int
}

// param replaces the value of the parameter s[p+1:q] ("name=value", its
// separator at p) when secret(name) holds.
func (w *walker) param(e *paramEdit, s string, p, q int, secret func(string) bool) {
	eq := strings.IndexByte(s[p+1:q], '=')
	v := p + 2 + eq
	if eq < 0 || v >= q || !secret(s[p+1:v-1]) || w.t.class(s[p+1:v-1]).keepsText(s[v:q]) {
		return
	}
	if r, ok := w.replace(s[p+1:v-1], s[v:q]); ok {
		e.b.WriteString(s[e.last:v])
		e.b.WriteString(r.(string))
		e.last = q
		e.n++
	}
}

// result is s with the values param replaced, and how many.
func (e *paramEdit) result(s string) (string, int) {
	if e.n == 0 {
		return s, 0
	}
	e.b.WriteString(s[e.last:])
	return e.b.String(), e.n
}

// flagName returns the name of a command-line flag ("--api-key" →
// "api-key", "-token" → "token"); one-letter flags are names too ("-p" →
// "p"), and match only when configured.
func flagName(s string) (string, bool) {
	if len(s) < 2 || s[0] != '-' {
		return "", false
	}
	f := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "-")
	if f == "" || strings.ContainsFunc(f, unicode.IsSpace) {
		return "", false
	}
	r, _ := utf8.DecodeRuneInString(f)
	if !unicode.IsLetter(r) {
		return "", false // "-1", "--" and negative numbers are no flags
	}
	return f, true
}

func inList(list []string, w string) bool {
	for _, s := range list {
		if s == w {
			return true
		}
	}
	return false
}

// IsSecretKey is [Default].IsSecretKey.
func IsSecretKey(key string) bool { return Default.IsSecretKey(key) }

// Redact is [Default].Redact.
func Redact(v any, fn Replacer) int { return Default.Redact(v, fn) }

// AddWords is [Default].AddWords.
func AddWords(entries ...string) { Default.AddWords(entries...) }
