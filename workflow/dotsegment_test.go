package workflow

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestEncodedSlashDotSegmentsRefused: a segment that holds a ".." once its
// %2F (or %5C) is decoded passed the dot-segment check, which decoded each
// segment whole ("..%2Fadmin" is "../admin", not ".."): a rule for
// /public* let an agent send /public/..%2Fadmin, in the url's text or as a
// referenced "../admin", which a server or proxy decoding the slash before
// resolving dot segments serves as /admin. Refused as the plain forms are.
func TestEncodedSlashDotSegmentsRefused(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"seg":"../admin","ok":"v1.0/x"}`))
	}))
	defer srv.Close()
	p := &Policy{APIs: []APIRule{{ID: "public-only", Hosts: []string{"127.0.0.1"}, Paths: []string{"/public*"}}}}
	if err := p.compile(); err != nil {
		t.Fatal(err)
	}
	e := New(Options{Policy: p, Cache: NoCache{}})
	for _, u := range []string{"/public/..%2Fadmin", "/public/..%2fadmin", "/public/x%2F..%2F..%2Fadmin", "/public/..%5Cadmin", "/public/.%2Fx"} {
		wf := lines(op("a", `{"ApiCall":{"method":"GET","url":"`+srv.URL+u+`","outputPath":"/workflow/a"}}`), begin("a"))
		if _, res := e.Validate("agent-1", wf); res.Valid || res.Errors[0].Code != CodePermission {
			t.Errorf("%s: valid %v %+v, want a permission error", u, res.Valid, res.Errors)
		}
	}
	// a segment with an encoded slash and no dot segment stays allowed
	if _, res := e.Validate("agent-1", lines(op("a", `{"ApiCall":{"method":"GET","url":"`+srv.URL+`/public/v1.0%2Fx..y","outputPath":"/workflow/a"}}`), begin("a"))); !res.Valid {
		t.Errorf("/public/v1.0%%2Fx..y: %+v, want valid", res.Errors)
	}
	// a reference resolving to "../admin", escaped as ..%2Fadmin
	wf := lines(
		op("v", `{"ApiCall":{"method":"GET","url":"`+srv.URL+`/public/seg","outputPath":"/workflow/s"}}`),
		op("a", `{"ApiCall":{"method":"GET","url":"`+srv.URL+`/public/{/workflow/s/seg}","outputPath":"/workflow/a"}}`),
		begin("v", "a"))
	w, res := e.Validate("agent-1", wf)
	if !res.Valid {
		t.Fatalf("invalid: %+v", res.Errors)
	}
	out, err := e.Execute(context.Background(), "agent-1", "req-1", w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusFailed || out.Error == nil || out.Error.Type != PermissionError || out.Error.OperationID != "a" {
		t.Errorf("a referenced ../admin: outcome %s %+v, want a PermissionError", out.Status, out.Error)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the server got %d calls, want 1 (the first operation's)", n)
	}
}
