package a2abridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
)

// extensionsSeen is a server in front of a pipeline's A2A doors: it serves
// the pipeline's root card with only the interfaces keep keeps (all of
// them, v0.3's url aside, are removed when keep is nil: a v0.3 card),
// pointing at itself, forwards every other request to the pipeline, and
// records the extensions each asks for, as "header: value".
type extensionsSeen struct {
	URL  string
	mu   sync.Mutex
	seen []string
}

func newExtensionsSeen(t *testing.T, p *pipetest.Pipeline, keep func(binding, version string) bool) *extensionsSeen {
	t.Helper()
	target, _ := url.Parse(p.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	s := &extensionsSeen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/.well-known/agent-card.json" {
			_, _ = w.Write(rewriteCard(t, p.URL, s.URL, keep))
			return
		}
		s.mu.Lock()
		for _, name := range []string{"A2A-Extensions", "X-A2A-Extensions"} {
			for _, v := range r.Header.Values(name) {
				s.seen = append(s.seen, name+": "+v)
			}
		}
		s.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Seen is what the calls asked for, each once.
func (s *extensionsSeen) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.seen)
	slices.Sort(out)
	return slices.Compact(out)
}

// rewriteCard is the card at base with the interfaces keep keeps, its
// URLs at self.
func rewriteCard(t *testing.T, base, self string, keep func(binding, version string) bool) []byte {
	resp, err := http.Get(base + "/.well-known/agent-card.json")
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var card map[string]any
	if err := json.Unmarshal(b, &card); err != nil {
		t.Error(err)
		return nil
	}
	ifaces, _ := card["supportedInterfaces"].([]any)
	card["supportedInterfaces"] = slices.DeleteFunc(ifaces, func(i any) bool {
		m, _ := i.(map[string]any)
		b, _ := m["protocolBinding"].(string)
		v, _ := m["protocolVersion"].(string)
		return keep == nil || !keep(b, v)
	})
	if keep == nil {
		delete(card, "supportedInterfaces")
		delete(card, "additionalInterfaces")
	}
	b, _ = json.Marshal(card)
	return []byte(strings.ReplaceAll(string(b), base, self))
}

// toolDeltas are the answer's tool deltas, each as its type and its
// member key ("type:value").
func toolDeltas(a pipetest.Answer, key string) []string {
	var tools []string
	for _, f := range a.Frames {
		if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaTool {
			td, _ := c.Delta.(map[string]any)
			typ, _ := td["type"].(string)
			v, _ := td[key].(string)
			tools = append(tools, typ+":"+v)
		}
	}
	return tools
}

// TestUpstreamExtensionActivated: the upstream is the pipeline's own A2A
// door (e2a dev's, the demo agent its default pool), which sends thoughts
// and tool parts only to clients activating the trpc interaction-spec
// extension its card declares. The bridge activates it on its calls, on
// every binding (A2A-Extensions; X-A2A-Extensions on v0.3), so that the
// bridged pool's answer has the demo's reasoning and its tool call and
// result, as the root pool's has; it had only the text. The card's other
// extensions (task replay, pools), which the bridge does not read, are not
// asked for, nor is a client's own extension passed on.
func TestUpstreamExtensionActivated(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t)
	p.Pool("demo", demo.New())
	bridgePool(t, p, "travel", p.URL)
	v1 := func(binding a2a.TransportProtocol) func(string, string) bool {
		return func(b, v string) bool { return b == string(binding) && v == string(a2a.Version) }
	}
	for _, c := range []struct {
		pool, header string
		keep         func(binding, version string) bool
	}{
		{"rpc", "A2A-Extensions", v1(a2a.TransportProtocolJSONRPC)},
		{"rest", "A2A-Extensions", v1(a2a.TransportProtocolHTTPJSON)},
		{"legacy", "X-A2A-Extensions", nil},
	} {
		s := newExtensionsSeen(t, p, c.keep)
		bridgePool(t, p, c.pool, s.URL)
		t.Run(c.pool, func(t *testing.T) {
			for _, pool := range []string{"travel", c.pool} {
				a := p.Ask(t, pool, `{"params":{"text":"Lisbon"}}`)
				if got := a.Text(e2a.DeltaReasoning); got != "Thinking about: Lisbon" {
					t.Errorf("%s: reasoning %q, want the demo's thought", pool, got)
				}
				want := []string{"function_call:" + demo.ToolName, "function_response:" + demo.ToolName}
				if got := toolDeltas(a, "name"); !slices.Equal(got, want) {
					t.Errorf("%s: tool deltas %v, want %v", pool, got, want)
				}
				if got := a.Text(e2a.DeltaText); got != "You said: Lisbon" {
					t.Errorf("%s: text %q, want the demo's", pool, got)
				}
			}
			if c.pool == "rpc" {
				// A client of the bridged pool activating an extension
				// of its own.
				sp := a2aclient.ServiceParams{}
				sp.Append(a2a.SvcParamExtensions, "https://example.com/ext/client")
				ctx := a2aclient.AttachServiceParams(context.Background(), sp)
				// The pool's interface, not its card: the pipeline's
				// list of pools, which the card reads, is cached from
				// before the pool started.
				cl, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{
					a2a.NewAgentInterface(p.URL+"/pools/"+c.pool+a2av1.Path, a2a.TransportProtocolJSONRPC)})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = cl.Destroy() }()
				msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Porto"))
				if _, err := cl.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg}); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := s.Seen(), []string{c.header + ": " + a2aproto.InteractionExtension}; !slices.Equal(got, want) {
				t.Errorf("the upstream was asked for %q, want %q", got, want)
			}
		})
	}
}
