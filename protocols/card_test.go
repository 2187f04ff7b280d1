package protocols_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/protocols/testdata/echo"
)

// plainCard is a card server of no protocol's: its card names the base
// URL and pool count the host gave it; a client asking ?view=short gets
// the name alone.
type plainCard struct{}

func (plainCard) Card(in host.CardInfo) map[string]any {
	return map[string]any{"name": "plain", "base": in.Base, "version": in.Version, "extended": in.Caller != nil}
}

func (plainCard) CardView(r *http.Request, card map[string]any) (any, error) {
	if r.URL.Query().Get("view") == "short" {
		return map[string]any{"name": card["name"]}, nil
	}
	return card, nil
}

var _ host.CardServer = plainCard{}

// TestCardRole: the agent card is a role like the others. The pipeline's
// registry has one card server (A2A v1.0's entry); a registry without one
// builds and is served without a card (404), the added protocol included;
// a service that only writes a card is a protocol of its own, served at
// /.well-known/ and beside its HTTP paths in the view the client asks
// for, with no A2A member; a second card server is refused.
func TestCardRole(t *testing.T) {
	if p, _, ok := protocols.Default().Card(); !ok || p.Name != protocols.A2AV1 {
		t.Fatalf("the pipeline's card server: %q %v", p.Name, ok)
	}
	card := protocols.Protocol{Name: "plain", Adapter: normalizer.ProtocolE2A, Paths: []string{"/plain"}, Service: plainCard{}}
	if _, err := protocols.New(card, card); !errors.Is(err, protocols.ErrInvalidProtocol) {
		t.Fatalf("the same name twice: %v", err)
	}
	other := card
	other.Name, other.Paths = "other", nil
	if _, err := protocols.New(card, other); !errors.Is(err, protocols.ErrInvalidProtocol) {
		t.Fatalf("two card servers: %v", err)
	}

	bare, err := protocols.New(echo.Protocol)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := bare.Card(); ok {
		t.Fatal("a registry of echo alone has a card server")
	}
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithProtocols(bare)))
	if st, b := get(t, p.URL+"/.well-known/agent-card.json"); st != http.StatusNotFound {
		t.Errorf("no card server: %d %s", st, b)
	}
	postEcho(t, p.URL+echo.Path, `{"text":""}`, http.StatusBadRequest)

	withCard, err := protocols.New(echo.Protocol, card)
	if err != nil {
		t.Fatal(err)
	}
	p = pipetest.Start(t, pipetest.WithIngress(ingress.WithProtocols(withCard), ingress.WithPublicURL("https://agents.example")))
	p.Pool("demo", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error { return w.Complete(nil) }))
	for path, want := range map[string]string{
		"/.well-known/agent-card.json":            `{"base":"https://agents.example","extended":false,"name":"plain","version":"` + ingress.Version + `"}`,
		"/.well-known/agent.json?view=short":      `{"name":"plain"}`,
		"/plain/.well-known/agent-card.json":      `{"base":"https://agents.example","extended":false,"name":"plain","version":"` + ingress.Version + `"}`,
		"/pools/demo/.well-known/agent-card.json": `{"base":"https://agents.example/pools/demo","extended":false,"name":"plain","version":"` + ingress.Version + `"}`,
	} {
		st, b := get(t, p.URL+path)
		var v any
		if st != http.StatusOK || json.Unmarshal(b, &v) != nil {
			t.Errorf("GET %s: %d %s", path, st, b)
			continue
		}
		if got, _ := json.Marshal(v); string(got) != want {
			t.Errorf("GET %s: %s, want %s", path, got, want)
		}
	}
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
