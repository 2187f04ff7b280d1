package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

// execRaw executes wf without validating it first, so the runtime checks
// are tested on their own.
func execRaw(t testing.TB, e *Executor, principal, wf string) (*Outcome, *recorder) {
	t.Helper()
	w, res := Parse(wf)
	if !res.Valid {
		t.Fatalf("parse: %+v", res.Errors)
	}
	rec := &recorder{}
	out, err := e.Execute(context.Background(), principal, "req-ssrf", w, rec)
	if err != nil {
		t.Fatal(err)
	}
	return out, rec
}

func get(u string) string {
	return lines(op("a", `{"ApiCall":{"method":"GET","url":"`+u+`","outputPath":"/workflow/a"}}`), begin("a"))
}

func TestSSRF(t *testing.T) {
	api := newTestAPI(t)
	pu, _ := url.Parse(api.URL)
	port := pu.Port()
	for _, tc := range []struct {
		name     string
		hosts    []string
		nets     []string
		resolver mapResolver
		url      string
		want     string // substring of the error message; "" means success
	}{
		{"loopback not in knowledge base", []string{"api.example.com"}, nil, nil, api.URL + "/data", "not in the API knowledge base"},
		{"loopback behind a wildcard", []string{"*"}, nil, nil, api.URL + "/data", "private, loopback"},
		{"metadata address", []string{"*"}, nil, nil, "http://169.254.169.254/latest/meta-data/", "private, loopback"},
		{"metadata not listed", []string{"api.example.com"}, nil, nil, "http://169.254.169.254/latest/meta-data/", "not in the API knowledge base"},
		{"mapped IPv6 loopback", []string{"*"}, nil, nil, "http://[::ffff:127.0.0.1]:" + port + "/data", "private, loopback"},
		{"IPv6 loopback", []string{"*"}, nil, nil, "http://[::1]:" + port + "/data", "private, loopback"},
		{"unspecified address", []string{"*"}, nil, nil, "http://0.0.0.0:" + port + "/data", "private, loopback"},
		{"name resolving to loopback", []string{"api.test"}, nil, mapResolver{"api.test": {"127.0.0.1"}}, "http://api.test:" + port + "/data", "private, loopback"},
		{"name resolving to private and loopback", []string{"*.corp.test"}, nil, mapResolver{"x.corp.test": {"10.1.2.3", "127.0.0.1"}}, "http://x.corp.test:" + port + "/data", "private, loopback"},
		{"name allowed with its network", []string{"api.test"}, []string{"127.0.0.0/8"}, mapResolver{"api.test": {"127.0.0.1"}}, "http://api.test:" + port + "/data", ""},
		{"explicit IP literal", []string{"127.0.0.1"}, nil, nil, api.URL + "/data", ""},
		{"explicit IP, wrong port", []string{"127.0.0.1:1"}, nil, nil, api.URL + "/data", "not in the API knowledge base"},
		{"subdomain pattern is not the apex", []string{"*.example.com"}, nil, nil, "https://example.com/", "not in the API knowledge base"},
	} {
		pol := &Policy{}
		if err := pol.AllowHosts(tc.hosts...); err != nil {
			t.Fatal(err)
		}
		if err := pol.AllowNets(tc.nets...); err != nil {
			t.Fatal(err)
		}
		opts := Options{Policy: pol, Clock: newFakeClock(), Cache: NoCache{}}
		if tc.resolver != nil {
			opts.Resolver = tc.resolver
		}
		e := New(opts)
		before := api.hit("GET /data")
		out, _ := execRaw(t, e, "agent-1", get(tc.url))
		hits := api.hit("GET /data") - before
		if tc.want == "" {
			if out.Error != nil || hits != 1 {
				t.Errorf("%s: %+v (hits %d)", tc.name, out.Error, hits)
			}
			continue
		}
		if out.Error == nil || out.Error.Type != PermissionError || out.Error.Retryable || !strings.Contains(out.Error.Message, tc.want) {
			t.Errorf("%s: want PermissionError %q, got %+v", tc.name, tc.want, out.Error)
		}
		if hits != 0 {
			t.Errorf("%s: the server was reached", tc.name)
		}
		// validation refuses what the knowledge base refuses, before anything runs
		if strings.Contains(tc.want, "knowledge base") {
			if _, res := e.Validate("agent-1", get(tc.url)); res.Valid {
				t.Errorf("%s: validation passed", tc.name)
			}
		}
	}
}

func TestSSRFRedirects(t *testing.T) {
	api := newTestAPI(t)
	pu, _ := url.Parse(api.URL)
	for _, tc := range []struct {
		name   string
		hosts  []string
		target string
		want   string
	}{
		{"to metadata, not listed", []string{"127.0.0.1"}, "http://169.254.169.254/latest/meta-data/", "redirect refused"},
		{"to metadata behind a wildcard", []string{"127.0.0.1", "*"}, "http://169.254.169.254/latest/meta-data/", "private, loopback"},
		{"to a name resolving privately", []string{"127.0.0.1", "*"}, "http://internal.test/admin", "private, loopback"},
		{"to a file url", []string{"127.0.0.1", "*"}, "file:///etc/passwd", ""},
	} {
		pol := &Policy{}
		_ = pol.AllowHosts(tc.hosts...)
		e := New(Options{Policy: pol, Clock: newFakeClock(), Cache: NoCache{}, Resolver: mapResolver{"internal.test": {"10.0.0.7"}}})
		api.redirectTo.Store(tc.target)
		out, _ := execRaw(t, e, "agent-1", get(api.URL+"/redirect"))
		if out.Error == nil || out.Error.Retryable || (tc.want != "" && !strings.Contains(out.Error.Message, tc.want)) {
			t.Errorf("%s: %+v", tc.name, out.Error)
		}
	}
	// a redirect to another allowed host drops credential headers
	pol := &Policy{}
	_ = pol.AllowHosts("127.0.0.1", "second.test")
	_ = pol.AllowNets("127.0.0.0/8")
	v := NewVault()
	_ = v.Add(Credential{ID: "k", Value: testSecret})
	e := New(Options{Policy: pol, Vault: v, Clock: newFakeClock(), Cache: NoCache{}, Resolver: mapResolver{"second.test": {"127.0.0.1"}}})
	api.redirectTo.Store("http://second.test:" + pu.Port() + "/echo")
	out, _ := execRaw(t, e, "agent-1", lines(op("a", `{"ApiCall":{"method":"GET","url":"`+api.URL+`/redirect","headers":{"X-Api-Key":{"credentialRef":{"id":"k"}}},"outputPath":"/workflow/a"}}`), begin("a")))
	if out.Error != nil {
		t.Fatalf("%+v", out.Error)
	}
	if got := api.lastAuth.Load(); got != "|" {
		t.Errorf("credential followed the redirect: %q", got)
	}
}

func TestCredentialsNeverLeak(t *testing.T) {
	var logs bytes.Buffer
	en := newEnv(t, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	wf := lines(
		op("echo", `{"ApiCall":{"method":"GET","url":"https://api.example.com/echo","headers":{"Authorization":{"credentialRef":{"id":"api-key-123"},"prefix":"Bearer "},"X-Api-Key":{"credentialRef":{"id":"api-key-123"}}},"outputPath":"/workflow/echo"}}`),
		op("copy", `{"TransformData":{"inputPath":"/workflow/echo","transform":"select","config":{"fields":["headers"]},"outputPath":"/workflow/copy"}}`),
		op("fail", `{"ApiCall":{"method":"GET","url":"https://api.example.com/echo-error","headers":{"Authorization":{"credentialRef":{"id":"api-key-123"},"prefix":"Bearer "}},"outputPath":"/workflow/f"}}`),
		begin("echo", "copy", "fail"))
	out, rec := en.run(t, wf)
	// the API did receive the credential
	if got, _ := en.api.lastAuth.Load().(string); got != "Bearer "+testSecret+"|"+testSecret {
		t.Fatalf("credential not sent: %q", got)
	}
	if out.Error == nil || out.Error.OperationID != "fail" {
		t.Fatalf("%+v", out.Error)
	}
	all, _ := json.Marshal(map[string]any{"outcome": out, "events": rec.events, "error": out.Error.Error()})
	for _, s := range []string{testSecret, strings.ToUpper(testSecret)} {
		if bytes.Contains(all, []byte(s)) || bytes.Contains(logs.Bytes(), []byte(s)) {
			t.Fatalf("secret leaked: %s", all)
		}
	}
	if !bytes.Contains(all, []byte(redacted)) {
		t.Errorf("the echoed header was not redacted: %s", all)
	}

	// another principal's credential: refused without revealing anything
	w, res := en.e.Validate("agent-1", strings.ReplaceAll(lines(op("x", `{"ApiCall":{"method":"GET","url":"https://api.example.com/echo","headers":{"X-Api-Key":{"credentialRef":{"id":"other-agent-key"}}},"outputPath":"/workflow/x"}}`), begin("x")), "https://api.example.com", en.api.URL))
	if res.Valid {
		t.Fatal("another principal's credential validated")
	}
	out, _ = en.e.Execute(context.Background(), "agent-1", "r", w, nil)
	if out.Error == nil || out.Error.Type != PermissionError || strings.Contains(fmt.Sprint(out.Error), "zzz-other") {
		t.Errorf("%+v", out.Error)
	}
	// a credential bound to 127.0.0.1 is not sent to another host
	if err := en.vault.check("agent-1", "api-key-123", &url.URL{Scheme: "https", Host: "evil.example.org"}); err == nil {
		t.Error("host binding not enforced")
	}
	// Secret prints redacted
	c := Credential{ID: "x", Value: testSecret}
	b, _ := json.Marshal(c)
	if strings.Contains(fmt.Sprintf("%v %+v %#v %s", c, c, c, b), testSecret) {
		t.Error("Secret printed")
	}
}

func TestVaultLoading(t *testing.T) {
	v := NewVault()
	err := v.LoadEnv([]string{
		"E2A_WORKFLOW_CREDENTIAL_API_KEY_123=s3cret-env-value",
		"E2A_WORKFLOW_CREDHOSTS_API_KEY_123=api.example.com, *.example.org",
		"OTHER=1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if val, e := v.resolve("anyone", "api-key-123", &url.URL{Scheme: "https", Host: "api.example.com"}); e != nil || val != "s3cret-env-value" {
		t.Errorf("env credential: %q %v", val, e)
	}
	if _, e := v.resolve("anyone", "api-key-123", &url.URL{Scheme: "https", Host: "evil.test"}); e == nil {
		t.Error("env host binding not enforced")
	}
	list := v.List("anyone")
	if len(list) != 1 || list[0].ID != "api-key-123" {
		t.Errorf("%+v", list)
	}
	b, _ := json.Marshal(list)
	if strings.Contains(string(b), "s3cret") {
		t.Error("List shows the value")
	}
}
