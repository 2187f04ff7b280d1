package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// unavailableBody is what the bindings' error bodies carry (the HTTP+JSON
// binding's google.rpc.Status as error, JSON-RPC's error).
type unavailableBody struct {
	Code    int              `json:"code"`
	Status  string           `json:"status"`
	Message string           `json:"message"`
	Details []map[string]any `json:"details"`
	Data    []map[string]any `json:"data"`
}

// detail is the detail of type typ among ds (nil for none).
func detail(ds []map[string]any, typ string) map[string]any {
	for _, d := range ds {
		if d["@type"] == typ {
			return d
		}
	}
	return nil
}

// v1Post posts body to url (the v1.0 interface), returning the answer's status, headers and decoded error.
func v1Post(t *testing.T, url, body string) (int, http.Header, unavailableBody) {
	t.Helper()
	resp, b := testkit.Do(t, http.MethodPost, url, body, "Content-Type", "application/json")
	var out struct {
		Error unavailableBody `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Errorf("POST %s: %d %q: %v; want a JSON error", url, resp.StatusCode, b, err)
	}
	return resp.StatusCode, resp.Header, out.Error
}

// TestA2AV1UnavailableIsTemporary: a message the pipeline could not
// publish in time (host.ErrBackpressure: JetStream does not take it) is
// a temporary failure, which the gRPC binding answers UNAVAILABLE with a
// RetryInfo (TestGRPCBackpressureIsUnavailable). The HTTP+JSON binding
// answered it 500 INTERNAL and JSON-RPC -32000 with nothing saying it may
// be retried; A2A v1.0 §3.3.2 (System Errors: 503, Retry-After) and §11.6
// (google.rpc.Status, details with @type): 503 UNAVAILABLE, Retry-After
// and a google.rpc.RetryInfo beside the ErrorInfo, on message:send and
// message:stream; JSON-RPC keeps -32000 (ServerError) and carries the
// RetryInfo in error.data. a2a-go/v2's REST client reads it as its
// ErrServerError with the RetryInfo among its typed details.
func TestA2AV1UnavailableIsTemporary(t *testing.T) {
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithPublishTimeout(300*time.Millisecond)))
	p.Pool("demo", demo.New(), agent.WithMetrics(p.Registry))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	send := `{"message":{"messageId":"m-%s","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	if code, _, e := v1Post(t, p.URL+ingress.A2AV1Path+"/message:send", strings.Replace(send, "%s", "ok", 1)); code != http.StatusOK {
		t.Fatalf("message:send: %d %+v", code, e)
	}
	// JetStream stops taking requests.
	if err := p.JS.DeleteStream(ctx, "E2A_REQUESTS"); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/message:send", "/message:stream"} {
		code, h, e := v1Post(t, p.URL+ingress.A2AV1Path+path, strings.Replace(send, "%s", path[1:], 1))
		info := detail(e.Details, "type.googleapis.com/google.rpc.ErrorInfo")
		retry := detail(e.Details, "type.googleapis.com/google.rpc.RetryInfo")
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || e.Code != 503 || e.Status != "UNAVAILABLE" ||
			info == nil || info["reason"] != "SERVER_ERROR" || info["domain"] != a2a.ProtocolDomain ||
			retry == nil || retry["retryDelay"] != "1s" || len(e.Details) != 2 {
			t.Errorf("HTTP+JSON %s JetStream did not take: %d Retry-After %q %+v; want 503, Retry-After: 1, "+
				"UNAVAILABLE with an ErrorInfo SERVER_ERROR and a RetryInfo of 1s", path, code, h.Get("Retry-After"), e)
		}
	}
	code, _, e := v1Post(t, p.URL+ingress.A2AV1Path,
		`{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":`+strings.Replace(send, "%s", "rpc", 1)+`}`)
	info := detail(e.Data, "type.googleapis.com/google.rpc.ErrorInfo")
	retry := detail(e.Data, "type.googleapis.com/google.rpc.RetryInfo")
	if code != http.StatusOK || e.Code != -32000 || info == nil || info["reason"] != "SERVER_ERROR" ||
		retry == nil || retry["retryDelay"] != "1s" || len(e.Data) != 2 {
		t.Errorf("JSON-RPC SendMessage JetStream did not take: %d %+v; want -32000 with an ErrorInfo SERVER_ERROR "+
			"and a RetryInfo of 1s in data", code, e)
	}

	// a2a-go/v2's HTTP+JSON transport.
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(p.URL+ingress.A2AV1Path, a2a.TransportProtocolHTTPJSON)},
		a2aclient.WithRESTTransport(http.DefaultClient))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()
	_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))})
	var ae *a2a.Error
	if !errors.Is(err, a2a.ErrServerError) || !errors.As(err, &ae) || retryDetail(ae) != "1s" {
		t.Errorf("a2a-go REST SendMessage JetStream did not take: %v (%#v); want ErrServerError with a RetryInfo of 1s", err, ae)
	}
}

// retryDetail is the retryDelay of e's google.rpc.RetryInfo ("" for none).
func retryDetail(e *a2a.Error) string {
	if e == nil {
		return ""
	}
	for _, d := range e.TypedDetails {
		if d.TypeURL == "type.googleapis.com/google.rpc.RetryInfo" {
			s, _ := d.Value["retryDelay"].(string)
			return s
		}
	}
	return ""
}
