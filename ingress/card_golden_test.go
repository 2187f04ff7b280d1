package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// cardGolden is where the agent cards' golden files are.
var cardGolden = filepath.Join("testdata", "golden", "cards")

// cardPools runs the pools the golden cards list beside p's demo: scribe,
// whose bridge published its name, description, version, skills, modes,
// and a profile that does not stream and requires an extension; plain,
// which published nothing. It returns once ingress lists all three.
func cardPools(t *testing.T, p *pipeline) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conv, err := bridge.OpenConversations(ctx, p.js, streams.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := conv.PublishPool(ctx, bridge.PoolInfo{Pool: "scribe", Kind: "a2a", Upstream: "http://upstream.example",
		Name: "Scribe", Description: "Writes things down.", Version: "2.1.0",
		Skills:     []map[string]any{{"id": "note", "name": "Note", "description": "takes a note", "tags": []string{"notes"}}},
		InputModes: []string{"text/plain"}, OutputModes: []string{"text/markdown"},
		Streaming: false, RequiredExtensions: []string{"urn:example:signed"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	for _, pool := range []string{"scribe", "plain"} {
		go func() { defer func() { done <- struct{}{} }(); _ = agent.Run(ctx, p.nc, pool, demo.New()) }()
	}
	t.Cleanup(func() { cancel(); <-done; <-done })
	testkit.Eventually(t, 10*time.Second, "the three pools listed", func() bool {
		m, err := p.in.Pools(ctx)
		return err == nil && hasPools(m, "demo", "scribe", "plain")
	})
}

func hasPools(m map[string]string, names ...string) bool {
	for _, n := range names {
		if _, ok := m[n]; !ok {
			return false
		}
	}
	return true
}

// cardBody fetches url with the header pairs hdr and returns its body,
// checking its status.
func cardBody(t *testing.T, method, url, body string, status int, hdr ...string) []byte {
	t.Helper()
	resp, b := do(t, method, url, body, hdr...)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return b
}

// indentJSON is b indented, for golden files a person can read: only
// white space is added (members keep their order, strings their escapes).
func indentJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(b), "", "  "); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return append(out.Bytes(), '\n')
}

// TestCardGolden: every agent card the pipeline serves, byte for byte
// (indented): the card of both generations and its v1.0 form, a
// pool's card (published by a bridge, or not), the extended card on
// v1.0 JSON-RPC, HTTP+JSON and gRPC and on v0.3, with authentication (API
// key, bearer, OAuth2, anonymous allowed), rate and stream limits and
// push on; and without authentication, with the base URL from
// X-Forwarded-*; and with the extended card off.
func TestCardGolden(t *testing.T) {
	t.Run("auth", testCardGoldenAuth)
	t.Run("open", testCardGoldenOpen)
	t.Run("off", func(t *testing.T) {
		p := startPipelineWith(t, ingress.WithExtendedCard(false), ingress.WithPublicURL("https://agents.example.com"))
		testkit.Eventually(t, 10*time.Second, "the demo pool listed", func() bool {
			m, err := p.in.Pools(context.Background())
			return err == nil && hasPools(m, "demo")
		})
		testkit.Golden(t, filepath.Join(cardGolden, "off_root.json"),
			indentJSON(t, cardBody(t, "GET", p.url+"/.well-known/agent-card.json", "", http.StatusOK)), *update)
	})
}

func testCardGoldenAuth(t *testing.T) {
	a, err := ingress.NewAuth(&ingress.AuthConfig{Schemes: []string{ingress.SchemeNone, "apiKey", "bearer", "oauth2"},
		APIKeys:      []ingress.Credential{{Principal: "alice", Secret: testKey}, {Principal: "bob", Secret: bobKey}},
		BearerTokens: []ingress.Credential{{Principal: "ci", Secret: "tok_ci_0123456789abcdef0123"}},
		OAuth2:       pipetest.OAuth2(),
		Roles:        map[string][]string{"bob": {"audit"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, nc := natstest.RunServer(t)
	store, err := push.NewStore(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	p := cardPipeline(t, nc, ingress.WithAuth(a), ingress.WithPublicURL("https://agents.example.com"),
		ingress.WithA2AGRPCAddress(":9090"), ingress.WithPushStore(store),
		ingress.WithLimiter(ingress.NewLimiter(nil, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 600}})),
		ingress.WithStreamLimiter(ingress.NewStreamLimiter(4)))
	cardPools(t, p)
	alice := []string{"Content-Type", "application/json", "X-Api-Key", testKey}
	v1 := []string{"A2A-Version", "1.0"}
	getExt := `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		hdr                      []string
	}{
		{"root", "GET", "/.well-known/agent-card.json", "", 200, nil},
		{"root_v1", "GET", "/a2a/v1/.well-known/agent-card.json", "", 200, nil},
		{"root_v1_header", "GET", "/.well-known/agent.json", "", 200, v1},
		// Any client but Go's gets the scopes in the specification's
		// form (TestCardScopesForm).
		{"root_v1_proto", "GET", "/a2a/v1/.well-known/agent-card.json", "", 200, []string{"User-Agent", javaAgent}},
		{"root_proto", "GET", "/.well-known/agent-card.json", "", 200, []string{"User-Agent", "python-httpx/0.28.1"}},
		{"pool_scribe", "GET", "/pools/scribe/.well-known/agent-card.json", "", 200, nil},
		{"pool_scribe_v1", "GET", "/pools/scribe/a2a/v1/.well-known/agent-card.json", "", 200, nil},
		{"pool_plain", "GET", "/pools/plain/a2a/.well-known/agent-card.json", "", 200, nil},
		{"ext_jsonrpc", "POST", "/a2a/v1", getExt, 200, append(slices.Clone(alice), v1...)},
		{"ext_jsonrpc_pool", "POST", "/pools/scribe/a2a/v1", getExt, 200, append(slices.Clone(alice), v1...)},
		{"ext_rest", "GET", "/a2a/v1/extendedAgentCard", "", 200, append(slices.Clone(alice), v1...)},
		{"ext_v03", "POST", "/a2a", `{"jsonrpc":"2.0","id":"c1","method":"agent/getAuthenticatedExtendedCard"}`, 200, alice},
		{"ext_v03_anonymous", "POST", "/a2a", `{"jsonrpc":"2.0","id":"c1","method":"agent/getAuthenticatedExtendedCard"}`, 401,
			[]string{"Content-Type", "application/json"}},
	} {
		b := cardBody(t, c.method, p.url+c.path, c.body, c.status, c.hdr...)
		testkit.Golden(t, filepath.Join(cardGolden, "auth_"+c.name+".json"), indentJSON(t, b), *update)
	}
}

// javaAgent is the User-Agent of the JDK's HTTP client, which the A2A
// Java SDK's client fetches cards with.
const javaAgent = "Java-http-client/21.0.5"

// TestCardScopesForm: the golden v1.0 cards with authentication, in the
// two forms of a security requirement's scopes. Go's HTTP client (the
// official Go SDK's card resolver) gets its SDK's bare lists, which a2a-go
// v2.4.0 reads and a reader of a2a.proto's JSON (protojson here; the Java
// SDK's client reads the same form) refuses; every other client gets the
// specification's {"list": [...]}, which protojson reads and a2a-go
// refuses. Each half fails if the card is served in the other form.
func TestCardScopesForm(t *testing.T) {
	goForm, err := os.ReadFile(filepath.Join(cardGolden, "auth_root_v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	specForm, err := os.ReadFile(filepath.Join(cardGolden, "auth_root_v1_proto.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(goForm, &a2a.AgentCard{}); err != nil {
		t.Errorf("a2a-go does not read the card Go's client gets: %v", err)
	}
	var pb a2apb.AgentCard
	if err := protojson.Unmarshal(specForm, &pb); err != nil {
		t.Errorf("a2a.proto's JSON reader does not read the card other clients get: %v", err)
	} else if len(pb.GetSecurityRequirements()) == 0 || pb.GetSecurityRequirements()[0].GetSchemes()["apiKey"] == nil {
		t.Errorf("no apiKey requirement read: %v", pb.GetSecurityRequirements())
	}
	// Why the two forms: each reader refuses the other's.
	if protojson.Unmarshal(goForm, &a2apb.AgentCard{}) == nil {
		t.Error("a2a.proto's JSON reader reads the bare lists: every client could get them")
	}
	if json.Unmarshal(specForm, &a2a.AgentCard{}) == nil {
		t.Error("a2a-go reads the specification's form: every client could get it")
	}
}

// cardPipeline is startPipelineWith on the connection nc (the push
// store's), with only ingress and egress: the pools are cardPools'.
func cardPipeline(t *testing.T, nc *nats.Conn, opts ...ingress.Option) *pipeline {
	t.Helper()
	eg, err := egress.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	in, err := ingress.New(nc, eg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = agent.Run(ctx, nc, "demo", demo.New()) }()
	t.Cleanup(func() { cancel(); <-done })
	return &pipeline{url: srv.URL, nc: nc, js: js, in: in}
}

func testCardGoldenOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := startPipelineWith(t, ingress.WithA2AGRPCAddress(ln.Addr().String()))
	gs := p.in.A2AGRPC()
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	cardPools(t, p)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	portRE := regexp.MustCompile(`:` + port + `\b`)
	fwd := []string{"X-Forwarded-Proto", "https", "X-Forwarded-Host", "agents.test"}
	golden := func(name string, b []byte) {
		t.Helper()
		b = portRE.ReplaceAll(indentJSON(t, b), []byte(":GRPC_PORT"))
		testkit.Golden(t, filepath.Join(cardGolden, "open_"+name+".json"), b, *update)
	}
	golden("root", cardBody(t, "GET", p.url+"/.well-known/agent-card.json", "", 200, fwd...))
	golden("root_v1", cardBody(t, "GET", p.url+"/.well-known/agent-card.json", "", 200, append(slices.Clone(fwd), "A2A-Version", "1.0")...))
	golden("pool_demo", cardBody(t, "GET", p.url+"/pools/demo/.well-known/agent-card.json", "", 200, fwd...))
	golden("ext_jsonrpc", cardBody(t, "POST", p.url+"/a2a/v1", `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`, 200,
		append(slices.Clone(fwd), "Content-Type", "application/json", "A2A-Version", "1.0")...))
	// gRPC, no public URL: the extended card lists the gRPC interface
	// alone (the HTTP interfaces' address is unknown).
	ctx := tckCtx(t)
	card := &a2a.AgentCard{Capabilities: a2a.AgentCapabilities{ExtendedAgentCard: true},
		SupportedInterfaces: []*a2a.AgentInterface{{URL: ln.Addr().String(), ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: a2a.Version}}}
	c, err := a2aclient.NewFromCard(ctx, card, a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	ext, err := c.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ext)
	golden("ext_grpc", b)
	if strings.Contains(string(b), "agents.test") {
		t.Errorf("the gRPC extended card lists an HTTP interface: %s", b)
	}
}
