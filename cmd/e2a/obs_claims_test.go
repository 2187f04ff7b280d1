package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// obsCollector is an OTLP/HTTP receiver keeping every span exported to it.
type obsCollector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *obsCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *obsCollector) all() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

// obsProc is an e2a process whose whole output is kept.
type obsProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	exited chan struct{}
}

func (p *obsProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

func startObsProc(t *testing.T, env []string, args ...string) (*obsProc, string) {
	t.Helper()
	p := &obsProc{cmd: exec.Command(e2aBin, args...), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	base := make(chan string, 1)
	re := devAddr
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil && len(base) == 0 {
				base <- m[1]
			}
		}
	}()
	go func() { _ = p.cmd.Wait(); _ = pw.Close(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	select {
	case b := <-base:
		return p, b
	case <-p.exited:
		t.Fatalf("e2a %v exited:\n%s", args, p.output())
	case <-time.After(60 * time.Second):
		t.Fatalf("e2a %v did not start:\n%s", args, p.output())
	}
	return nil, ""
}

// stop interrupts p and waits for it to exit (it flushes its spans).
func (p *obsProc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("e2a did not stop on SIGINT:\n%s", p.output())
	}
}

func obsPost(t *testing.T, url, body string, hdr ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// `e2a dev` with tracing on (OTLP to a collector), API keys and bearer
// tokens, and debug logs: an A2A call with the client's traceparent
// produces the documented chain in the client's trace (HTTP server →
// publish e2a.req → process demo → publish e2a.resp), and no secret (a
// key, a wrong key, a bearer token, a webhook token, path or query, push
// credentials) appears in any log line or in any span's name, attribute or
// status — webhook failures included.
func TestObsDevTracingAndSecrets(t *testing.T) {
	const (
		apiKey      = "k-obs-7d1f0a9c3e5b2468"
		wrongKey    = "k-wrong-1b2c3d4e5f60718"
		bearer      = "tok-obs-9e8d7c6b5a4f3e2d"
		hookToken   = "whtok-5a6b7c8d9e0f1a2b"
		hookPath    = "pathsecret-3c4d5e6f7a8b"
		hookQuery   = "qsecret-1f2e3d4c5b6a"
		hookCred    = "hookcred-8a7b6c5d4e3f"
		traceID     = "5bf92f3577b34da6a3ce929d0e0e4736"
		clientSpan  = "10f067aa0ba902b7"
		traceparent = "00-" + traceID + "-" + clientSpan + "-01"
	)
	secrets := []string{apiKey, wrongKey, bearer, hookToken, hookPath, hookQuery, hookCred}
	col := &obsCollector{}
	otlp := httptest.NewServer(col)
	t.Cleanup(otlp.Close)
	var hookMu sync.Mutex
	hookCalls := 0
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hookMu.Lock()
		hookCalls++
		n := hookCalls
		hookMu.Unlock()
		if n%2 == 1 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	t.Cleanup(hook.Close)
	hookHost := strings.TrimPrefix(hook.URL, "http://")
	env := embeddedEnv("E2A_LOG_FORMAT=json", "E2A_LOG_LEVEL=debug",
		"E2A_API_KEYS=alice:"+apiKey, "E2A_BEARER_TOKENS=ci:"+bearer, "E2A_AUTH_SCHEMES=apiKey,bearer",
		"E2A_PUSH=on", "E2A_PUSH_ALLOW_HOSTS="+hookHost, "E2A_PUSH_RETRY_WINDOW=2s",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL, "OTEL_SERVICE_NAME=", "OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED=",
		"OTEL_TRACES_SAMPLER=", "OTEL_EXPORTER_OTLP_PROTOCOL=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=")
	p, base := startObsProc(t, env, "dev")

	// Refused: a wrong key, a wrong bearer token, no credential.
	msg := func(id string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"` + id +
			`","parts":[{"kind":"text","text":"hello"}]}}}`
	}
	if code, _ := obsPost(t, base+"/a2a", msg("m-wrong"), "X-Api-Key", wrongKey); code != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d", code)
	}
	if code, _ := obsPost(t, base+"/v1/requests", `{"params":{"text":"x"}}`, "Authorization", "Bearer "+wrongKey); code != http.StatusUnauthorized {
		t.Fatalf("wrong bearer: %d", code)
	}
	// Accepted: A2A with the client's traceparent, the API key.
	code, body := obsPost(t, base+"/a2a", msg("m-ok"), "X-Api-Key", apiKey, "traceparent", traceparent)
	if code != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("message/send: %d %s", code, body)
	}
	// A bearer-token E2A request with a webhook holding secrets in its
	// path, query and token: its deliveries fail (503, then 401).
	pushBody := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m-push",`+
		`"parts":[{"kind":"text","text":"hi"}]},"configuration":{"pushNotificationConfig":{"url":"%s/hook/%s?token=%s","token":"%s",`+
		`"authentication":{"schemes":["Bearer"],"credentials":"%s"}}}}}`, hook.URL, hookPath, hookQuery, hookToken, hookCred)
	code, body = obsPost(t, base+"/a2a", pushBody, "Authorization", "Bearer "+bearer)
	if code != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("message/send with push: %d %s", code, body)
	}
	testkit.Eventually(t, 30*time.Second, "the webhook tried twice", func() bool {
		hookMu.Lock()
		defer hookMu.Unlock()
		return hookCalls >= 2
	})
	p.stop(t)
	out := p.output()
	for _, s := range secrets {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, s) {
				t.Errorf("secret %q in a log line: %s", s, l)
			}
		}
	}

	spans := col.all()
	if len(spans) == 0 {
		t.Fatalf("no span exported; output:\n%s", out)
	}
	for _, s := range spans {
		text := s.Name + " " + s.GetStatus().GetMessage()
		for _, kv := range s.Attributes {
			text += " " + kv.Key + "=" + kv.Value.String()
		}
		for _, sec := range secrets {
			if strings.Contains(text, sec) {
				t.Errorf("secret %q in span %q: %s", sec, s.Name, text)
			}
		}
	}
	byID := map[string]*tracepb.Span{}
	var process *tracepb.Span
	for _, s := range spans {
		byID[hex.EncodeToString(s.SpanId)] = s
		if hex.EncodeToString(s.TraceId) == traceID && s.Name == "process demo" {
			process = s
		}
	}
	if process == nil {
		t.Fatalf("no process demo span in the client's trace")
	}
	pub := byID[hex.EncodeToString(process.ParentSpanId)]
	if pub == nil || pub.Name != "publish e2a.req" {
		t.Fatalf("process demo's parent is %v", pub)
	}
	srv := byID[hex.EncodeToString(pub.ParentSpanId)]
	if srv == nil || !strings.HasPrefix(srv.Name, "HTTP POST /a2a") || hex.EncodeToString(srv.ParentSpanId) != clientSpan {
		t.Fatalf("publish e2a.req's parent is %v, want HTTP POST /a2a under the client's span", srv)
	}
	frames := 0
	for _, s := range spans {
		if s.Name == "publish e2a.resp" && string(s.ParentSpanId) == string(process.SpanId) {
			frames++
		}
	}
	if frames == 0 {
		t.Fatalf("no frame publish span under process demo")
	}
}

// docMetrics reads the metric table of docs/operations.md: each metric
// name with its documented label names.
func docMetrics(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## Metrics")
	if !ok {
		t.Fatal("no Metrics section in docs/operations.md")
	}
	rest, _, _ = strings.Cut(rest, "\n## ")
	out := map[string][]string{}
	name := regexp.MustCompile("`(e2a_[a-z0-9_]+)`")
	for _, l := range strings.Split(rest, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 4 || !strings.Contains(cells[1], "`e2a_") {
			continue
		}
		var labels []string
		for _, f := range strings.Split(cells[2], ",") {
			if f = strings.TrimSpace(f); f != "" {
				labels = append(labels, f)
			}
		}
		sort.Strings(labels)
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			out[m[1]] = labels
		}
	}
	if len(out) < 20 {
		t.Fatalf("only %d metrics read from the table: %v", len(out), out)
	}
	return out
}

// scrape returns, per metric family of a /metrics text, its TYPE and the
// label-name sets of its series (le and quantile left out).
func scrape(body string) (types map[string]string, labels map[string]map[string]bool) {
	types, labels = map[string]string{}, map[string]map[string]bool{}
	lname := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for _, l := range strings.Split(body, "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
			continue
		}
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		n, lb, _ := strings.Cut(l, "{")
		n = strings.Fields(n)[0]
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base := strings.TrimSuffix(n, suf); base != n && types[base] == "histogram" {
				n = base
			}
		}
		var ls []string
		if i := strings.LastIndex(lb, "}"); i >= 0 {
			for _, m := range lname.FindAllStringSubmatch(lb[:i], -1) {
				if m[1] != "le" && m[1] != "quantile" {
					ls = append(ls, m[1])
				}
			}
		}
		sort.Strings(ls)
		if labels[n] == nil {
			labels[n] = map[string]bool{}
		}
		labels[n][strings.Join(ls, ",")] = true
	}
	return types, labels
}

// Every metric of docs/operations.md's table is served by `e2a dev` (the
// archiver and the push stage on) with exactly the documented labels, once the traffic that
// makes its series has passed (an accepted E2A request streamed over SSE,
// a refused key); the metrics no such traffic reaches are only required
// to be declared (# TYPE is absent for a vector without series, so those
// are listed, not failed). And every e2a_ family it serves is in the table
// (a vector without series escapes this half, for the same reason).
func TestObsMetricsTable(t *testing.T) {
	const key = "k-metrics-0a1b2c3d4e5f"
	env := embeddedEnv("E2A_LOG_FORMAT=json", "E2A_ARCHIVE=true",
		"E2A_API_KEYS=alice:"+key, "E2A_AUTH_SCHEMES=apiKey")
	_, base := startObsProc(t, env, "dev")
	if code, _ := obsPost(t, base+"/v1/requests", `{"params":{"text":"x"}}`, "X-Api-Key", "k-wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d", code)
	}
	code, body := obsPost(t, base+"/v1/requests?agent=demo", `{"request_id":"obs-m1","params":{"text":"x"}}`, "X-Api-Key", key, "Accept", "text/event-stream")
	if code != http.StatusOK || !strings.Contains(body, "e2a.complete") {
		t.Fatalf("POST: %d %.300s", code, body)
	}
	doc := docMetrics(t)
	var types map[string]string
	var labels map[string]map[string]bool
	testkit.Eventually(t, 20*time.Second, "the request's metrics", func() bool {
		_, m := httpGet(t, base+"/metrics")
		types, labels = scrape(m)
		return labels["e2a_agent_requests_handled_total"] != nil && labels["e2a_egress_streams_total"] != nil &&
			labels["e2a_archive_records_total"] != nil
	})
	var unobserved []string
	for name, want := range doc {
		got, ok := labels[name]
		if !ok {
			unobserved = append(unobserved, name)
			continue
		}
		w := strings.Join(want, ",")
		for g := range got {
			if g != w {
				t.Errorf("%s (%s) has labels {%s}, docs/operations.md says {%s}", name, types[name], g, w)
			}
		}
	}
	sort.Strings(unobserved)
	t.Logf("documented metrics with no series after this traffic: %v", unobserved)
	for name := range types {
		if _, documented := doc[name]; strings.HasPrefix(name, "e2a_") && !documented {
			t.Errorf("%s is served but not in docs/operations.md's table", name)
		}
	}
	for _, n := range []string{"e2a_ingress_requests_total", "e2a_ingress_accepted_total", "e2a_ingress_publish_seconds",
		"e2a_ingress_auth_failures_total", "e2a_agent_requests_handled_total", "e2a_agent_frames_published_total",
		"e2a_agent_handler_duration_seconds", "e2a_egress_streams_total", "e2a_egress_frames_written_total",
		"e2a_egress_time_to_first_frame_seconds", "e2a_archive_batches_total", "e2a_archive_last_record_timestamp_seconds"} {
		if _, ok := labels[n]; !ok {
			t.Errorf("%s: no series after an accepted, streamed, archived request and a refused key", n)
		}
	}
}
