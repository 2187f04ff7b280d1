package securitytest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// secretCorpus hands out one unique secret value per placement, and
// remembers where it was placed.
type secretCorpus struct {
	values map[string]string // value → placement
}

func (c *secretCorpus) v(placement string) string {
	v := fmt.Sprintf("SCANSECRET_%03d_%x", len(c.values), placement)
	if len(v) > 40 {
		v = v[:40]
	}
	c.values[v] = placement
	return v
}

// params returns a params object holding a secret in every key placement
// the policy covers, plus the ordinary fields that must survive.
func (c *secretCorpus) params(proto string) map[string]any {
	p := func(where string) string { return c.v(proto + " " + where) }
	return map[string]any{
		"text":           "scan " + proto,
		"max_tokens":     json.Number("777001"),
		"token_count":    json.Number("777002"),
		"secret":         p("params.secret"),
		"token":          p("params.token"),
		"auth_token":     p("params.auth_token"),
		"session_token":  p("params.session_token"),
		"passwd":         p("params.passwd"),
		"credentials":    p("params.credentials"),
		"apiKey":         p("params.apiKey"),
		"X-Api-Key":      p("params.X-Api-Key"),
		"clientSecret":   p("params.clientSecret"),
		"private_key":    p("params.private_key"),
		"refresh_token":  p("params.refresh_token"),
		"cookie":         p("params.cookie"),
		"credential_ref": "vault:scan-ref",
		"auth":           map[string]any{"user": p("params.auth.user"), "password": p("params.auth.password"), "credentialRef": "vault:scan-auth-ref"},
		"deep":           []any{map[string]any{"a": map[string]any{"b": []any{map[string]any{"Authorization": "Bearer " + p("params.deep…Authorization")}}}}},
		"tool":           map[string]any{"args": []any{"run", "--token", p("params.tool.args --token"), "--api-key=" + p("params.tool.args --api-key="), "--password", p("params.tool.args --password")}},
		"env":            []any{map[string]any{"name": "GITHUB_TOKEN", "value": p("params.env GITHUB_TOKEN")}},
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestSecretPolicy posts a corpus of secret placements through every
// protocol (E2A, A2A, AgentVault, ACP, A2E, workflows) to the pipeline on
// JetStream, waits for E2A_AUDIT to hold every request and frame, then
// scans every message of every stream and KV bucket, the log output and
// the answers for the secret values (raw and base64): zero hits. The
// ordinary fields max_tokens and token_count, the ids and the references
// must survive in the stored envelopes.
func TestSecretPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("security suite: not in -short")
	}
	s := start(t)
	alice := map[string]string{"X-Api-Key": keyAlice}
	c := &secretCorpus{values: map[string]string{}}
	var answers bytes.Buffer
	post := func(name, path string, body string, hdr map[string]string) response {
		t.Helper()
		h := map[string]string{}
		for k, v := range alice {
			h[k] = v
		}
		for k, v := range hdr {
			h[k] = v
		}
		r := s.do(http.MethodPost, path, []byte(body), h)
		answers.Write(r.body)
		if r.err != nil || r.status >= 300 || bytes.Contains(r.body, []byte(`"error"`)) {
			t.Errorf("%s: %s", name, r)
		}
		return r
	}

	// E2A: params, the metadata objects and the envelope's auth block.
	post("e2a", "/v1/requests?agent=echo&wait=true", mustJSON(map[string]any{
		"request_id": "scan-e2a-1", "session_id": "scan-session-keep", "method": "chat.send",
		"params":          c.params("e2a"),
		"channel_context": map[string]any{"cookie": c.v("e2a channel_context.cookie"), "nested": map[string]any{"sessionSecret": c.v("e2a channel_context.nested.sessionSecret")}},
		"a2a_metadata":    map[string]any{"bearer_token": c.v("e2a a2a_metadata.bearer_token")},
		"acp_meta":        map[string]any{"authorization": c.v("e2a acp_meta.authorization")},
		"auth": map[string]any{"bearer_token": c.v("e2a auth.bearer_token"), "api_key_ref": "vault:scan-e2a",
			"extra_headers": map[string]any{"X-Upstream-Key": c.v("e2a auth.extra_headers")}, "_meta": map[string]any{"token": c.v("e2a auth._meta.token")}},
	}), nil)

	// A2A message/send: a data part, message metadata, request metadata.
	post("a2a", "/a2a?agent=echo", mustJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{
		"message": map[string]any{"kind": "message", "messageId": "scan-a2a-m1", "role": "user", "contextId": "scan-ctx-keep",
			"parts":    []any{map[string]any{"kind": "text", "text": "scan a2a"}, map[string]any{"kind": "data", "data": c.params("a2a data")}},
			"metadata": map[string]any{"api_key": c.v("a2a message.metadata.api_key"), "session_token": c.v("a2a message.metadata.session_token")}},
		"metadata": map[string]any{"auth": map[string]any{"token": c.v("a2a params.metadata.auth.token")}},
	}}), nil)

	// AgentVault tasks/send: message metadata (mcp_context).
	post("agentvault", "/a2a?agent=echo", mustJSON(map[string]any{"jsonrpc": "2.0", "id": "av-1", "method": "tasks/send", "params": map[string]any{
		"message": map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "content": "scan agentvault"}},
			"metadata": map[string]any{"mcp_context": c.params("agentvault mcp_context"), "passwd": c.v("agentvault metadata.passwd")}},
	}}), nil)

	// ACP: session/new with MCP servers (env, args, headers), then
	// session/prompt with secrets in _meta and _meta.e2a_params.
	r := post("acp session/new", "/acp?agent=echo", mustJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": map[string]any{
		"cwd": "/tmp", "mcpServers": []any{
			map[string]any{"name": "gh", "command": "mcp-gh",
				"args": []any{"--token", c.v("acp mcp args --token"), "--api-key=" + c.v("acp mcp args --api-key="), "--verbose"},
				"env":  []any{map[string]any{"name": "GITHUB_TOKEN", "value": c.v("acp mcp env GITHUB_TOKEN")}, map[string]any{"name": "DB_URL", "value": c.v("acp mcp env DB_URL")}}},
			map[string]any{"type": "http", "name": "web", "url": "https://mcp.example/x",
				"headers": []any{map[string]any{"name": "Authorization", "value": "Bearer " + c.v("acp mcp headers Authorization")}, map[string]any{"name": "X-Tenant", "value": c.v("acp mcp headers X-Tenant")}}},
		}}}), nil)
	var sess struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.body, &sess); err != nil || sess.Result.SessionID == "" {
		t.Fatalf("acp session/new: %s", r)
	}
	post("acp session/prompt", "/acp?agent=echo", mustJSON(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": map[string]any{
		"sessionId": sess.Result.SessionID, "prompt": []any{map[string]any{"type": "text", "text": "scan acp"}},
		"_meta": map[string]any{"authorization": "Bearer " + c.v("acp _meta.authorization"), "e2a_params": c.params("acp e2a_params")},
	}}), nil)

	// A2E: a message with an auth object and secret fields.
	post("a2e", "/a2e?agent=echo", mustJSON(map[string]any{"a2e": "1.0", "id": "scan-a2e-1", "type": "chat/req", "req_id": "scan-a2e-r1",
		"text": "scan a2e", "max_tokens": json.Number("777001"), "token_count": json.Number("777002"),
		"auth":    map[string]any{"type": "bearer", "token": c.v("a2e auth.token"), "credentialRef": "vault:scan-a2e"},
		"payload": c.params("a2e payload"),
	})+"\n", nil)

	// Workflow: literal credentials in an operation are stripped; the
	// credentialRef usage the executor needs is the normalizer's unit test
	// (ApiCall needs an allowed host, which this suite's executor has not).
	wf := strings.Join([]string{
		mustJSON(map[string]any{"type": "operationUpdate", "operationId": "t", "operation": map[string]any{"TransformData": map[string]any{
			"inputPath": "/workflow", "transform": "map", "outputPath": "/workflow/out",
			"config": map[string]any{"set": map[string]any{"api_token": c.v("workflow TransformData set.api_token"),
				"auth": map[string]any{"password": c.v("workflow TransformData set.auth.password")}, "max_tokens": 777001}},
		}}}),
		mustJSON(map[string]any{"type": "beginExecution", "executionId": "scan-exec-1", "operationOrder": []any{"t"}}),
	}, "\n")
	wr := s.do(http.MethodPost, "/api/v1/workflows/execute", []byte(mustJSON(map[string]any{"workflow": wf})), alice)
	answers.Write(wr.body)
	if wr.err != nil || wr.status >= 500 || !bytes.Contains(wr.body, []byte("execution_id")) {
		t.Errorf("workflow execute: %s", wr)
	}

	// The credential headers themselves, as clients send them.
	post("headers", "/v1/requests?agent=echo&wait=true", `{"request_id":"scan-hdr-1","params":{"text":"scan headers"}}`,
		map[string]string{"Cookie": "session=" + c.v("header Cookie"), "X-Session-Token": c.v("header X-Session-Token")})

	// Every request and frame is copied into E2A_AUDIT before the scan.
	s.waitAudit()

	needles := map[string]string{}
	for v, where := range c.values {
		needles[v] = where
		needles[base64.StdEncoding.EncodeToString([]byte(v))] = where + " (base64)"
		needles[base64.RawURLEncoding.EncodeToString([]byte(v))] = where + " (base64url)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var names []string
	for n := range s.js.StreamNames(ctx).Name() {
		names = append(names, n)
	}
	sort.Strings(names)
	hits := map[string][]string{}
	msgs := 0
	perStream := map[string]int{}
	var stored bytes.Buffer // the stored request envelopes of the run
	for _, name := range names {
		s.eachMessage(name, func(subj string, h nats.Header, data []byte) {
			msgs++
			perStream[name]++
			var hb bytes.Buffer
			_ = http.Header(h).Write(&hb)
			for n, where := range needles {
				if bytes.Contains(data, []byte(n)) || bytes.Contains(hb.Bytes(), []byte(n)) || strings.Contains(subj, n) {
					hits[where] = append(hits[where], name+" "+subj)
				}
			}
			if name == streams.RequestsStream || name == streams.AuditStream {
				stored.Write(data)
				stored.WriteByte('\n')
			}
		})
	}
	for what, text := range map[string]string{"log output": s.logs.String(), "answers": answers.String()} {
		for n, where := range needles {
			if strings.Contains(text, n) {
				hits[where] = append(hits[where], what)
			}
		}
	}
	for where, at := range hits {
		t.Errorf("secret of %s found in %v", where, firstN(at, 5))
	}
	// Proof that the scan read what the run stored: the texts of every
	// protocol, the survivors and the references are in the stored
	// envelopes (E2A_REQUESTS and E2A_AUDIT).
	st := stored.String()
	for _, want := range []string{"scan e2a", "scan a2a", "scan agentvault", "scan acp", "scan a2e", "scan-exec-1", "scan headers",
		`"max_tokens":777001`, `"token_count":777002`, "vault:scan-ref", "vault:scan-auth-ref", "vault:scan-a2e",
		"scan-session-keep", "scan-ctx-keep", sess.Result.SessionID, "[redacted]"} {
		if !strings.Contains(st, want) {
			t.Errorf("%q not in any stored request envelope", want)
		}
	}
	if perStream[streams.AuditStream] == 0 || perStream["KV_"+streams.TasksBucket] == 0 {
		t.Errorf("streams scanned: %v", perStream)
	}
	t.Logf("%d secret placements (%d needles with base64 forms) over 6 protocols; scanned %d messages in %d streams and buckets %v, %d bytes of logs, %d bytes of answers: %d hits",
		len(c.values), len(needles), msgs, len(names), perStream, len(s.logs.String()), answers.Len(), len(hits))
}

// waitAudit waits until E2A_AUDIT holds a copy of every message of
// E2A_REQUESTS and E2A_RESPONSES (its sources are asynchronous).
func (s *suite) waitAudit() {
	s.t.Helper()
	count := func(name string) uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := s.js.Stream(ctx, name)
		if err != nil {
			s.t.Fatalf("%s: %v", name, err)
		}
		return st.CachedInfo().State.Msgs
	}
	testkit.Eventually(s.t, 20*time.Second, "E2A_AUDIT to hold every message of the hot streams", func() bool {
		return count(streams.AuditStream) >= count(streams.RequestsStream)+count(streams.ResponsesStream)
	})
}
