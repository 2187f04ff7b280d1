package egress

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestStreamReadOfSilentBrokerIsUnavailable: an E2A stream whose reads of
// E2A_RESPONSES get no answer (the NATS server stopped answering this
// connection: a proxy holds what it sends) ends with the error
// unavailable, retryable, which clients' retry logic keys on; it ended
// with timeout (504's code), taken from the deadline of the read's own
// direct gets, as if the client's wait had passed. So is the read of the
// envelope that checks a request's owner before the answer starts
// (answered 504 timeout before).
func TestStreamReadOfSilentBrokerIsUnavailable(t *testing.T) {
	e := startEnv(t)
	u, err := url.Parse(e.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	p := natstest.NewProxy(t, u.Host)
	nc, err := nats.Connect(p.URL(), nats.Name(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	h := e.serveHTTP(t, nc, WithAuthorizer(func(*http.Request) (tenant.Principal, error) {
		return tenant.Principal{ID: "u_001"}, nil // its owner (newEnvelope's)
	}))
	w := e.running(t, "req_silent")
	w.text("a")
	resp := h.get(t, "/v1/requests/req_silent/stream")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	// Frame 0 read (its event's blank line): the reader waits for the
	// next one, and its next read of the stream meets the silence.
	for seen := false; ; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("before frame 0 ended: %v", err)
		}
		seen = seen || strings.HasPrefix(line, "id: 0")
		if seen && line == "\n" {
			break
		}
	}
	p.Hold()
	evs := testkit.Events(testkit.MustReadSSE(t, br))
	if len(evs) != 1 || evs[0].Event != "error" {
		t.Fatalf("after the silence: %+v", evs)
	}
	var body APIError
	if err := json.Unmarshal([]byte(evs[0].Data), &body); err != nil {
		t.Fatal(err)
	}
	if body.Error.Code != CodeUnavailable || !body.Error.Retryable {
		t.Fatalf("error %+v, want %s, retryable", body.Error, CodeUnavailable)
	}
	resp = h.get(t, "/v1/requests/req_silent/stream")
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || body.Error.Code != CodeUnavailable || !body.Error.Retryable {
		t.Fatalf("owner check: %d %+v, want 503 %s, retryable", resp.StatusCode, body.Error, CodeUnavailable)
	}
}
