package e2a_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/e2a-pipeline/pipeline/protocols/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// printAnswer prints the status, the headers a client of the front door
// reads and the body of a recorded answer.
func printAnswer(rec *httptest.ResponseRecorder) {
	fmt.Printf("%d %s Retry-After=%q\n", rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Retry-After"))
	fmt.Print(rec.Body.String())
}

// A request accepted by POST /v1/requests is answered 202 with an
// AcceptedBody: the request's id, its pool and the links to read it
// (self: its JSON view, GET; stream: its frames as SSE or NDJSON). Links
// escapes the id for a URL path.
func ExampleAcceptedBody() {
	b, err := json.Marshal(e2a.AcceptedBody{RequestID: "req-1", Pool: "echo", Links: e2a.Links("req-1")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	fmt.Println(e2a.Links("a/b")["self"])
	// Output:
	// {"request_id":"req-1","pool":"echo","links":{"self":"/v1/requests/req-1","stream":"/v1/requests/req-1/stream"}}
	// /v1/requests/a%2Fb
}

// WriteError writes the E2A error body of a refused POST /v1/requests,
// {"error":{code,message,retryable}}; a retryable error tells the client
// to retry after a second (Retry-After) unless the answer has a wait of
// its own.
func ExampleWriteError() {
	rec := httptest.NewRecorder()
	e2a.WriteError(rec, http.StatusNotFound, e2a.CodeUnknownAgent, `agent "nope" is not a known pool`, false)
	printAnswer(rec)

	rec = httptest.NewRecorder()
	e2a.WriteError(rec, http.StatusServiceUnavailable, e2a.CodeUnavailable, "the pipeline could not accept the request; retry later", true)
	printAnswer(rec)
	// Output:
	// 404 application/json Retry-After=""
	// {"error":{"code":"unknown_agent","message":"agent \"nope\" is not a known pool","retryable":false}}
	// 503 application/json Retry-After="1"
	// {"error":{"code":"unavailable","message":"the pipeline could not accept the request; retry later","retryable":true}}
}

// Refuse writes a refusal of the gate (authentication, rate limits, the
// caller's stream slots) in the same E2A error shape, its wait as
// Retry-After in whole seconds.
func ExampleRefuse() {
	rec := httptest.NewRecorder()
	e2a.Refuse(rec, host.Refusal{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "rate limit exceeded", Retryable: true, RetryAfter: 30 * time.Second})
	printAnswer(rec)

	rec = httptest.NewRecorder()
	e2a.Refuse(rec, host.TooManyStreams)
	printAnswer(rec)
	// Output:
	// 429 application/json Retry-After="30"
	// {"error":{"code":"rate_limited","message":"rate limit exceeded","retryable":true}}
	// 429 application/json Retry-After="1"
	// {"error":{"code":"too_many_streams","message":"too many concurrent streams for this principal","retryable":true}}
}
