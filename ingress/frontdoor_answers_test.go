package ingress_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// frontAnswerPaths are the paths of the front door's mux (every pattern
// of ingress.Server.Register and egress's read API, again under a pool's
// path) and some that match none.
var frontAnswerPaths = []string{
	"/", "/nope", "/v1/nope", "/v1/requests", "/v1/requests/some-id", "/a2a", "/a2a/", "/a2a/v1", "/acp", "/a2e",
	"/.well-known/agent-card.json", "/.well-known/agent.json", "/a2a/.well-known/agent-card.json",
	"/a2a/v1/.well-known/agent-card.json",
	"/pools/demo/", "/pools/demo/nope", "/pools/demo/.well-known/agent-card.json", "/pools/demo/v1/requests",
	"/pools/demo/a2a", "/pools/demo/acp", "/pools/demo/a2e", "/pools/bad!pool/a2a",
}

// TestFrontDoorOwnAnswers: every path of the mux, with every method,
// answers an error (404, 405 above all: the ServeMux's own answers were
// text/plain "404 page not found" and "Method Not Allowed") as JSON in its
// door's shape, the E2A error object outside the A2A v1.0 HTTP+JSON
// binding; a 405 names the methods the path takes in Allow.
func TestFrontDoorOwnAnswers(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc)
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	for _, path := range frontAnswerPaths {
		for _, m := range methods {
			resp, b := do(t, m, url+path, "", "Content-Type", "application/json")
			if resp.StatusCode < 400 {
				continue
			}
			ct := resp.Header.Get("Content-Type")
			if m == "POST" && strings.HasSuffix(path, "/a2e") && resp.StatusCode == http.StatusBadRequest && ct == "application/x-ndjson" {
				// The A2E door's own refusal of the empty body: an A2E
				// error line, its shape (protocols/a2e's tests).
				continue
			}
			if !strings.HasPrefix(ct, "application/json") {
				t.Errorf("%s %s: %d %q %q, want a JSON error", m, path, resp.StatusCode, ct, b)
				continue
			}
			if resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
				t.Errorf("%s %s: 405 with no Allow", m, path)
			}
			if m == "HEAD" || resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
				continue
			}
			var e struct {
				Error struct {
					Code      string `json:"code"`
					Message   string `json:"message"`
					Retryable *bool  `json:"retryable"`
				} `json:"error"`
			}
			if json.Unmarshal(b, &e) != nil || e.Error.Code == "" || e.Error.Message == "" || e.Error.Retryable == nil {
				t.Errorf("%s %s: %d %s, want the E2A error object", m, path, resp.StatusCode, b)
			}
		}
	}
}

// TestFrontDoorOwnAnswersAllow: the JSON 405 of a path the mux serves for
// other methods names them (a card: GET and HEAD; GET /: GET, HEAD), and
// an unknown path is 404 not_found.
func TestFrontDoorOwnAnswersAllow(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc)
	for _, c := range []struct{ method, path, allow string }{
		{"POST", "/.well-known/agent-card.json", "GET, HEAD"},
		{"DELETE", "/pools/demo/.well-known/agent-card.json", "GET, HEAD"},
		{"POST", "/", "GET, HEAD"},
		{"DELETE", "/a2a/v1/.well-known/agent-card.json", "GET, HEAD"},
	} {
		resp, b := do(t, c.method, url+c.path, "")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow ||
			!strings.Contains(string(b), `"method_not_allowed"`) {
			t.Errorf("%s %s: %d Allow %q %s, want 405 Allow %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), b, c.allow)
		}
	}
	for _, path := range []string{"/nope", "/pools/demo/nope", "/v1/nope"} {
		resp, b := do(t, "GET", url+path, "")
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"not_found"`) {
			t.Errorf("GET %s: %d %s, want 404 not_found", path, resp.StatusCode, b)
		}
	}
}

// TestFrontDoorQueryTwice: ?agent=a&agent=b chose the first pool silently; every door refuses it
// 400 in its shape, before anything is published. The same value twice
// is one choice.
func TestFrontDoorQueryTwice(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc)
	e2aBody := `{"params":{"text":"hi"}}`
	a2a := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"nope"}}`
	acp := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`
	for _, c := range []struct{ path, body, want string }{
		{"/v1/requests?agent=a&agent=b", e2aBody, `"invalid_request"`},
		{"/v1/requests?wait=false&wait=true", e2aBody, `"invalid_request"`},
		{"/a2a?agent=a&agent=b", a2a, `-32602`},
		{"/acp?agent=a&agent=b", acp, `-32602`},
		{"/a2e?agent=a&agent=b", `{"type":"ping"}`, `"invalid_request"`},
		{"/a2a/v1/tasks/nope?agent=a&agent=b", "", `INVALID_ARGUMENT`},
		// The read API's resume point, ambiguous: it read the first.
		{"/v1/requests/some-id?from=1&from=5", "", `"invalid_request"`},
		{"/v1/requests/some-id/stream?from=1&from=5", "", `"invalid_request"`},
	} {
		method := "POST"
		if c.body == "" {
			method = "GET"
		}
		resp, b := do(t, method, url+c.path, c.body, "Content-Type", "application/json")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.want) || !strings.Contains(string(b), "twice") {
			t.Errorf("%s %s: %d %s, want 400 %s", method, c.path, resp.StatusCode, b, c.want)
		}
	}
	if resp, b := do(t, "POST", url+"/v1/requests?agent=a&agent=a", e2aBody, "Content-Type", "application/json"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("?agent= naming one pool twice: %d %s, want 202", resp.StatusCode, b)
	}
}

// TestFrontDoorQueryMalformed: a query that is no URL-encoded form (an
// escape that is none, a semicolon between parameters) hid the pipeline's
// own ?agent= from every door (URL.Query() drops what it cannot read), so
// the request went to the default pool, another agent than the one named.
// Every door refuses such a query whole, 400 in its shape (JSON-RPC
// -32602 with the call's id, HTTP+JSON INVALID_ARGUMENT / INVALID_PARAMS),
// naming what is wrong, nothing published; under a pool's path too, and
// at the read API, whose ?from= it hid the same way.
func TestFrontDoorQueryMalformed(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	doors := queryDoors()
	e2aBody := `{"params":{"text":"hi"}}`
	answer := func(method, url, body string) (int, string) { return answerWithin(t, method, url, body) }
	for _, q := range []struct{ query, says string }{
		{"agent=echo;x", "semicolon"},
		{"agent=ec%zzho", `invalid URL escape "%zz"`},
		{"x=%zz&agent=echo", `invalid URL escape "%zz"`},
		{"agent=echo&%G1", `invalid URL escape "%G1"`},
	} {
		for _, d := range doors {
			before := streamMsgs(t, js, streams.RequestsStream)
			status, b := answer(d.method, url+d.path+"?"+q.query, d.body)
			if status != http.StatusBadRequest || !strings.Contains(b, d.code) ||
				!strings.Contains(b, "query") || !strings.Contains(b, strings.ReplaceAll(q.says, `"`, `\"`)) ||
				!strings.Contains(b, d.id) {
				t.Errorf("%s %s?%s: %d %.400s; want 400 %s %s saying the query has %s", d.method, d.path, q.query,
					status, b, d.code, d.id, q.says)
			}
			if after := streamMsgs(t, js, streams.RequestsStream); after != before {
				t.Errorf("%s %s?%s: E2A_REQUESTS went from %d to %d messages; want nothing published", d.method, d.path, q.query, before, after)
			}
		}
	}
	// The read API's resume point, hidden the same way (read as none).
	if status, b := answer("GET", url+"/v1/requests/some-id/stream?from=%zz", ""); status != http.StatusBadRequest ||
		!strings.Contains(b, `"invalid_request"`) || !strings.Contains(b, `invalid URL escape \"%zz\"`) {
		t.Errorf("GET /v1/requests/some-id/stream?from=%%zz: %d %s, want 400 invalid_request", status, b)
	}
	// A query read whole is read as before.
	if resp, b := do(t, "POST", url+"/v1/requests?agent=echo&wait=false", e2aBody, "Content-Type", "application/json"); resp.StatusCode != http.StatusAccepted ||
		!strings.Contains(string(b), `"pool":"echo"`) {
		t.Errorf("?agent=echo&wait=false: %d %s, want 202 to pool echo", resp.StatusCode, b)
	}
}

// queryDoor is a request each door reads (its method, path and body), the
// code its refusal of the query carries and the id it echoes.
type queryDoor struct{ name, method, path, body, code, id string }

// queryDoors is one request to every door that reads ?agent= (under a
// pool's path too: those paths begin /pools/echo/) and to the read API.
func queryDoors() []queryDoor {
	rpc := func(id, method, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`
	}
	e2aBody := `{"params":{"text":"hi"}}`
	v03 := rpc(`"q-1"`, "message/send", `{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}`)
	av := rpc(`"av-1"`, "tasks/send", `{"message":{"role":"user","parts":[{"type":"text","content":"hi"}]}}`)
	acp := rpc(`3`, "session/new", `{"cwd":"/tmp","mcpServers":[]}`)
	v1 := `{"message":{"messageId":"m2","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	v1rpc := rpc(`"v1-1"`, "SendMessage", v1)
	a2eLine := `{"a2e":"1.0","id":"c","type":"tool/call/req","req_id":"r","params":{"text":"hi"}}` + "\n"
	return []queryDoor{
		{"e2a", "POST", "/v1/requests", e2aBody, `"invalid_request"`, ""},
		{"e2a pool path", "POST", "/pools/echo/v1/requests", e2aBody, `"invalid_request"`, ""},
		{"a2a v0.3", "POST", "/a2a", v03, `-32602`, `"id":"q-1"`},
		{"agentvault", "POST", "/a2a", av, `-32602`, `"id":"av-1"`},
		{"a2a v0.3 pool path", "POST", "/pools/echo/a2a", v03, `-32602`, `"id":"q-1"`},
		{"agentvault pool path", "POST", "/pools/echo/a2a", av, `-32602`, `"id":"av-1"`},
		{"acp", "POST", "/acp", acp, `-32602`, `"id":3`},
		{"acp pool path", "POST", "/pools/echo/acp", acp, `-32602`, `"id":3`},
		{"a2a v1.0 jsonrpc", "POST", "/a2a/v1", v1rpc, `-32602`, `"id":"v1-1"`},
		{"a2a v1.0 jsonrpc pool path", "POST", "/pools/echo/a2a/v1", v1rpc, `-32602`, `"id":"v1-1"`},
		{"a2a v1.0 rest", "POST", "/a2a/v1/message:send", v1, `"INVALID_PARAMS"`, ""},
		{"a2a v1.0 rest pool path", "POST", "/pools/echo/a2a/v1/message:send", v1, `"INVALID_PARAMS"`, ""},
		{"a2e", "POST", "/a2e", a2eLine, `"invalid_request"`, ""},
		{"a2e pool path", "POST", "/pools/echo/a2e", a2eLine, `"invalid_request"`, ""},
		{"read api", "GET", "/v1/requests/some-id", "", `"invalid_request"`, ""},
		{"read api pool path", "GET", "/pools/echo/v1/requests/some-id", "", `"invalid_request"`, ""},
	}
}

// answerWithin is the status and body of a request, or 0 and the error of
// one not answered within 3 s (a request taken, with no agent to answer
// it, waits for one).
func answerWithin(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, string(b) + " (" + err.Error() + ")"
	}
	return resp.StatusCode, string(b)
}

// TestPoolPathAgentConflict: under /pools/<pool>/ a ?agent= naming another
// pool was silently overridden by the path's pool, so the agent answering
// was not the one the query named. Every door refuses the disagreement 400
// in its shape, naming both, nothing published; ?agent= naming the path's
// own pool is read as before.
func TestPoolPathAgentConflict(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range queryDoors() {
		if !strings.HasPrefix(d.path, "/pools/echo/") {
			continue
		}
		before := streamMsgs(t, js, streams.RequestsStream)
		status, b := answerWithin(t, d.method, url+d.path+"?agent=other", d.body)
		if status != http.StatusBadRequest || !strings.Contains(b, d.code) || !strings.Contains(b, d.id) ||
			!strings.Contains(b, `names pool \"echo\" and ?agent= names \"other\"`) {
			t.Errorf("%s %s?agent=other: %d %.400s; want 400 %s %s naming both pools", d.method, d.path, status, b, d.code, d.id)
		}
		if after := streamMsgs(t, js, streams.RequestsStream); after != before {
			t.Errorf("%s %s?agent=other: E2A_REQUESTS went from %d to %d messages; want nothing published", d.method, d.path, before, after)
		}
	}
	e2aBody := `{"params":{"text":"hi"}}`
	if resp, b := do(t, "POST", url+"/pools/echo/v1/requests?agent=echo&wait=false", e2aBody, "Content-Type", "application/json"); resp.StatusCode != http.StatusAccepted ||
		!strings.Contains(string(b), `"pool":"echo"`) {
		t.Errorf("/pools/echo/v1/requests?agent=echo: %d %s, want 202 to pool echo", resp.StatusCode, b)
	}
}

// TestFrontDoorContentType: a body declared as something else than the
// door's media type was read as JSON at every door but A2A v1.0's; it is
// 415 in the door's shape. A browser can post text/plain, a form or no
// Content-Type cross-site without a preflight, always with Origin: those
// are refused from a browser, while curl -d's form type and no type at all
// stay accepted from other clients (the README's examples).
func TestFrontDoorContentType(t *testing.T) {
	_, nc := natstest.RunServer(t)
	url := frontDoor(t, nc)
	e2aBody := `{"params":{"text":"hi"}}`
	rpc := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`
	a2a := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"nope"}}`
	origin := []string{"Origin", "https://evil.example"}
	for _, c := range []struct {
		path, body, want string
		hdr              []string
	}{
		{"/v1/requests", e2aBody, `"unsupported_media_type"`, []string{"Content-Type", "text/plain"}},
		{"/v1/requests", e2aBody, `"unsupported_media_type"`, []string{"Content-Type", "multipart/form-data; boundary=x"}},
		{"/v1/requests", e2aBody, `"unsupported_media_type"`, append([]string{"Content-Type", "application/x-www-form-urlencoded"}, origin...)},
		{"/v1/requests", e2aBody, `"unsupported_media_type"`, origin},
		{"/pools/demo/v1/requests", e2aBody, `"unsupported_media_type"`, []string{"Content-Type", "text/plain"}},
		{"/a2a", a2a, `-32005`, []string{"Content-Type", "text/plain;charset=UTF-8"}},
		{"/acp", rpc, `-32600`, []string{"Content-Type", "text/plain"}},
		{"/a2e", `{"type":"ping"}`, `"unsupported_media_type"`, []string{"Content-Type", "text/plain"}},
		{"/a2a/v1", a2a, `-32005`, append([]string{"Content-Type", "application/x-www-form-urlencoded"}, origin...)},
		// A content coding no door decodes: a gzip body was answered
		// "not valid UTF-8", a plain one labelled br was read.
		{"/v1/requests", e2aBody, `"unsupported_media_type"`, []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}},
		{"/v1/requests", e2aBody, `"unsupported_media_type"`, []string{"Content-Encoding", "identity, br"}},
		{"/a2a/v1", a2a, `-32005`, []string{"Content-Type", "application/json", "Content-Encoding", "br"}},
	} {
		resp, b := do(t, "POST", url+c.path, c.body, c.hdr...)
		if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(b), c.want) ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/") {
			t.Errorf("POST %s %v: %d %s, want 415 %s", c.path, c.hdr, resp.StatusCode, b, c.want)
		}
		if slices.Contains(c.hdr, "Content-Encoding") && resp.Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("POST %s %v: Accept-Encoding %q, want identity", c.path, c.hdr, resp.Header.Get("Accept-Encoding"))
		}
	}
	for _, c := range []struct {
		path, body string
		hdr        []string
	}{
		{"/v1/requests", e2aBody, []string{"Content-Type", "application/json; charset=utf-8"}},
		{"/v1/requests", e2aBody, []string{"Content-Type", "application/x-www-form-urlencoded"}}, // curl -d
		{"/v1/requests", e2aBody, nil},
		{"/acp", rpc, []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"/a2e", `{"type":"ping"}`, []string{"Content-Type", "application/x-ndjson"}},
		{"/a2a/v1/tasks/nope:cancel", "", origin}, // no body, nothing to read wrongly: a browser app's cancel
		{"/v1/requests", e2aBody, []string{"Content-Type", "application/json", "Content-Encoding", "identity"}},
	} {
		if resp, b := do(t, "POST", url+c.path, c.body, c.hdr...); resp.StatusCode == http.StatusUnsupportedMediaType || resp.StatusCode >= 500 {
			t.Errorf("POST %s %v: %d %s, want it read", c.path, c.hdr, resp.StatusCode, b)
		}
	}
}
