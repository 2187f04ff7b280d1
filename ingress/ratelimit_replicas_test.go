package ingress_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// The doors' rate limits across replicas, stream slots and OAuth2 client
// credentials.

const (
	rlrSigningKey = "rlr-signing-key-0123456789abcdef0123456789"
	rlrOldKey     = "rlr-old-signing-key-0123456789abcdef012345"
	rlrSecret     = "cs_rlr_svc_secret_0123456789abcdef"
	rlrAliceKey   = "ak_rlr_alice_0123456789abcdef00"
	rlrBobKey     = "ak_rlr_bob_0123456789abcdef0000"
)

// rlrAuth is API keys for alice and bob and the OAuth2 client svc (its own
// principal), tokens signed with signKey (verify: further keys accepted).
func rlrAuth(t *testing.T, signKey string, verify ...string) *ingress.Auth {
	t.Helper()
	a, err := ingress.NewAuth(&ingress.AuthConfig{
		Schemes: []string{ingress.SchemeAPIKey, ingress.SchemeOAuth2},
		APIKeys: []ingress.Credential{{Principal: "alice", Secret: rlrAliceKey}, {Principal: "bob", Secret: rlrBobKey}},
		OAuth2: ingress.OAuth2Config{SigningKey: signKey, VerifyKeys: verify,
			Clients: []ingress.OAuth2Client{{ClientID: "svc", ClientSecret: rlrSecret}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// rlrToken gets an access token for svc from the token endpoint at base.
func rlrToken(t *testing.T, base string) string {
	t.Helper()
	resp, b := do(t, "POST", base+"/oauth/token", "grant_type=client_credentials&client_id=svc&client_secret="+url.QueryEscape(rlrSecret),
		"Content-Type", "application/x-www-form-urlencoded")
	var tok ingress.TokenResponse
	if resp.StatusCode != 200 || json.Unmarshal(b, &tok) != nil || tok.AccessToken == "" {
		t.Fatalf("token: %d %s", resp.StatusCode, b)
	}
	return tok.AccessToken
}

// TestRateLimitReplicasPerPrincipal two serve replicas on
// one NATS server (separate connections, one limiter each over
// E2A_RATELIMIT), 3 requests a minute: alice (API key), bob and the OAuth2
// client svc (a token from replica A used on both) alternating replicas and
// doors (E2A, A2A JSON-RPC) get exactly 3 each; nobody's refusals or
// admissions consume another's.
func TestRateLimitReplicasPerPrincipal(t *testing.T) {
	srv, nc1 := natstest.RunServer(t)
	nc2, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc2.Close)
	clock := testkit.MidMinute() // both replicas on one clock
	var urls []string
	for _, nc := range []*nats.Conn{nc1, nc2} {
		js, _ := jetstream.New(nc)
		kv, err := js.KeyValue(context.Background(), streams.RateLimitBucket)
		if err != nil {
			t.Fatal(err)
		}
		lim := ingress.NewLimiter(kv, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 3}}, ingress.WithLimiterClock(clock),
			ingress.WithLimiterErrorHook(func(err error) { t.Errorf("limiter fell back: %v", err) }))
		urls = append(urls, frontDoor(t, nc, ingress.WithAuth(rlrAuth(t, rlrSigningKey)), ingress.WithLimiter(lim)))
	}
	tok := rlrToken(t, urls[0])
	creds := map[string][]string{
		"alice": {"X-Api-Key", rlrAliceKey},
		"bob":   {"X-Api-Key", rlrBobKey},
		"svc":   {"Authorization", "Bearer " + tok},
	}
	got := map[string][]int{}
	for i := 0; i < 8; i++ {
		for _, who := range []string{"alice", "svc", "bob"} {
			if who == "bob" && i >= 2 {
				continue // bob stays under the limit while the others are over it
			}
			var resp *http.Response
			if i%2 == 0 {
				resp, _ = do(t, "POST", urls[(i/2)%2]+"/v1/requests", `{"params":{"text":"x"}}`, creds[who]...)
			} else {
				resp, _ = do(t, "POST", urls[(i/2+1)%2]+"/a2a", `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","content":"x"}]}}}`, creds[who]...)
			}
			got[who] = append(got[who], resp.StatusCode)
		}
	}
	admitted := func(codes []int) int {
		n := 0
		for _, c := range codes {
			if c != http.StatusTooManyRequests {
				n++
			}
		}
		return n
	}
	if admitted(got["alice"]) != 3 || admitted(got["svc"]) != 3 || admitted(got["bob"]) != 2 {
		t.Fatalf("admitted per principal across two replicas under 3/min: %v; want alice 3, svc 3, bob 2 (all of his)", got)
	}
}

// TestRateLimitOAuthTokenAcrossReplicasAndRotation a
// token issued by one replica is accepted by another with the same signing
// key; after rotation it is accepted while the old key is a verify key and
// refused 401 invalid_token once the old key is dropped.
func TestRateLimitOAuthTokenAcrossReplicasAndRotation(t *testing.T) {
	srv, nc1 := natstest.RunServer(t)
	connect := func() *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	old := frontDoor(t, nc1, ingress.WithAuth(rlrAuth(t, rlrOldKey)))
	same := frontDoor(t, connect(), ingress.WithAuth(rlrAuth(t, rlrOldKey)))
	rotating := frontDoor(t, connect(), ingress.WithAuth(rlrAuth(t, rlrSigningKey, rlrOldKey)))
	rotated := frontDoor(t, connect(), ingress.WithAuth(rlrAuth(t, rlrSigningKey)))
	tok := rlrToken(t, old)
	for _, c := range []struct {
		name, url string
		want      int
	}{{"same key", same, 202}, {"old key as verify key", rotating, 202}, {"old key dropped", rotated, 401}} {
		resp, b := do(t, "POST", c.url+"/v1/requests", `{"params":{"text":"x"}}`, "Authorization", "Bearer "+tok)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, b, c.want)
		}
		if c.want == 401 && !strings.Contains(strings.Join(resp.Header.Values("WWW-Authenticate"), " "), `error="invalid_token"`) {
			t.Errorf("%s: challenge %q", c.name, resp.Header.Values("WWW-Authenticate"))
		}
	}
	// A token of svc never names another principal: its claims say who it is.
	parts := strings.Split(tok, ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var cl struct {
		Sub      string `json:"sub"`
		ClientID string `json:"client_id"`
	}
	_ = json.Unmarshal(claims, &cl)
	if cl.ClientID != "svc" || cl.Sub != "svc" {
		t.Fatalf("claims %s", claims)
	}
}

// TestRateLimitRequiredScopeEnvClients: with E2A_OAUTH2_REQUIRED_SCOPE set,
// a client configured from E2A_OAUTH2_CLIENTS (which carries no scopes) is
// refused at start, naming the setting. LoadAuth accepted it, and the
// client got tokens from POST /oauth/token that every door refused 403
// insufficient_scope.
func TestRateLimitRequiredScopeEnvClients(t *testing.T) {
	env := map[string]string{
		ingress.EnvAuthSchemes:       "oauth2",
		ingress.EnvOAuth2SigningKey:  rlrSigningKey,
		ingress.EnvOAuth2Clients:     "svc:" + rlrSecret,
		ingress.EnvOAuth2RequiredScp: "agents",
	}
	a, err := ingress.LoadAuth(func(k string) string { return env[k] })
	if errors.Is(err, ingress.ErrAuthConfig) && strings.Contains(err.Error(), ingress.EnvOAuth2RequiredScp) {
		return // refused at start, naming the setting: the operator is told
	}
	if err != nil {
		t.Fatalf("LoadAuth: %v, want ErrAuthConfig naming %s", err, ingress.EnvOAuth2RequiredScp)
	}
	tok, err := a.IssueToken("svc", rlrSecret, "")
	if err != nil {
		t.Fatalf("issue: %v", err)
	}
	r, _ := http.NewRequest("POST", "/a2a", nil)
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	if _, err := a.Authenticate(r); err != nil {
		t.Errorf("E2A_OAUTH2_CLIENTS=svc:… with E2A_OAUTH2_REQUIRED_SCOPE=agents: LoadAuth accepted it, the token endpoint issued "+
			"svc a token (scope %q), and every call with it is refused: %v (forbidden: %v); want the configuration refused "+
			"(a client that can never obtain the required scope) or the token accepted", tok.Scope, err, errors.Is(err, ingress.ErrForbidden))
	}
}

// rlrOpen opens a streamed request and returns once its answer's status
// is in, with the function that aborts it (the client goes away).
func rlrOpen(t *testing.T, method, u, accept, body string, hdr ...string) (int, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return resp.StatusCode, func() { cancel(); resp.Body.Close() }
}

// TestRateLimitStreamSlotsAfterAbortedStreams with one
// stream slot per principal and no agent answering (every stream stays
// open), a client that opens a streamed answer and goes away, 5 times on
// each door (E2A streamed POST and GET …/stream, A2A v0.3 message/stream,
// A2A v1.0 JSON-RPC and HTTP+JSON streams, ACP session/prompt, A2E), gets
// its slot back each time; the slot is also given back on the refused
// paths (another principal's request_id); one principal's open stream
// never takes another's slot.
func TestRateLimitStreamSlotsAfterAbortedStreams(t *testing.T) {
	_, nc := natstest.RunServer(t)
	sl := ingress.NewStreamLimiter(1)
	base := authFront(t, nc, rlrAuth(t, rlrSigningKey), ingress.WithStreamLimiter(sl))
	alice := []string{"X-Api-Key", rlrAliceKey}
	bob := []string{"X-Api-Key", rlrBobKey}
	waitIdle := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sl.WaitIdle(ctx); err != nil {
			t.Fatalf("%s: %d slots still held (alice %d) after the client left", what, sl.Total(), sl.Active("alice"))
		}
	}
	// bob's request, whose id alice then tries to stream (conflict).
	if resp, b := do(t, "POST", base+"/v1/requests?agent=slow", `{"request_id":"rlr-bob-1","params":{"text":"x"}}`, bob...); resp.StatusCode != 202 {
		t.Fatalf("bob: %d %s", resp.StatusCode, b)
	}
	m, b := do(t, "POST", base+"/acp", `{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`, alice...)
	var sess struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &sess) != nil || sess.Result.SessionID == "" {
		t.Fatalf("session/new: %d %s", m.StatusCode, b)
	}
	doors := []struct{ name, method, path, accept, body string }{
		{"E2A POST stream", "POST", "/v1/requests?agent=slow", "text/event-stream", `{"params":{"text":"x"}}`},
		{"E2A GET stream", "GET", "/v1/requests/rlr-alice-1/stream", "text/event-stream", ``},
		{"A2A v0.3 message/stream", "POST", "/a2a?agent=slow", "text/event-stream",
			`{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"role":"user","messageId":"M","parts":[{"kind":"text","text":"x"}]}}}`},
		{"A2A v1.0 JSON-RPC stream", "POST", ingress.A2AV1Path + "?agent=slow", "text/event-stream",
			`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"M","role":"ROLE_USER","parts":[{"text":"x"}]}}}`},
		{"A2A v1.0 HTTP+JSON stream", "POST", ingress.A2AV1Path + "/message:stream?agent=slow", "text/event-stream",
			`{"message":{"messageId":"M","role":"ROLE_USER","parts":[{"text":"x"}]}}`},
		{"ACP session/prompt", "POST", "/acp?agent=slow", "text/event-stream",
			`{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"` + sess.Result.SessionID + `","prompt":[{"type":"text","text":"x"}]}}`},
		{"A2E", "POST", "/a2e?agent=slow", "", `{"a2e":"1.0","id":"c","type":"tool/call/req","req_id":"r","params":{"text":"x"}}` + "\n"},
	}
	if resp, b := do(t, "POST", base+"/v1/requests?agent=slow", `{"request_id":"rlr-alice-1","params":{"text":"x"}}`, alice...); resp.StatusCode != 202 {
		t.Fatalf("alice: %d %s", resp.StatusCode, b)
	}
	for _, d := range doors {
		for i := 0; i < 5; i++ {
			body := strings.ReplaceAll(d.body, `"M"`, `"m-`+strconv.Itoa(i)+`-`+strconv.Itoa(len(d.name))+`"`)
			code, abort := rlrOpen(t, d.method, base+d.path, d.accept, body, alice...)
			if code != 200 || sl.Active("alice") != 1 {
				abort()
				t.Fatalf("%s #%d: status %d, alice holds %d slots (want 1)", d.name, i, code, sl.Active("alice"))
			}
			// Meanwhile bob's slot is his own.
			bcode, babort := rlrOpen(t, "GET", base+"/v1/requests/rlr-bob-1/stream", "text/event-stream", "", bob...)
			babort()
			if bcode != 200 {
				t.Fatalf("%s: bob's stream refused (%d) while alice holds hers", d.name, bcode)
			}
			abort()
			waitIdle(d.name)
		}
	}
	// Refused after the slot was taken: another principal's request id.
	resp, b := do(t, "POST", base+"/v1/requests", `{"request_id":"rlr-bob-1","params":{"text":"x"}}`, append(alice, "Accept", "text/event-stream")...)
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("alice streaming bob's id: %d %s", resp.StatusCode, b)
	}
	waitIdle("conflict")
}

// TestRateLimitBatchRemainingHeader: an admitted JSON-RPC batch is charged
// one request per element (design.md, AUTH.md), and its answer's
// X-RateLimit-Remaining is the count after all of them. It was the count
// after the first element only: under 10 a minute, a first batch of 4
// answered Remaining 9 while 6 were left, and a client pacing itself on
// the header ran into 429s it was told it had room for.
func TestRateLimitBatchRemainingHeader(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(context.Background(), streams.RateLimitBucket)
	if err != nil {
		t.Fatal(err)
	}
	base := frontDoor(t, nc, ingress.WithAuth(rlrAuth(t, rlrSigningKey)),
		ingress.WithLimiter(ingress.NewLimiter(kv, ingress.LimiterConfig{Limits: ingress.RateLimits{PerMinute: 10}}, ingress.WithLimiterClock(testkit.MidMinute()))))
	var batch []string
	for i := 0; i < 4; i++ {
		batch = append(batch, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"tasks/get","params":{"id":"none-`+strconv.Itoa(i)+`"}}`)
	}
	resp, b := do(t, "POST", base+"/a2a", "["+strings.Join(batch, ",")+"]", "X-Api-Key", rlrAliceKey, "Content-Type", "application/json")
	if resp.StatusCode != 200 {
		t.Fatalf("batch: %d %s", resp.StatusCode, b)
	}
	after := resp.Header.Get("X-RateLimit-Remaining")
	next, _ := do(t, "POST", base+"/a2a", batch[0], "X-Api-Key", rlrAliceKey, "Content-Type", "application/json")
	if after != "6" {
		t.Errorf("a batch of 4, the first requests of the window under 10/min: X-RateLimit-Remaining %q, want 6 "+
			"(the next single call answers %q)", after, next.Header.Get("X-RateLimit-Remaining"))
	}
}
