package ingress_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/subjects"
)

const stdioAliceKey, stdioBobKey = "ak_alice_0123456789abcdef", "ak_bob_0123456789abcdefgh"

// stdioLines is a stdio connection driven line by line: call writes a
// message and returns every line read up to the answer to its id.
type stdioLines struct {
	t   *testing.T
	in  io.WriteCloser
	out chan []byte
}

// serveStdioAs serves ACP over stdio from a server of its own on nc (as
// `e2a acp` does beside a pipeline), with opts and the stdio credential
// cred (none when nil).
func serveStdioAs(t *testing.T, nc *nats.Conn, cred http.Header, opts ...ingress.Option) *stdioLines {
	t.Helper()
	eg, err := egress.New(nc, egress.WithRegisterer(prometheus.NewRegistry()), egress.WithProjections(protocols.FillProjections))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ingress.New(nc, eg, append([]ingress.Option{ingress.WithRegisterer(prometheus.NewRegistry())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if cred != nil {
		if ctx, err = ingress.WithStdioCredential(ctx, cred); err != nil {
			t.Fatal(err)
		}
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ingress.ServeACPStdio(ctx, inR, outW, srv)
		_ = outW.Close()
	}()
	t.Cleanup(func() { _ = inW.Close(); <-done })
	c := &stdioLines{t: t, in: inW, out: make(chan []byte, 256)}
	go func() {
		defer close(c.out)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			c.out <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	return c
}

func (c *stdioLines) call(id, msg string) []rpcMsg {
	c.t.Helper()
	if _, err := io.WriteString(c.in, msg+"\n"); err != nil {
		c.t.Fatal(err)
	}
	var msgs []rpcMsg
	for {
		select {
		case b, ok := <-c.out:
			if !ok {
				c.t.Fatalf("stdout closed waiting for %s", id)
			}
			m := decodeMsg(c.t, b)
			msgs = append(msgs, m)
			if string(m.ID) == id {
				return msgs
			}
		case <-time.After(20 * time.Second):
			c.t.Fatalf("no answer to %s", id)
		}
	}
}

// postACP posts one ACP message with key and returns the answer's messages.
func postACP(t *testing.T, url, key, body string) (int, []rpcMsg) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/acp", strings.NewReader(body))
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, ndjsonMsgs(t, resp.Body)
}

// said is what the messages' session/update notifications carry as
// text, user and agent chunks alike.
func said(msgs []rpcMsg) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.Method != "session/update" {
			continue
		}
		if c, ok := m.Params.Update["content"].(map[string]any); ok {
			s, _ := c["text"].(string)
			b.WriteString(s + "|")
		}
	}
	return b.String()
}

func lastError(msgs []rpcMsg) int {
	if len(msgs) == 0 || msgs[len(msgs)-1].Error == nil {
		return 0
	}
	return msgs[len(msgs)-1].Error.Code
}

// TestStdioCredentialActsAsPrincipal: `e2a acp` beside a pipeline with
// API keys acts as the principal of its stdio credential
// (ingress.WithStdioCredential), exactly as over HTTP: alice's stdio can
// neither read nor prompt bob's session (-32002, nothing replayed), and
// her stdio turn is hers (user_id alice), which her HTTP session/load
// shows and bob's cannot read.
func TestStdioCredentialActsAsPrincipal(t *testing.T) {
	auth := pipetest.KeyAuth(t, map[string]string{"alice": stdioAliceKey, "bob": stdioBobKey}, nil)
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(auth)))
	p.Pool("demo", demo.New())

	// bob's session, over HTTP.
	_, m := postACP(t, p.URL, stdioBobKey, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	var created struct{ SessionID string }
	if len(m) != 1 || json.Unmarshal(m[0].Result, &created) != nil || created.SessionID == "" {
		t.Fatalf("bob's session/new: %+v", m)
	}
	bobSID := created.SessionID
	if _, m = postACP(t, p.URL, stdioBobKey, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+bobSID+`","prompt":[{"type":"text","text":"bob-secret"}]}}`); lastError(m) != 0 {
		t.Fatalf("bob's prompt: %+v", m[len(m)-1])
	}

	reqSubj, _ := subjects.Request("demo", "x")
	sub, err := p.NC.SubscribeSync(reqSubj[:strings.LastIndex(reqSubj, ".")+1] + "*")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	alice := serveStdioAs(t, p.NC, http.Header{"X-Api-Key": {stdioAliceKey}}, ingress.WithAuth(auth))
	alice.call("1", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	msgs := alice.call("2", `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"`+bobSID+`","cwd":"/w","mcpServers":[]}}`)
	if lastError(msgs) != jsonrpc.CodeACPResourceNotFound || strings.Contains(said(msgs), "bob-secret") || len(msgs) != 1 {
		t.Fatalf("alice's stdio session/load of bob's session must be -32002 and nothing else: said %q, %d lines, last %+v %s",
			said(msgs), len(msgs), msgs[len(msgs)-1].Error, msgs[len(msgs)-1].Result)
	}
	msgs = alice.call("3", `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"`+bobSID+`","prompt":[{"type":"text","text":"alice-in-bobs"}]}}`)
	if lastError(msgs) != jsonrpc.CodeACPResourceNotFound || len(msgs) != 1 {
		t.Fatalf("alice's stdio session/prompt of bob's session must be -32002 only: %d lines, last %+v", len(msgs), msgs[len(msgs)-1].Error)
	}
	if _, m = postACP(t, p.URL, stdioBobKey, `{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"`+bobSID+`","cwd":"/w","mcpServers":[]}}`); strings.Contains(said(m), "alice-in-bobs") {
		t.Fatalf("alice's stdio prompt became a turn of bob's session: %q", said(m))
	}

	// alice's own session over stdio: her turn, shown to her over HTTP.
	msgs = alice.call("4", `{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
	if json.Unmarshal(msgs[len(msgs)-1].Result, &created) != nil || created.SessionID == "" {
		t.Fatalf("alice's stdio session/new: %+v", msgs)
	}
	aliceSID := created.SessionID
	msgs = alice.call("5", `{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"`+aliceSID+`","prompt":[{"type":"text","text":"alice-stdio"}]}}`)
	if lastError(msgs) != 0 || !strings.Contains(string(msgs[len(msgs)-1].Result), "end_turn") {
		t.Fatalf("alice's stdio prompt: %+v %s", msgs[len(msgs)-1].Error, msgs[len(msgs)-1].Result)
	}
	found := false
	for !found {
		nm, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("alice's stdio request was not seen on the requests subjects: %v", err)
		}
		env, err := e2a.FromJSON(nm.Data)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(nm.Data), "alice-stdio") {
			continue
		}
		found = true
		if env.UserID != "alice" {
			t.Fatalf("alice's stdio turn carries user_id %q, want alice", env.UserID)
		}
		if strings.Contains(string(nm.Data), stdioAliceKey) || strings.Contains(strings.Join(nm.Header.Values("X-Api-Key"), ""), stdioAliceKey) {
			t.Fatal("the stdio credential was published")
		}
	}
	if _, m = postACP(t, p.URL, stdioAliceKey, `{"jsonrpc":"2.0","id":6,"method":"session/load","params":{"sessionId":"`+aliceSID+`","cwd":"/w","mcpServers":[]}}`); lastError(m) != 0 || !strings.Contains(said(m), "alice-stdio") {
		t.Fatalf("alice's HTTP session/load must show her stdio turn: said %q, last %+v", said(m), m[len(m)-1].Error)
	}
	if _, m = postACP(t, p.URL, stdioBobKey, `{"jsonrpc":"2.0","id":7,"method":"session/load","params":{"sessionId":"`+aliceSID+`","cwd":"/w","mcpServers":[]}}`); lastError(m) != jsonrpc.CodeACPResourceNotFound {
		t.Fatalf("bob's HTTP session/load of alice's stdio session must be -32002: %+v", m)
	}
}

// TestStdioCredentialCheckedPerMessage: the stdio credential is checked
// for each message, so an access token that expires mid-session stops
// working (-32000), as it would over HTTP.
func TestStdioCredentialCheckedPerMessage(t *testing.T) {
	clk := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return clk }
	auth, err := ingress.NewAuth(&ingress.AuthConfig{OAuth2: ingress.OAuth2Config{
		SigningKey: "base64:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 40))), TokenTTL: "10m",
		Clients: []ingress.OAuth2Client{{ClientID: "svc-a", ClientSecret: "cs_svc_a_secret_0123456789"}},
	}}, ingress.WithAuthClock(func() time.Time { return now() }))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := auth.IssueToken("svc-a", "cs_svc_a_secret_0123456789", "")
	if err != nil {
		t.Fatal(err)
	}
	p := pipetest.Start(t)
	c := serveStdioAs(t, p.NC, http.Header{"Authorization": {"Bearer " + tok.AccessToken}}, ingress.WithAuth(auth))
	if msgs := c.call("1", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`); lastError(msgs) != 0 {
		t.Fatalf("initialize with a fresh token: %+v", msgs[len(msgs)-1].Error)
	}
	clk = clk.Add(time.Hour)
	msgs := c.call("2", `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}`)
	if lastError(msgs) != jsonrpc.CodeACPAuthRequired {
		t.Fatalf("initialize with an expired token must be -32000: %+v", msgs[len(msgs)-1].Error)
	}
	if strings.Contains(msgs[0].Error.Message, tok.AccessToken) {
		t.Fatal("the token was echoed")
	}
}

// TestStdioCredentialValidated: WithStdioCredential takes one credential
// header (X-Api-Key or Authorization), refusing anything else with
// ErrInvalidOption, never quoting the secret.
func TestStdioCredentialValidated(t *testing.T) {
	for name, h := range map[string]http.Header{
		"nil":   nil,
		"empty": {},
		"blank": {"X-Api-Key": {" "}},
		"two":   {"X-Api-Key": {"ak_secret_1"}, "Authorization": {"Bearer ak_secret_2"}},
		"twice": {"X-Api-Key": {"ak_secret_1", "ak_secret_2"}},
		"other": {"Cookie": {"ak_secret_1"}},
	} {
		_, err := ingress.WithStdioCredential(context.Background(), h)
		if !errors.Is(err, ingress.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		} else if strings.Contains(err.Error(), "ak_secret") {
			t.Errorf("%s: the secret is in the error: %v", name, err)
		}
	}
	if _, err := ingress.WithStdioCredential(context.Background(), http.Header{"Authorization": {"Bearer tok"}}); err != nil {
		t.Fatal(err)
	}
}

// TestACPHTTPRefusalEchoesID: a refusal of the gate over HTTP (here, no
// credential) answers the call's id when the body's is readable, as /a2a
// does, so the client's call returns; a batch or an unreadable body gets
// id null.
func TestACPHTTPRefusalEchoesID(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithAuth(pipetest.KeyAuth(t, map[string]string{"alice": stdioAliceKey}, nil))))
	for body, want := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"method":"authenticate","params":{"methodId":"apiKey"}}`:          `7`,
		`{"jsonrpc":"2.0","id":"x-1","method":"session/new","params":{"cwd":"/","mcpServers":[]}}`: `"x-1"`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"initialize"}`:                                     `null`,
		`[{"jsonrpc":"2.0","id":8,"method":"initialize","params":{"protocolVersion":1}}]`:          `null`,
		`{"jsonrpc":"2.0","id":9,`: `null`,
	} {
		code, m := postACP(t, p.URL, "", body)
		if code != http.StatusUnauthorized || len(m) != 1 || m[0].Error == nil || m[0].Error.Code != jsonrpc.CodeACPAuthRequired {
			t.Fatalf("%s: status %d, %+v", body, code, m)
		}
		if got := string(m[0].ID); got != want {
			t.Errorf("%s: refused to id %s, want %s", body, got, want)
		}
	}
}
