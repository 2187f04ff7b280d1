package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/jsupstream"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// Review of A2A v1.0 over JSON-RPC and interop with the official SDK
// clients (session 40).

// rawRPC posts one JSON-RPC call to base+path with A2A-Version 1.0 and
// returns the HTTP status and the decoded answer.
func rawRPC(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, b := do(t, http.MethodPost, url, body, "Content-Type", "application/json", "A2A-Version", "1.0")
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: not one JSON object: %d %s", body, resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

// cardJSONRPC is the JSON-RPC interface URL a v1.0 card (as a JSON
// object) lists, "" for none.
func cardJSONRPC(card map[string]any) string {
	ifaces, _ := card["supportedInterfaces"].([]any)
	for _, i := range ifaces {
		m, _ := i.(map[string]any)
		if m["protocolBinding"] == "JSONRPC" && m["protocolVersion"] == "1.0" {
			s, _ := m["url"].(string)
			return s
		}
	}
	return ""
}

// TestA2AV1ExtendedCardOfTenant: GetExtendedAgentCard reads the request's
// tenant like every other v1.0 method (a2a.proto); a pool's card lists its
// gRPC interface with `tenant: <pool>`, which a2a-go/v2's client sends in
// every call, so a client built from the echo pool's card gets the echo
// pool's extended card, and over JSON-RPC a tenant naming another pool than
// the interface's is refused. The tenant was ignored: the pipeline's root
// card answered.
func TestA2AV1ExtendedCardOfTenant(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t, pipetest.WithGRPC())
	p.Pool("demo", whoAmI("demo"))
	p.Pool("echo", whoAmI("echo"))
	ctx := context.Background()
	echoRPC := p.URL + "/pools/echo/a2a/v1"

	// What the pool's own path answers (checked: the pool's card).
	_, out := rawRPC(t, echoRPC, `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`)
	res, _ := out["result"].(map[string]any)
	if got := cardJSONRPC(res); got != echoRPC {
		t.Fatalf("GetExtendedAgentCard at %s: JSON-RPC interface %q, want the pool's own (%v)", echoRPC, got, out["error"])
	}

	// The a2a-go/v2 client built from the echo pool's card, on gRPC
	// (the card's gRPC interface carries tenant "echo").
	card, err := agentcard.DefaultResolver.Resolve(ctx, p.URL+"/pools/echo")
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolGRPC}}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()
	ext, err := c.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{})
	if err != nil {
		t.Fatalf("gRPC GetExtendedAgentCard from the echo pool's card: %v", err)
	}
	// Over gRPC (no HTTP request, no public URL) the card lists the gRPC
	// interface alone: the pool's carries tenant echo.
	var tenant string
	for _, i := range ext.SupportedInterfaces {
		if i.ProtocolBinding == a2a.TransportProtocolGRPC {
			tenant = i.Tenant
		}
	}
	if ext.Name != card.Name || tenant != "echo" {
		t.Errorf("gRPC GetExtendedAgentCard with tenant echo: card %q, gRPC interface tenant %q; want the echo pool's (%q, tenant echo)",
			ext.Name, tenant, card.Name)
	}

	// JSON-RPC: the tenant on the pipeline's own interface, and a tenant
	// naming another pool than the interface's path (InvalidParams for
	// every other method: TestPoolEndpointsGRPCTenant).
	_, out = rawRPC(t, p.URL+"/a2a/v1", `{"jsonrpc":"2.0","id":2,"method":"GetExtendedAgentCard","params":{"tenant":"echo"}}`)
	res, _ = out["result"].(map[string]any)
	if got := cardJSONRPC(res); got != echoRPC {
		t.Errorf("JSON-RPC GetExtendedAgentCard with tenant echo: JSON-RPC interface %q, want the echo pool's %q", got, echoRPC)
	}
	_, out = rawRPC(t, echoRPC, `{"jsonrpc":"2.0","id":3,"method":"GetExtendedAgentCard","params":{"tenant":"demo"}}`)
	if e, _ := out["error"].(map[string]any); e == nil || e["code"] != float64(-32602) {
		t.Errorf("JSON-RPC GetExtendedAgentCard at the echo pool's path with tenant demo: %v, want InvalidParams (-32602)", out)
	}
}

// jsAuthScript: @a2a-js/sdk 1.x's client, built from the card, calls
// ListTasks and GetTask without credentials and prints the error class and JSON-RPC code of each.
const jsAuthScript = `
const [base] = process.argv.slice(1);
const { ClientFactory, ClientFactoryOptions } = await import('@a2a-js/sdk/client');
const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ['JSONRPC'] });
const client = await new ClientFactory(options).createFromUrl(base);
const out = {};
for (const [name, call] of [['list', () => client.listTasks({ pageSize: 10, tenant: '', contextId: '', status: 0, pageToken: '', includeArtifacts: false })],
                            ['get', () => client.getTask({ id: 'some-task', tenant: '' })]]) {
  try { await call(); out[name] = 'ok'; } catch (e) { out[name] = e?.name + ' ' + (e?.envelopeCode ?? ''); }
}
console.log(JSON.stringify(out));
`

// TestA2AV1UnauthenticatedIsNotTaskNotCancelable: a JSON-RPC call on
// /a2a/v1 without credentials is refused (HTTP 401) with a2a-go/v2's
// Unauthenticated code, -31401. It was -32002, AgentVault's authentication
// code, which in A2A v1.0 (§5.4) is TaskNotCancelableError: @a2a-js/sdk
// 1.x's client, which reads the error body of a non-2xx answer, threw
// TaskNotCancelableError at a caller whose API key was missing.
func TestA2AV1UnauthenticatedIsNotTaskNotCancelable(t *testing.T) {
	p := startPipelineWith(t, ingress.WithAuth(aliceAndBob(t)))
	status, out := rawRPC(t, p.url+"/a2a/v1", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`)
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(float64)
	if status != http.StatusUnauthorized || code != -31401 {
		t.Errorf("no credentials on /a2a/v1: HTTP %d, JSON-RPC code %v (%v): an A2A v1.0 error code of another error "+
			"(-32002 is TaskNotCancelableError); want 401 with a code that names no A2A error (a2a-go/v2: -31401 Unauthenticated)",
			status, code, e["message"])
	}
	var js map[string]string
	if err := json.Unmarshal(jsupstream.RunScript(t, jsAuthScript, p.url), &js); err != nil {
		t.Fatal(err)
	}
	for name, got := range js {
		if strings.HasPrefix(got, "TaskNotCancelableError") || strings.HasPrefix(got, "PushNotificationNotSupportedError") {
			t.Errorf("@a2a-js/sdk %s without credentials: %s; want an authentication error, not an A2A task error", name, got)
		}
	}
}

// streamCallIDs are SendStreamingMessage calls with ids of each JSON-RPC
// type and the state their stream must end in.
var streamCallIDs = []struct {
	id    string // the JSON-RPC id as sent
	text  string
	final string
}{
	{`"s-1"`, "hi", "TASK_STATE_COMPLETED"},
	{`7`, "ask:input the sky", "TASK_STATE_INPUT_REQUIRED"},
	{`-3`, "ask:auth the vault", "TASK_STATE_AUTH_REQUIRED"},
}

// TestA2AV1RPCStreamShape: every SSE event of a
// JSON-RPC SendStreamingMessage is a JSON-RPC 2.0 response carrying the
// call's id (string or number) and a result with exactly one of task,
// message, statusUpdate, artifactUpdate; the stream opens with the Task
// and ends right after the final status, also when the turn ends
// interrupted (input-required, auth-required).
func TestA2AV1RPCStreamShape(t *testing.T) {
	p := startPipeline(t)
	for _, c := range streamCallIDs {
		body := `{"jsonrpc":"2.0","id":` + c.id + `,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-` +
			strings.Trim(c.id, `"-`) + `","role":"ROLE_USER","parts":[{"text":"` + c.text + `"}]}}}`
		req, _ := http.NewRequest(http.MethodPost, p.url+"/a2a/v1", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		evs := readSSE(t, resp.Body)
		resp.Body.Close()
		var kinds []string
		last := ""
		for i, ev := range evs {
			var m struct {
				JSONRPC string                     `json:"jsonrpc"`
				ID      json.RawMessage            `json:"id"`
				Result  map[string]json.RawMessage `json:"result"`
				Error   json.RawMessage            `json:"error"`
			}
			if err := json.Unmarshal(ev.data, &m); err != nil || m.JSONRPC != "2.0" || string(m.ID) != c.id || m.Error != nil || len(m.Result) != 1 {
				t.Fatalf("id %s event %d: %s (%v): want a JSON-RPC 2.0 response with id %s and one result member", c.id, i, ev.data, err, c.id)
			}
			for k, v := range m.Result {
				switch k {
				case "task", "message", "statusUpdate", "artifactUpdate":
				default:
					t.Fatalf("id %s event %d: result member %q", c.id, i, k)
				}
				kinds = append(kinds, k)
				if k == "statusUpdate" {
					var su struct {
						Status struct{ State string } `json:"status"`
					}
					_ = json.Unmarshal(v, &su)
					last = su.Status.State
				}
			}
		}
		if len(kinds) < 2 || kinds[0] != "task" || kinds[len(kinds)-1] != "statusUpdate" || last != c.final {
			t.Errorf("id %s: events %v ending %s; want the task first and the %s status last", c.id, kinds, last, c.final)
		}
	}
}

// PoolScript: @a2a-js/sdk 1.x's client built from the URL of a pool
// (its card at <url>/.well-known/agent-card.json) sends, streams, and
// reads the agent card again (getAgentCard: GetExtendedAgentCard, as the
// card declares one); prints the texts and the card names.
const PoolScript = `
import { randomUUID } from 'node:crypto';
const [url] = process.argv.slice(1);
const { ClientFactory, ClientFactoryOptions } = await import('@a2a-js/sdk/client');
const { SendMessageRequest } = await import('@a2a-js/sdk');
const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ['JSONRPC'] });
const client = await new ClientFactory(options).createFromUrl(url);
const req = () => SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'hi' }] } });
const texts = (v, out = []) => { if (Array.isArray(v)) v.forEach((x) => texts(x, out)); else if (v && typeof v === 'object') { if (v.$case === 'text') out.push(v.value); if (typeof v.text === 'string') out.push(v.text); for (const [k, x] of Object.entries(v)) if (k !== 'text') texts(x, out); } return out; };
const first = await client.getAgentCard();
const sent = await client.sendMessage(req());
const evs = [];
for await (const ev of client.sendMessageStream(req())) evs.push(ev);
console.log(JSON.stringify({ card: first.name, sent: texts(sent).join(''), streamed: texts(evs).join('') }));
`

// TestA2AV1JSClientFromPoolCard: @a2a-js/sdk 1.x's
// client given a pool's URL reaches that pool only over JSON-RPC (send
// and stream), and its getAgentCard (GetExtendedAgentCard on the pool's
// interface) answers the pool's card. (The SDK resolves the card relative
// to the URL given: a pool's URL needs its trailing slash.)
func TestA2AV1JSClientFromPoolCard(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t)
	p.Pool("demo", whoAmI("demo"))
	p.Pool("echo", whoAmI("echo"))
	var got struct{ Card, Sent, Streamed string }
	if err := json.Unmarshal(jsupstream.RunScript(t, PoolScript, p.URL+"/pools/echo/"), &got); err != nil {
		t.Fatal(err)
	}
	if got.Card != "E2A Pipeline: echo" || !strings.Contains(got.Sent, "pool echo") || !strings.Contains(got.Streamed, "pool echo") ||
		strings.Contains(got.Sent+got.Streamed, "pool demo") {
		t.Errorf("@a2a-js/sdk from the echo pool's card: %+v; want the echo pool's card and answers only", got)
	}
}
