package streams_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestRequestsStreamTakesOnlyRequestSubjects: E2A_REQUESTS stores only
// e2a.req.<pool>.<request_id>. A publish on e2a.req.<pool> (no request
// token) or on more tokens (a request id with a dot, not encoded) was
// stored and acknowledged, but no pool's consumer reads it (their filter
// is e2a.req.<pool>.>… of one token: e2a.req.<pool>.<id>) and the audit's
// source (e2a.req.*.*) does not copy it: a direct integrator lost the
// request without an error. The server now refuses such a publish at
// once. An E2A_REQUESTS of an earlier version (e2a.req.>) is narrowed by
// Apply in place, keeping what it holds.
func TestRequestsStreamTakesOnlyRequestSubjects(t *testing.T) {
	_, _, js := startServer(t)
	cfg := testConfig()
	old := cfg.RequestsStreamConfig()
	old.Subjects = []string{"e2a.req.>"} // as earlier versions made it
	if _, err := js.CreateStream(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	ok, _ := subjects.Request("demo", "r-1")
	if _, err := js.Publish(ctx(t), ok, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	rep, err := streams.Apply(ctx(t), js, cfg)
	if err != nil {
		t.Fatalf("Apply over an earlier E2A_REQUESTS: %v\n%s", err, rep)
	}
	s, _ := js.Stream(ctx(t), streams.RequestsStream)
	if info, _ := s.Info(ctx(t)); info.State.Msgs != 1 {
		t.Errorf("E2A_REQUESTS holds %d messages after Apply, want the 1 it held", info.State.Msgs)
	}
	for _, subj := range []string{"e2a.req.demo", "e2a.req.demo.a.b", "e2a.req.demo.a.b.c"} {
		if _, err := js.Publish(ctx(t), subj, []byte(`{"request_id":"a.b"}`), jetstream.WithMsgID(subj)); err == nil {
			t.Errorf("a publish on %s was acknowledged by %s: no pool reads it, the audit does not copy it", subj, streams.RequestsStream)
		}
	}
	ok2, _ := subjects.Request("demo", "a.b") // the same id, its token encoded
	if _, err := js.Publish(ctx(t), ok2, []byte(`{"request_id":"a.b"}`)); err != nil {
		t.Errorf("a request on %s: %v", ok2, err)
	}
}
