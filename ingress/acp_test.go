package ingress_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// rpcMsg is any JSON-RPC message of an ACP answer.
type rpcMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		SessionID string         `json:"sessionId"`
		Update    map[string]any `json:"update"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeMsg(t *testing.T, b []byte) rpcMsg {
	t.Helper()
	var m rpcMsg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON-RPC message: %q: %v", b, err)
	}
	if m.JSONRPC != "2.0" {
		t.Fatalf("jsonrpc %q in %s", m.JSONRPC, b)
	}
	return m
}

// ndjsonMsgs reads every non-empty line of r as a JSON-RPC message.
func ndjsonMsgs(t *testing.T, r io.Reader) []rpcMsg {
	t.Helper()
	var out []rpcMsg
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		out = append(out, decodeMsg(t, sc.Bytes()))
	}
	return out
}

// acpCall posts one message and decodes the single JSON-RPC answer.
func (p *pipeline) acpCall(t *testing.T, body string) rpcMsg {
	t.Helper()
	resp := p.post(t, "/acp", "", body)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return decodeMsg(t, b)
}

func (p *pipeline) acpSession(t *testing.T) string {
	t.Helper()
	m := p.acpCall(t, `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/work","mcpServers":[{"name":"fs","command":"mcp-fs","args":[],"env":[{"name":"TOKEN","value":"s3cr3t-value"}]}]}}`)
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.SessionID == "" {
		t.Fatalf("session/new: %+v %s", m.Error, m.Result)
	}
	return res.SessionID
}

// checkTurn checks a demo turn: thought, tool_call, tool_call_update, the
// message chunks (joined: "You said: <text>"), then the result to id.
func checkTurn(t *testing.T, msgs []rpcMsg, sessionID, id, text, stop string) {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatal("no messages")
	}
	var kinds []string
	var said strings.Builder
	for _, m := range msgs[:len(msgs)-1] {
		if m.Method != "session/update" || m.ID != nil || m.Params.SessionID != sessionID {
			t.Fatalf("not a session/update of %s: %+v", sessionID, m)
		}
		k, _ := m.Params.Update["sessionUpdate"].(string)
		if len(kinds) == 0 || kinds[len(kinds)-1] != k {
			kinds = append(kinds, k)
		}
		if k == "agent_message_chunk" {
			c, _ := m.Params.Update["content"].(map[string]any)
			said.WriteString(c["text"].(string))
		}
	}
	last := msgs[len(msgs)-1]
	if string(last.ID) != id || last.Error != nil {
		t.Fatalf("last message: %+v %s", last, last.Result)
	}
	var res struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(last.Result, &res); err != nil || res.StopReason != stop {
		t.Fatalf("result %s, want stopReason %s", last.Result, stop)
	}
	if stop != "end_turn" {
		return
	}
	want := "agent_thought_chunk tool_call tool_call_update agent_message_chunk"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("updates %s, want %s", got, want)
	}
	if said.String() != "You said: "+text {
		t.Fatalf("message %q", said.String())
	}
}

func TestACPInitialize(t *testing.T) {
	p := startPipeline(t)
	m := p.acpCall(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true}}}}`)
	var res struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession        bool            `json:"loadSession"`
			PromptCapabilities map[string]bool `json:"promptCapabilities"`
		} `json:"agentCapabilities"`
		AuthMethods []any `json:"authMethods"`
	}
	if string(m.ID) != "0" || json.Unmarshal(m.Result, &res) != nil {
		t.Fatalf("%+v", m)
	}
	if res.ProtocolVersion != 1 || !res.AgentCapabilities.LoadSession || !res.AgentCapabilities.PromptCapabilities["embeddedContext"] ||
		res.AuthMethods == nil || len(res.AuthMethods) != 0 {
		t.Fatalf("initialize: %s", m.Result)
	}
	// A newer client version is answered with ours.
	m = p.acpCall(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":7}}`)
	if !strings.Contains(string(m.Result), `"protocolVersion":1`) {
		t.Fatalf("%s", m.Result)
	}
}

func TestACPPromptNDJSON(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	for i, accept := range []string{"", "application/x-ndjson", "application/json, application/x-ndjson"} {
		id := fmt.Sprint(40 + i)
		resp := p.post(t, "/acp", accept, `{"jsonrpc":"2.0","id":`+id+`,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"hello"}]}}`)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("%q: %d %s", accept, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		checkTurn(t, ndjsonMsgs(t, resp.Body), sid, id, "hello", "end_turn")
	}
}

func TestACPPromptSSE(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	resp := p.post(t, "/acp", "text/event-stream", `{"jsonrpc":"2.0","id":"p-1","method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"sse please"}]}}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var msgs []rpcMsg
	for _, ev := range readSSE(t, resp.Body) {
		msgs = append(msgs, decodeMsg(t, ev.data))
	}
	checkTurn(t, msgs, sid, `"p-1"`, "sse please", "end_turn")
}

func TestACPCancel(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	for _, params := range []string{
		`"delay_ms":1000`,                          // a pipeline parameter beside the prompt
		`"_meta":{"e2a_params":{"delay_ms":1000}}`, // where ACP clients can put it
	} {
		resp := p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"long"}],`+params+`}}`)
		sc := bufio.NewScanner(resp.Body)
		var msgs []rpcMsg
		canceled := false
		start := time.Now()
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			m := decodeMsg(t, sc.Bytes())
			msgs = append(msgs, m)
			if !canceled && m.Method == "session/update" {
				canceled = true
				c := p.post(t, "/acp", "", `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"`+sid+`"}}`)
				b, _ := io.ReadAll(c.Body)
				if c.StatusCode != http.StatusNoContent || len(b) != 0 {
					t.Fatalf("cancel notification: %d %q", c.StatusCode, b)
				}
			}
		}
		checkTurn(t, msgs, sid, "9", "long", "cancelled")
		// Uncancelled, the turn runs about nine seconds (a frame a second):
		// a margin no slow machine's cancel needs.
		if len(msgs) > 4 || time.Since(start) > 5*time.Second {
			t.Fatalf("%s: the turn ran on after the cancel: %d messages in %s", params, len(msgs), time.Since(start))
		}
	}
	// session/cancel with an id is answered (null); after the turn ended it
	// changes nothing.
	if m := p.acpCall(t, `{"jsonrpc":"2.0","id":10,"method":"session/cancel","params":{"sessionId":"`+sid+`"}}`); m.Error != nil || string(m.Result) != "null" {
		t.Fatalf("%+v %s", m.Error, m.Result)
	}
}

func TestACPSessionLoad(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	resp := p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"remember me"}],"frames":2}}`)
	turn := ndjsonMsgs(t, resp.Body)
	resp = p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"`+sid+`","cwd":"/elsewhere","mcpServers":[]}}`)
	msgs := ndjsonMsgs(t, resp.Body)
	if len(msgs) != len(turn)+1 {
		t.Fatalf("load replayed %d messages for a turn of %d", len(msgs), len(turn))
	}
	first := msgs[0].Params.Update
	if first["sessionUpdate"] != "user_message_chunk" || first["content"].(map[string]any)["text"] != "remember me" {
		t.Fatalf("first update %v", first)
	}
	for i := range turn[:len(turn)-1] {
		a, _ := json.Marshal(turn[i].Params)
		b, _ := json.Marshal(msgs[i+1].Params)
		if string(a) != string(b) {
			t.Fatalf("update %d: replayed %s, streamed %s", i, b, a)
		}
	}
	// The result is a LoadSessionResponse object, not null.
	if last := msgs[len(msgs)-1]; string(last.ID) != "2" || string(last.Result) != "{}" || last.Error != nil {
		t.Fatalf("last %+v %s", last, last.Result)
	}
	// SSE framing too.
	resp = p.post(t, "/acp", "text/event-stream", `{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"`+sid+`","cwd":"/w","mcpServers":[]}}`)
	if evs := readSSE(t, resp.Body); len(evs) != len(msgs) {
		t.Fatalf("SSE load: %d events", len(evs))
	}
	// A fresh session loads empty.
	resp = p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":"`+p.acpSession(t)+`","cwd":"/w","mcpServers":[]}}`)
	if msgs := ndjsonMsgs(t, resp.Body); len(msgs) != 1 || string(msgs[0].Result) != "{}" {
		t.Fatalf("empty load %+v", msgs)
	}
}

func TestACPErrors(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	cases := []struct {
		name, body string
		code       int
		id         string
	}{
		{"parse", `{"jsonrpc":"2.0","id":1,"method":`, -32700, "null"},
		{"version", `{"jsonrpc":"1.0","id":1,"method":"initialize"}`, -32600, "1"},
		{"not an object", `"initialize"`, -32600, "null"},
		{"empty batch", `[]`, -32600, "null"},
		{"unknown method", `{"jsonrpc":"2.0","id":"x","method":"agent/dance","params":{}}`, -32601, `"x"`},
		{"not implemented", `{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}`, -32601, "2"},
		{"initialize without version", `{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}`, -32602, "3"},
		{"new without cwd", `{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"mcpServers":[]}}`, -32602, "4"},
		{"new bad servers", `{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"/w","mcpServers":{}}}`, -32602, "5"},
		{"prompt without session", `{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"x"}]}}`, -32602, "6"},
		{"prompt without prompt", `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"` + sid + `"}}`, -32602, "7"},
		{"params not an object", `{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":[1]}`, -32602, "8"},
		{"unknown session", `{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"x"}]}}`, -32002, "9"},
		{"load unknown", `{"jsonrpc":"2.0","id":10,"method":"session/load","params":{"sessionId":"nope","cwd":"/w","mcpServers":[]}}`, -32002, "10"},
		{"cancel unknown", `{"jsonrpc":"2.0","id":11,"method":"session/cancel","params":{"sessionId":"nope"}}`, -32002, "11"},
		{"authenticate unknown method", `{"jsonrpc":"2.0","id":12,"method":"authenticate","params":{"methodId":"magic"}}`, -32602, "12"},
	}
	for _, c := range cases {
		m := p.acpCall(t, c.body)
		if m.Error == nil || m.Error.Code != c.code || string(m.ID) != c.id {
			t.Errorf("%s: got %+v id %s, want %d id %s", c.name, m.Error, m.ID, c.code, c.id)
		}
	}
	// Notifications get no reply, even when they fail.
	for _, body := range []string{
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"nope"}}`,
		`{"jsonrpc":"2.0","method":"agent/dance"}`,
		`[{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"` + sid + `"}}]`,
	} {
		resp := p.post(t, "/acp", "", body)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
			t.Errorf("%s: %d %q", body, resp.StatusCode, b)
		}
	}
	// Batches: answered per element; streaming methods refused inside one.
	resp := p.post(t, "/acp", "", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}},
		{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"`+sid+`"}},
		{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"x"}]}},
		{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}},
		{"jsonrpc":"2.0","id":4,"method":"nope"}]`)
	var batch []rpcMsg
	if err := json.NewDecoder(resp.Body).Decode(&batch); err != nil || len(batch) != 4 {
		t.Fatalf("batch: %v %+v", err, batch)
	}
	if batch[0].Error != nil || batch[1].Error == nil || batch[1].Error.Code != -32600 || batch[2].Error != nil ||
		!strings.Contains(string(batch[2].Result), "sessionId") || batch[3].Error == nil || batch[3].Error.Code != -32601 {
		t.Fatalf("batch answers: %+v", batch)
	}
	// Oversize body.
	resp = p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"`+strings.Repeat("a", 70<<10)+`"}}`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize: %d", resp.StatusCode)
	}
}

// TestACPPassThrough: methods the pipeline does not answer itself go to the
// agent pool and are answered with the request's final frame.
func TestACPPassThrough(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	m := p.acpCall(t, `{"jsonrpc":"2.0","id":1,"method":"_vendor/echo","params":{"sessionId":"`+sid+`","text":"x","frames":1}}`)
	if m.Error != nil || !strings.Contains(string(m.Result), "content") {
		t.Fatalf("%+v %s", m.Error, m.Result)
	}
	m = p.acpCall(t, `{"jsonrpc":"2.0","id":2,"method":"_vendor/echo","params":{"text":"ext","fail":"boom"}}`)
	if m.Error == nil || m.Error.Code != -32603 {
		t.Fatalf("failed ext: %+v %s", m.Error, m.Result)
	}
}

// TestACPSetModeNotAdvertised: session/new advertises no modes (nor models
// or config options), so their setters are -32601 by the schema, whatever
// the session, and nothing reaches an agent (issue 16: set_mode was
// forwarded as a prompt and answered with the agent's reply).
func TestACPSetModeNotAdvertised(t *testing.T) {
	p := startPipeline(t)
	resp := p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	var created struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil {
		t.Fatal(err)
	}
	var sid string
	_ = json.Unmarshal(created.Result["sessionId"], &sid)
	if _, has := created.Result["modes"]; has || sid == "" {
		t.Fatalf("session/new %v", created.Result)
	}
	for i, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/set_mode","params":{"sessionId":"` + sid + `","modeId":"code"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/set_mode","params":{"sessionId":"nope","modeId":"code"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/set_mode","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/set_model","params":{"sessionId":"` + sid + `","modelId":"m"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/set_config_option","params":{"sessionId":"` + sid + `","configId":"c","value":"v"}}`,
	} {
		m := p.acpCall(t, body)
		if m.Error == nil || m.Error.Code != -32601 || string(m.ID) != "1" || m.Result != nil {
			t.Errorf("%d: %+v %s", i, m.Error, m.Result)
		}
	}
}

// TestACPAuth: auth failures use ACP's -32000 with 401; initialize lists
// the configured methods, and authenticate accepts them.
func TestACPAuth(t *testing.T) {
	_, nc := natstest.RunServer(t)
	reg := prometheus.NewRegistry()
	eg, err := egress.New(nc, egress.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := ingress.LoadAuth(func(k string) string {
		return map[string]string{ingress.EnvAuthSchemes: "apiKey", ingress.EnvAPIKeys: "alice:ak_alice_0123456789abcdef"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	in, err := ingress.New(nc, eg, ingress.WithRegisterer(reg), ingress.WithAuth(auth))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	srv := httptestServer(t, mux)
	post := func(key, body string) (int, rpcMsg) {
		req, _ := http.NewRequest("POST", srv+"/acp", strings.NewReader(body))
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, decodeMsg(t, b)
	}
	// initialize is answered without a credential, with the auth methods
	// (TestACPInitializeWithoutCredential); a session is not.
	code, m := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if code != 200 || !strings.Contains(string(m.Result), `"id":"apiKey"`) {
		t.Fatalf("initialize without a credential: %d %s %+v", code, m.Result, m.Error)
	}
	code, m = post("", `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	if code != http.StatusUnauthorized || m.Error == nil || m.Error.Code != -32000 {
		t.Fatalf("unauthenticated: %d %+v", code, m.Error)
	}
	code, m = post("ak_alice_0123456789abcdef", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	if code != 200 || !strings.Contains(string(m.Result), `"authMethods":[{"description"`) || !strings.Contains(string(m.Result), `"id":"apiKey"`) {
		t.Fatalf("initialize: %d %s", code, m.Result)
	}
	if code, m = post("ak_alice_0123456789abcdef", `{"jsonrpc":"2.0","id":2,"method":"authenticate","params":{"methodId":"apiKey"}}`); code != 200 || m.Error != nil {
		t.Fatalf("authenticate: %d %+v", code, m.Error)
	}
	// Metrics are labelled protocol "acp".
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "e2a_ingress_requests_total" && mf.GetName() != "e2a_ingress_auth_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["protocol"] == "acp" {
				found[mf.GetName()+" "+l["method"]+" "+l["code"]] = true
			}
		}
	}
	for _, want := range []string{"e2a_ingress_requests_total ? 401", "e2a_ingress_requests_total initialize 200",
		"e2a_ingress_requests_total authenticate 200", "e2a_ingress_auth_failures_total  "} {
		if !found[want] {
			t.Errorf("metric %q missing; have %v", want, found)
		}
	}
	// Sessions belong to their principal.
	_, m = post("ak_alice_0123456789abcdef", `{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	var res struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(m.Result, &res)
	auth2, _ := ingress.LoadAuth(func(k string) string {
		return map[string]string{ingress.EnvAuthSchemes: "apiKey", ingress.EnvAPIKeys: "bob:ak_bob_0123456789abcdefgh"}[k]
	})
	in2, err := ingress.New(nc, eg, ingress.WithAuth(auth2))
	if err != nil {
		t.Fatal(err)
	}
	mux2 := http.NewServeMux()
	in2.Register(mux2)
	srv2 := httptestServer(t, mux2)
	req, _ := http.NewRequest("POST", srv2+"/acp", strings.NewReader(`{"jsonrpc":"2.0","id":4,"method":"session/load","params":{"sessionId":"`+res.SessionID+`","cwd":"/w","mcpServers":[]}}`))
	req.Header.Set("X-Api-Key", "ak_bob_0123456789abcdefgh")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if m := decodeMsg(t, b); m.Error == nil || m.Error.Code != -32002 {
		t.Fatalf("another principal's session: %s", b)
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestACPOtherPrincipalSessionRefused: bob can neither prompt nor cancel
// alice's session: -32002 for each, and alice's turn runs to end_turn.
func TestACPOtherPrincipalSessionRefused(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(pipetest.KeyAuth(t,
		map[string]string{"alice": "ak_alice_0123456789abcdef", "bob": "ak_bob_0123456789abcdefgh"}, nil))))
	p.Pool("demo", demo.New())
	post := func(key, body string) *http.Response {
		req, _ := http.NewRequest("POST", p.URL+"/acp", strings.NewReader(body))
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	const alice, bob = "ak_alice_0123456789abcdef", "ak_bob_0123456789abcdefgh"
	b, _ := io.ReadAll(post(alice, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`).Body)
	var created struct {
		Result struct{ SessionID string } `json:"result"`
	}
	if json.Unmarshal(b, &created) != nil || created.Result.SessionID == "" {
		t.Fatalf("session/new: %s", b)
	}
	sid := created.Result.SessionID
	// bob prompts alice's session.
	msgs := ndjsonMsgs(t, post(bob, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"steal"}]}}`).Body)
	if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Code != -32002 {
		t.Fatalf("another principal's session/prompt must be -32002 and nothing else: %+v", msgs)
	}
	// alice's slow turn; bob's cancel (with id) must be -32002 and not end it.
	resp := post(alice, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"mine"}],"delay_ms":100}}`)
	sc := bufio.NewScanner(resp.Body)
	var all []rpcMsg
	sent := false
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		m := decodeMsg(t, sc.Bytes())
		all = append(all, m)
		if !sent && m.Method == "session/update" {
			sent = true
			c := ndjsonMsgs(t, post(bob, `{"jsonrpc":"2.0","id":4,"method":"session/cancel","params":{"sessionId":"`+sid+`"}}`).Body)
			if len(c) != 1 || c[0].Error == nil || c[0].Error.Code != -32002 {
				t.Errorf("another principal's session/cancel must be -32002: %+v", c)
			}
			post(bob, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"`+sid+`"}}`)
		}
	}
	checkTurn(t, all, sid, "3", "mine", "end_turn")
	// bob's load: -32002.
	l := ndjsonMsgs(t, post(bob, `{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"`+sid+`","cwd":"/w","mcpServers":[]}}`).Body)
	if len(l) != 1 || l[0].Error == nil || l[0].Error.Code != -32002 {
		t.Fatalf("another principal's session/load must be -32002 only: %+v", l)
	}
}

// TestACPPromptBlocksValidated: a session/prompt whose content
// blocks are not ACP ContentBlocks (unknown type, missing required fields)
// is invalid params (-32602), not a turn.
func TestACPPromptBlocksValidated(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	for i, block := range []string{
		`{"type":"video","uri":"file:///a.mp4"}`,
		`{"type":"text"}`,
		`{"type":"image"}`,
		`{"type":"resource_link","uri":"file:///a"}`,
		`{"type":"resource","resource":{}}`,
	} {
		resp := p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[`+block+`]}}`)
		msgs := ndjsonMsgs(t, resp.Body)
		last := msgs[len(msgs)-1]
		if len(msgs) != 1 || last.Error == nil || last.Error.Code != -32602 {
			t.Errorf("prompt block %s is not an ACP ContentBlock: want -32602 invalid params, got %d messages, last %+v %s", block, len(msgs), last.Error, last.Result)
		}
	}
}

// TestACPLoadReplaysInterruptedTurn: session/load replays an
// interrupted turn (the agent's question) as it was streamed.
func TestACPLoadReplaysInterruptedTurn(t *testing.T) {
	p := startPipeline(t)
	sid := p.acpSession(t)
	turn := ndjsonMsgs(t, p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"ask:input the weather"}]}}`).Body)
	msgs := ndjsonMsgs(t, p.post(t, "/acp", "", `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"`+sid+`","cwd":"/w","mcpServers":[]}}`).Body)
	if len(msgs) != len(turn)+1 {
		t.Fatalf("load must replay the user message and every streamed update: %d messages for a turn of %d", len(msgs), len(turn))
	}
	for i := range turn[:len(turn)-1] {
		a, _ := json.Marshal(turn[i].Params)
		b, _ := json.Marshal(msgs[i+1].Params)
		if string(a) != string(b) {
			t.Fatalf("update %d: replayed %s, streamed %s", i, b, a)
		}
	}
}
