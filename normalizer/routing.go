package normalizer

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// DefaultPool is the pool of an envelope no rule matches when
// Routes.Default is empty.
const DefaultPool = "default"

// WorkflowPool is the pool of A2E workflow envelopes (method
// MethodWorkflowExecute) unless a method rule says otherwise. A submission
// of another method routed to it (Input.Agent, a rule) is refused with
// ErrInvalidRequest: the workflow worker runs only that method.
const WorkflowPool = "workflow"

// Routes is the routing rule: which agent pool an envelope goes to. The
// first match wins, in this order:
//
//  1. Input.Agent, an explicit pool given by the caller (?agent=NAME);
//  2. Methods[method], an exact match on Envelope.Method (for method "ext",
//     Envelope.ExtMethod is tried first);
//  3. the longest Methods key ending in "*" that prefixes the method
//     ("session/*", "tool/*", "*" matches everything; for "ext", one
//     prefixing ExtMethod before one as long prefixing "ext");
//  4. Channels[channel], an exact match on Envelope.Channel;
//  5. the built-in rule: MethodWorkflowExecute → WorkflowPool;
//  6. Default, or DefaultPool when empty.
//
// Methods are those the adapters write: the protocol's own method name
// (chat.send, session/prompt, message/send, tasks/send, an A2E type such as
// tool/call/req, a2e.workflow.execute). Pool names must match
// [A-Za-z0-9_-]{1,64} (a NATS subject token); [ParseRoutes] checks it.
type Routes struct {
	Default  string
	Methods  map[string]string
	Channels map[string]string
}

// Pool returns the pool of env (steps 2–6 of the rule).
func (r Routes) Pool(env *e2a.Envelope) string {
	methods := []string{env.Method}
	if env.Method == "ext" && env.ExtMethod != "" {
		methods = []string{env.ExtMethod, env.Method}
	}
	for _, m := range methods {
		if p, ok := r.Methods[m]; ok && m != "" {
			return p
		}
	}
	// The methods in their order outside, so that of two rules as long,
	// one for ext_method and one for "ext", ext_method's wins: with the
	// rules outside, the map's order chose between them.
	best, bestLen := "", -1
	for _, m := range methods {
		for k, p := range r.Methods {
			prefix, wild := strings.CutSuffix(k, "*")
			if wild && strings.HasPrefix(m, prefix) && len(prefix) > bestLen {
				best, bestLen = p, len(prefix)
			}
		}
	}
	if bestLen >= 0 {
		return best
	}
	if p, ok := r.Channels[env.Channel]; ok && env.Channel != "" {
		return p
	}
	if env.Method == MethodWorkflowExecute {
		return WorkflowPool
	}
	if r.Default != "" {
		return r.Default
	}
	return DefaultPool
}

var poolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidPool reports whether name can be used as a pool (a subject token).
func ValidPool(name string) bool { return poolName.MatchString(name) }

// ParseRoutes reads routes from the configuration syntax (e.g. the
// E2A_ROUTES variable): rules separated by commas or semicolons, each
// "default=POOL", "method:METHOD=POOL" or "channel:CHANNEL=POOL"; spaces
// around items are ignored. Example:
//
//	default=demo; method:a2e.workflow.execute=workflow; method:tool/*=tools; channel:feishu=feishu
func ParseRoutes(s string) (Routes, error) {
	r := Routes{}
	for _, item := range strings.FieldsFunc(s, func(c rune) bool { return c == ',' || c == ';' }) {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		eq := strings.LastIndexByte(item, '=')
		if eq < 0 {
			return Routes{}, fmt.Errorf("routes: %q: want KEY=POOL", item)
		}
		key, pool := strings.TrimSpace(item[:eq]), strings.TrimSpace(item[eq+1:])
		if !ValidPool(pool) {
			return Routes{}, fmt.Errorf("routes: %q: pool %q must match [A-Za-z0-9_-]{1,64}", item, pool)
		}
		// The name after method: or channel: is trimmed as the key and the
		// pool are: "method: x" named " x", which no method is, and its
		// rule never matched.
		kind, name, _ := strings.Cut(key, ":")
		name = strings.TrimSpace(name)
		switch {
		case key == "default":
			r.Default = pool
		case kind == "method" && name != "":
			if r.Methods == nil {
				r.Methods = map[string]string{}
			}
			r.Methods[name] = pool
		case kind == "channel" && name != "":
			if r.Channels == nil {
				r.Channels = map[string]string{}
			}
			r.Channels[name] = pool
		default:
			return Routes{}, fmt.Errorf("routes: %q: key must be default, method:NAME or channel:NAME", item)
		}
	}
	return r, nil
}

// String writes the routes in the syntax of [ParseRoutes], sorted.
func (r Routes) String() string {
	var parts []string
	if r.Default != "" {
		parts = append(parts, "default="+r.Default)
	}
	for _, k := range sortedKeys(r.Methods) {
		parts = append(parts, "method:"+k+"="+r.Methods[k])
	}
	for _, k := range sortedKeys(r.Channels) {
		parts = append(parts, "channel:"+k+"="+r.Channels[k])
	}
	return strings.Join(parts, ";")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
