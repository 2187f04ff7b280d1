package securitytest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
)

var (
	fuzzAuthOnce sync.Once
	fuzzAuth     *ingress.Auth
	fuzzToken    string
)

func authForFuzz(t testing.TB) *ingress.Auth {
	fuzzAuthOnce.Do(func() {
		a, err := ingress.NewAuth(&ingress.AuthConfig{
			Schemes:      []string{"apiKey", "bearer", "oauth2"},
			APIKeys:      []ingress.Credential{{Principal: "alice", Secret: keyAlice}},
			BearerTokens: []ingress.Credential{{Principal: "ci", Secret: bearerCI}},
			OAuth2: ingress.OAuth2Config{SigningKey: oauthSigning,
				Clients: []ingress.OAuth2Client{{ClientID: "svc", ClientSecret: oauthSecret}}},
		})
		if err != nil {
			panic(err)
		}
		fuzzAuth = a
		tok, err := a.IssueToken("svc", oauthSecret, "")
		if err != nil {
			panic(err)
		}
		fuzzToken = tok.AccessToken
	})
	return fuzzAuth
}

// FuzzAuthenticate feeds arbitrary Authorization and X-Api-Key values to
// the ingress authenticator: it must not panic, must accept only the exact
// configured credentials, and its errors must never echo the presented
// credential.
func FuzzAuthenticate(f *testing.F) {
	a := authForFuzz(f)
	f.Add("", "")
	f.Add("Bearer "+bearerCI, "")
	f.Add("", keyAlice)
	f.Add("Bearer "+fuzzToken, "")
	f.Add("Bearer "+fuzzToken[:len(fuzzToken)-1], "")
	f.Add("Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "")
	f.Add("Basic YWxpY2U6eA==", "")
	f.Add("bearer  "+bearerCI+" ", keyAlice)
	f.Add("Bearer a.b.c.d", "\x00")
	f.Fuzz(func(t *testing.T, authz, apiKey string) {
		r := httptest.NewRequest(http.MethodPost, "/v1/requests", nil)
		if authz != "" {
			r.Header["Authorization"] = []string{authz}
		}
		if apiKey != "" {
			r.Header["X-Api-Key"] = []string{apiKey}
		}
		p, err := a.Authenticate(r)
		if err == nil {
			if !validCredential(authz, apiKey) {
				t.Fatalf("authenticated %+v with Authorization %q, X-Api-Key %q", p, authz, apiKey)
			}
			return
		}
		msg := err.Error()
		for _, cred := range []string{authz, apiKey} {
			if len(cred) >= 12 && strings.Contains(msg, cred) {
				t.Fatalf("error %q echoes the credential %q", msg, cred)
			}
		}
		if st := ingress.AuthStatus(err); st != http.StatusUnauthorized && st != http.StatusForbidden && st != http.StatusBadRequest {
			t.Fatalf("status %d for %v", st, err)
		}
	})
}

// validCredential reports whether exactly one credential was presented and
// it is a configured one, or an access token whose HMAC-SHA256 signature
// (checked here independently of ingress) is right.
func validCredential(authz, apiKey string) bool {
	if authz == "" {
		return apiKey == keyAlice
	}
	if apiKey != "" {
		return false
	}
	f := strings.Fields(authz)
	if len(f) != 2 || !strings.EqualFold(f[0], "bearer") {
		return false
	}
	if f[1] == bearerCI {
		return true
	}
	parts := strings.Split(f[1], ".")
	if len(parts) != 3 {
		return false
	}
	mac := hmac.New(sha256.New, []byte(oauthSigning))
	mac.Write([]byte(parts[0] + "." + parts[1]))
	return parts[2] == base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// FuzzResumePoint feeds arbitrary Last-Event-ID headers and ?from= values
// to egress.ResumePoint: a sequence ≥ 0 or a bad-request error, never a
// panic.
func FuzzResumePoint(f *testing.F) {
	for _, s := range []string{"", "0", "-1", "-2", "7", " 3 ", "9223372036854775807", "1e3", "0x10", "\x00", "３"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, lastEventID, from string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/requests/x/stream", nil)
		if lastEventID != "" {
			r.Header["Last-Event-Id"] = []string{lastEventID}
		}
		q := r.URL.Query()
		if from != "" {
			q.Set("from", from)
		}
		r.URL.RawQuery = q.Encode()
		n, err := egress.ResumePoint(r)
		if err == nil && n < 0 {
			t.Fatalf("resume point %d for Last-Event-ID %q from %q", n, lastEventID, from)
		}
	})
}

// fuzzDoors are the POST endpoints FuzzFrontDoors reaches (the workflow
// executor is left out: a valid workflow may wait for as long as it says).
var fuzzDoors = []string{"/v1/requests", "/v1/requests?wait=true", "/a2a", "/a2a/v1", "/a2a/v1/message:send",
	"/a2a/v1/message:stream", "/acp", "/a2e", "/api/v1/workflows/validate", "/pools/" + pool + "/a2a/v1"}

// fuzzAccepts are the Accept headers it sends.
var fuzzAccepts = []string{"", "text/event-stream", "application/x-ndjson", "application/json", "*/*"}

// FuzzFrontDoors posts any body to any front door of the pipeline wired as
// `e2a dev` wires it (auth on, as alice), with any Accept: the answer
// comes back (no hang, no dropped connection), never with status 500 or
// a panic in the logs, and is well-formed for its Content-Type (JSON; SSE
// whose every data: is JSON; NDJSON of JSON lines), and a request E2A
// accepted (202) is answered.
func FuzzFrontDoors(f *testing.F) {
	s := start(f)
	s.hc.Timeout = 20 * time.Second
	for i, e := range endpoints() {
		f.Add(e.body("fz-seed"), uint8(doorIndex(e.path)), uint8(i%len(fuzzAccepts)))
	}
	msg := `{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"hi"}]}}`
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":`+msg+`}`), uint8(doorIndex("/a2a/v1")), uint8(1))
	f.Add([]byte(msg), uint8(doorIndex("/a2a/v1/message:stream")), uint8(0))
	f.Add([]byte(`{"workflow":"{\"type\":\"beginExecution\",\"executionId\":\"e\",\"operationOrder\":[]}"}`), uint8(doorIndex("/api/v1/workflows/validate")), uint8(0))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}},{"jsonrpc":"2.0","method":"message/send"}]`), uint8(doorIndex("/a2a")), uint8(3))
	seen := 0
	f.Fuzz(func(t *testing.T, body []byte, door, accept uint8) {
		path := fuzzDoors[int(door)%len(fuzzDoors)]
		hdr := map[string]string{"X-Api-Key": keyAlice, "A2A-Version": "1.0"}
		if a := fuzzAccepts[int(accept)%len(fuzzAccepts)]; a != "" {
			hdr["Accept"] = a
		}
		r := s.do(http.MethodPost, path, body, hdr)
		logs := s.logs.String()
		newLogs := logs[min(seen, len(logs)):]
		seen = len(logs)
		switch {
		case r.err != nil:
			t.Fatalf("POST %s %q: %v", path, body, r.err)
		case r.status == http.StatusInternalServerError:
			t.Fatalf("POST %s %q: %s", path, body, r)
		case panicLogged(newLogs):
			t.Fatalf("POST %s %q: a panic logged: %s", path, body, newLogs)
		}
		if err := wellFormed(r.header.Get("Content-Type"), r.body); err != nil {
			t.Fatalf("POST %s %q: %v: %s", path, body, err, r)
		}
		if r.status == http.StatusAccepted && path == "/v1/requests" {
			s.checkAnswered(t, r.body)
		}
	})
}

// checkAnswered checks that the request an E2A 202 accepted (its body
// accepted) is answered: a terminal state as alice reads it.
func (s *suite) checkAnswered(t *testing.T, accepted []byte) {
	var acc struct {
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(accepted, &acc); err != nil || acc.RequestID == "" {
		t.Fatalf("202 without a request id: %s", accepted)
	}
	r := s.do(http.MethodGet, "/v1/requests/"+url.PathEscape(acc.RequestID)+"?wait=true", nil, map[string]string{"X-Api-Key": keyAlice})
	var view struct {
		State string `json:"state"`
	}
	if r.err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &view) != nil ||
		view.State != "succeeded" && view.State != "failed" && view.State != "input-required" && view.State != "auth-required" {
		t.Fatalf("accepted request %s not answered: %s", acc.RequestID, r)
	}
}

// panicLogged reports whether logs hold a recovered panic: net/http's
// for a handler, the agent runtime's for an agent's handler (not merely
// the word, which a client's input can put in a logged message).
func panicLogged(logs string) bool {
	return strings.Contains(logs, "http: panic serving") || strings.Contains(logs, "handler panicked")
}

// doorIndex is the index of path in fuzzDoors.
func doorIndex(path string) int {
	for i, d := range fuzzDoors {
		if d == path {
			return i
		}
	}
	return 0
}

// wellFormed checks an answer's body against its Content-Type.
func wellFormed(contentType string, body []byte) error {
	mt, _, _ := strings.Cut(contentType, ";")
	switch strings.TrimSpace(mt) {
	case "text/event-stream":
		data, err := conformance.SSEData(body)
		if err != nil {
			return err
		}
		for _, d := range data {
			if !json.Valid(d) {
				return fmt.Errorf("SSE data is not JSON: %s", d)
			}
		}
	case "application/x-ndjson":
		for _, line := range bytes.Split(bytes.TrimSpace(body), []byte{'\n'}) {
			if len(line) > 0 && !json.Valid(line) {
				return fmt.Errorf("NDJSON line is not JSON: %s", line)
			}
		}
	case "application/json":
		if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
			return errors.New("body is not JSON")
		}
	}
	return nil
}

// FuzzReadDoors reads any path and query of the pipeline wired as `e2a
// dev` as alice, after bob and alice each made an E2A request in a task
// and an A2A task: the answer comes back (no hang, no dropped
// connection), never with status 500 or a panic in the logs, is
// well-formed for its Content-Type, and never holds the text of bob's
// requests (the ownership rule, whatever the path).
func FuzzReadDoors(f *testing.F) {
	s := start(f)
	s.hc.Timeout = 20 * time.Second
	alice := map[string]string{"X-Api-Key": keyAlice}
	for who, hdr := range map[string]map[string]string{"bob": {"X-Api-Key": keyBob}, "alice": alice} {
		text := "alice's own text"
		if who == "bob" {
			text = bobCanary
		}
		for _, c := range []struct{ path, body string }{
			{"/v1/requests?wait=true", `{"request_id":"fz-` + who + `-1","task_id":"fz-task-` + who + `","params":{"text":"` + text + `"}}`},
			{"/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"fz-m-` + who + `","taskId":"fz-a2a-` + who + `","role":"user","parts":[{"kind":"text","text":"` + text + `"}]}}}`},
		} {
			if r := s.do(http.MethodPost, c.path, []byte(c.body), hdr); r.err != nil || r.status >= 300 {
				f.Fatalf("%s %s: %s", who, c.path, r)
			}
		}
	}
	for _, p := range []string{
		"v1/requests/fz-bob-1", "v1/requests/fz-alice-1", "v1/requests/fz-bob-1/stream", "v1/requests/fz-alice-1/stream?from=2",
		"v1/requests/fz-alice-1?wait=true", "a2a/v1/tasks", "a2a/v1/tasks/fz-a2a-bob", "a2a/v1/tasks/fz-a2a-alice?historyLength=1",
		"a2a/v1/tasks?contextId=x&pageSize=1", "a2a/v1/tasks?pageToken=MjAyNgpmei1h&pageSize=1", "console/api/requests",
		"console/api/requests?q=fz&limit=5", "console/api/requests?since=2026-01-01T00:00:00Z&until=1h&principal=bob",
		"console/api/requests/fz-bob-1", "console/api/requests/fz-alice-1/stream", "console/api/stats", "console/api/session",
		"console/api/tasks/fz-task-bob/push", "api/v1/executions/fz-bob-1", "api/v1/rate-limit/status", "api/v1/capabilities",
		".well-known/agent-card.json", "pools/" + pool + "/.well-known/agent-card.json", "healthz",
	} {
		f.Add(p, "")
	}
	f.Add("v1/requests/fz-alice-1/stream", "2")
	seen := 0
	f.Fuzz(func(t *testing.T, path, lastEventID string) {
		if _, err := url.Parse(s.base + "/" + path); err != nil || strings.ContainsAny(path, "\r\n#") {
			return // not a request a client can send
		}
		hdr := map[string]string{"X-Api-Key": keyAlice}
		if lastEventID != "" {
			if strings.ContainsFunc(lastEventID, func(c rune) bool { return c < ' ' && c != '\t' || c == 0x7f }) {
				return // not a header value a client can send
			}
			hdr["Last-Event-ID"] = lastEventID
		}
		r := s.do(http.MethodGet, "/"+path, nil, hdr)
		logs := s.logs.String()
		newLogs := logs[min(seen, len(logs)):]
		seen = len(logs)
		switch {
		case r.err != nil:
			t.Fatalf("GET /%s: %v", path, r.err)
		case r.status == http.StatusInternalServerError:
			t.Fatalf("GET /%s: %s", path, r)
		case panicLogged(newLogs):
			t.Fatalf("GET /%s: a panic logged: %s", path, newLogs)
		case bytes.Contains(r.body, []byte(bobCanary)):
			t.Fatalf("GET /%s as alice: bob's text in the answer: %s", path, r)
		}
		if err := wellFormed(r.header.Get("Content-Type"), r.body); err != nil {
			t.Fatalf("GET /%s: %v: %s", path, err, r)
		}
	})
}
