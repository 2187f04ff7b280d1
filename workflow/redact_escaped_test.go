package workflow

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEscapedSecretEchoInErrorIsRedacted: an API that rejects a
// credential and echoes it in a JSON error body, with "/" escaped as "\/"
// (PHP's json_encode default, many Java encoders), must not get the vault
// value into the execution's error (which travels in the e2a.error frame,
// the REST answer and GET /api/v1/executions). Base64 API keys routinely
// hold "/".
func TestEscapedSecretEchoInErrorIsRedacted(t *testing.T) {
	const secret = "AKb64/9xQz/Tk3pLw8Vn2Rr+0Yc=" // a base64 API key
	escaped := strings.ReplaceAll(secret, "/", `\/`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		// what PHP's json_encode(["error" => "invalid api key " . $key]) writes
		_, _ = w.Write([]byte(`{"error":"invalid api key ` + strings.ReplaceAll(r.Header.Get("X-Api-Key"), "/", `\/`) + `"}`))
	}))
	t.Cleanup(srv.Close)
	pol := &Policy{}
	if err := pol.AllowHosts("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	v := NewVault()
	if err := v.Add(Credential{ID: "k", Value: Secret(secret)}); err != nil {
		t.Fatal(err)
	}
	e := New(Options{Policy: pol, Vault: v, Clock: newFakeClock(), Cache: NoCache{}})
	wf := lines(op("a", `{"ApiCall":{"method":"GET","url":"`+srv.URL+`/data","headers":{"X-Api-Key":{"credentialRef":{"id":"k"}}},"outputPath":"/workflow/a"}}`), begin("a"))
	out, rec := execRaw(t, e, "agent-1", wf)
	if out.Error == nil {
		t.Fatalf("the API answered 401, the execution succeeded: %+v", out)
	}
	all, _ := json.Marshal(map[string]any{"error": out.Error, "events": rec.events, "results": out.Results})
	if strings.Contains(string(all), escaped) || strings.Contains(string(all), `AKb64\\/9xQz`) {
		t.Fatalf("the vault credential %q reached the execution's error/frames in its JSON-escaped form %q; it must be [redacted]: %s", secret, escaped, all)
	}
}

// TestRedactorEscapedForms: a secret is found as other JSON encoders write
// it inside a string (PHP "\/", .NET "\u002B", Gson "\u003d", escapes of
// any character in either hex case), and text without a backslash is left
// to the literal forms.
func TestRedactorEscapedForms(t *testing.T) {
	r := &redactor{}
	r.add(`ab/c+d=e"f`)
	for _, echo := range []string{
		`ab\/c+d=e\"f`,           // PHP json_encode
		`ab/c\u002Bd=e\"f`,       // .NET System.Text.Json
		`ab/c+d\u003de\u0022f`,   // Gson
		`\u0061b\/c\u002bd=e\"f`, // anything escaped, either case
		`ab/c+d=e"f`,             // as it is
	} {
		if got := r.text("key: " + echo + " end"); got != "key: "+redacted+" end" {
			t.Errorf("%s: redacted to %q", echo, got)
		}
	}
	if got := r.text(`ab\/c+d=e"g`); got != `ab\/c+d=e"g` {
		t.Errorf("another value was changed: %q", got)
	}
}
