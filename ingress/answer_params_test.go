package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestAnswerBooleanParamsRefused: ?wait= and ?projections= that are no
// boolean (strconv.ParseBool: 1, t, true, 0, f, false, …) are 400
// bad_request on POST /v1/requests, nothing published, and on the read
// API (GET /v1/requests/{id} and its /stream, HEAD too). They were read as
// false: ?wait=yes answered 202 at once where the client asked to wait
// (and the POST published the request), ?projections=on left the frames'
// projections out.
func TestAnswerBooleanParamsRefused(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js, _ := jetstream.New(nc)
	url := frontDoor(t, nc)
	body := `{"params":{"text":"x"}}`
	badRequest := func(what string, resp *http.Response, b []byte, param string) {
		t.Helper()
		if resp.StatusCode != http.StatusBadRequest || resp.Request.Method != http.MethodHead &&
			(!strings.Contains(string(b), `"bad_request"`) || !strings.Contains(string(b), param+" must be true or false")) {
			t.Errorf("%s: %d %s, want 400 bad_request naming %s", what, resp.StatusCode, b, param)
		}
	}
	for _, c := range []struct{ query, param string }{{"wait=yes", "wait"}, {"projections=on", "projections"}, {"projections=1&wait=no", "wait"}} {
		q := c.query
		before := streamMsgs(t, js, streams.RequestsStream)
		resp, b := do(t, "POST", url+"/v1/requests?"+q, body, "Content-Type", "application/json")
		badRequest("POST /v1/requests?"+q, resp, b, c.param)
		if after := streamMsgs(t, js, streams.RequestsStream); after != before {
			t.Errorf("POST /v1/requests?%s: %d request(s) published, want none", q, after-before)
		}
	}
	// A request answered: its reads end at once.
	resp, b := do(t, "POST", url+"/v1/requests?wait=0&projections=FALSE", body, "Content-Type", "application/json")
	var acc struct {
		RequestID string `json:"request_id"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(b, &acc) != nil || acc.RequestID == "" {
		t.Fatalf("POST ?wait=0&projections=FALSE: %d %s, want 202", resp.StatusCode, b)
	}
	natstest.PublishBurst(t, nc, acc.RequestID, 0, 0, natstest.Frame(acc.RequestID, 0, true))
	for _, c := range []struct{ method, path, param string }{
		{"GET", "/v1/requests/" + acc.RequestID + "?wait=yes", "wait"},
		{"GET", "/v1/requests/" + acc.RequestID + "?projections=on", "projections"},
		{"GET", "/v1/requests/" + acc.RequestID + "/stream?projections=on", "projections"},
		{"HEAD", "/v1/requests/" + acc.RequestID + "/stream?projections=on", "projections"},
	} {
		resp, b := do(t, c.method, url+c.path, "", "Accept", "text/event-stream")
		badRequest(c.method+" "+c.path, resp, b, c.param)
	}
	for _, path := range []string{"/v1/requests/" + acc.RequestID + "?wait=1&projections=f", "/v1/requests/" + acc.RequestID + "/stream?projections=0"} {
		if resp, b := do(t, "GET", url+path, "", "Accept", "text/event-stream"); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s, want 200", path, resp.StatusCode, b)
		}
	}
}
