package ingress_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// TestExtendedCardScopesForm: the extended card over JSON-RPC and
// HTTP+JSON gives its security requirements' scopes in the form the
// client reads, as the public card does (TestCardScopesForm): a client
// other than Go's (the Java SDK's, here its User-Agent) gets the
// specification's {"list": [...]}, which a2a.proto's JSON reader reads
// with the oauth2 requirement's scope; Go's HTTP client gets the bare
// lists the Go SDK reads. The JSON-RPC answer keeps the call's id. The
// SDK's server wrote the bare lists to every client before.
func TestExtendedCardScopesForm(t *testing.T) {
	p := startPipelineWith(t, ingress.WithAuth(pipetest.KeyAndOAuth(t, map[string]string{"alice": testKey})))
	const call = `{"jsonrpc":"2.0","id":"ext-7","method":"GetExtendedAgentCard","params":{}}`
	read := func(t *testing.T, binding, agent string) []byte {
		t.Helper()
		hdr := []string{"X-API-Key", testKey}
		if agent != "" {
			hdr = append(hdr, "User-Agent", agent)
		}
		var resp *http.Response
		var body []byte
		if binding == "JSONRPC" {
			resp, body = do(t, "POST", p.url+ingress.A2AV1Path, call, append(hdr, "Content-Type", "application/json")...)
		} else {
			resp, body = do(t, "GET", p.url+ingress.A2AV1Path+"/extendedAgentCard", "", hdr...)
		}
		if resp.StatusCode != http.StatusOK || !slices.Contains(resp.Header.Values("Vary"), "User-Agent") {
			t.Fatalf("%s extended card: %d (Vary %q) %s; want 200, Vary: User-Agent", binding, resp.StatusCode, resp.Header.Values("Vary"), body)
		}
		if binding != "JSONRPC" {
			return body
		}
		var out struct {
			ID     string
			Result json.RawMessage
		}
		if err := json.Unmarshal(body, &out); err != nil || out.ID != "ext-7" || out.Result == nil {
			t.Fatalf("JSON-RPC answer %s (%v): want id ext-7 and a result", body, err)
		}
		return out.Result
	}
	for _, binding := range []string{"JSONRPC", "HTTP+JSON"} {
		t.Run(binding, func(t *testing.T) {
			var pb a2apb.AgentCard
			spec := read(t, binding, javaAgent)
			if err := protojson.Unmarshal(spec, &pb); err != nil {
				t.Fatalf("a2a.proto's JSON reader refuses the extended card a Java client gets: %v\n%s", err, spec)
			}
			scopes := map[string][]string{}
			for _, r := range pb.GetSecurityRequirements() {
				for name, l := range r.GetSchemes() {
					scopes[name] = l.GetList()
				}
			}
			_, apiKey := scopes["apiKey"]
			if len(scopes["oauth2"]) != 1 || scopes["oauth2"][0] != "agents" || !apiKey {
				t.Errorf("requirements read %v; want apiKey and oauth2 [agents]", scopes)
			}
			var card a2a.AgentCard
			if err := json.Unmarshal(read(t, binding, ""), &card); err != nil {
				t.Fatalf("a2a-go does not read the extended card Go's client gets: %v", err)
			}
			if len(card.SecurityRequirements) != 2 || len(principalOf(&card)) == 0 {
				t.Errorf("a2a-go read %d requirements, principal %v", len(card.SecurityRequirements), principalOf(&card))
			}
		})
	}
}
