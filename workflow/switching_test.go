package workflow

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestSwitchingProtocolsAnswerTimesOut: an API that answers an ApiCall "101
// Switching Protocols" and then sends nothing has the call end at its
// timeout, a retryable TimeoutError, like any other API that stops
// answering. net/http ends a 101's body, the raw connection, with neither
// the request's context nor its deadline: the step read it for ever, the
// execution and its worker's slot held.
func TestSwitchingProtocolsAnswerTimesOut(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { testkit.SwitchProtocols(w) }))
	defer api.Close()
	u, _ := url.Parse(api.URL)
	pol := &Policy{APIs: []APIRule{{ID: "local", Hosts: []string{u.Host}}}}
	if err := pol.compile(); err != nil {
		t.Fatal(err)
	}
	e := New(Options{Policy: pol, Cache: NoCache{}, Retry: RetryPolicy{MaxRetries: -1}})
	wf := lines(op("a", `{"ApiCall":{"method":"GET","url":"`+api.URL+`/x","outputPath":"/workflow/a","timeout":300}}`), begin("a"))
	done := make(chan *Outcome, 1)
	go func() {
		out, _ := execRaw(t, e, "alice", wf)
		done <- out
	}()
	out := testkit.Receive(t, done, 20*time.Second, "the execution of a call answered 101 and then nothing")
	if out.Status != StatusFailed || out.Error == nil || out.Error.Type != TimeoutError || !out.Error.Retryable {
		t.Fatalf("status %s, error %+v; want failed with a retryable TimeoutError", out.Status, out.Error)
	}
}
