package push

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestBackoff: doubling from base, capped, the upper half jittered.
func TestBackoff(t *testing.T) {
	base, max := 100*time.Millisecond, 2*time.Second
	for _, tc := range []struct {
		n      int
		j      float64
		want   time.Duration
		window [2]time.Duration
	}{
		{n: 1, j: 0, want: 50 * time.Millisecond},
		{n: 1, j: 0.999999, window: [2]time.Duration{99 * time.Millisecond, 100 * time.Millisecond}},
		{n: 2, j: 0, want: 100 * time.Millisecond},
		{n: 3, j: 0.5, want: 300 * time.Millisecond},
		{n: 5, j: 0, want: 800 * time.Millisecond},
		{n: 6, j: 0, want: time.Second},
		{n: 60, j: 1, want: 2 * time.Second},
	} {
		got := backoff(base, max, tc.n, tc.j)
		if tc.window[1] > 0 {
			if got < tc.window[0] || got > tc.window[1] {
				t.Errorf("backoff(%d, %v) = %v, want in %v", tc.n, tc.j, got, tc.window)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("backoff(%d, %v) = %v, want %v", tc.n, tc.j, got, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":          0,
		"7":         7 * time.Second,
		"-3":        0,
		"soon":      0,
		"999999999": 24 * time.Hour,
		// More seconds than a time.Duration holds: still the cap (push's
		// own reading wrapped these around to 0 s and 290 ms).
		"9999999999":           24 * time.Hour,
		"18446744074":          24 * time.Hour,
		"99999999999999999999": 24 * time.Hour,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestOptions: every option refuses a bad value with ErrInvalidOption.
func TestOptions(t *testing.T) {
	bad := map[string]Option{
		"allow host":     WithAllowHosts("a/b"),
		"allow wildcard": WithAllowHosts("a.*.com"),
		"resolver":       WithResolver(nil),
		"streams":        WithStreamsConfig(streams.Config{}),
		"per task":       WithMaxPerTask(0),
		"per principal":  WithMaxTasksPerPrincipal(0),
		"window":         WithRetryWindow(0),
		"backoff":        WithBackoff(time.Second, time.Millisecond),
		"timeout":        WithTimeout(time.Millisecond),
		"max body":       WithMaxBody(10),
		"ack pending":    WithMaxAckPending(0),
		"ack wait":       WithAckWait(time.Millisecond),
		"order wait":     WithOrderWait(0),
		"consumer":       WithConsumerName("a.b"),
		"logger":         WithLogger(nil),
		"registerer":     WithRegisterer(nil),
		"task turns":     WithTaskTurns(nil),
		"dead share 0":   WithDeadShare(0),
		"dead share 2":   WithDeadShare(2),
		"dead share NaN": WithDeadShare(math.NaN()),
		"nil":            nil,
	}
	for name, o := range bad {
		if _, err := buildOptions([]Option{o}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := buildOptions([]Option{WithAllowHosts("localhost, *.dev.test [::1]:8443"), WithLogger(slog.Default()),
		WithBackoff(time.Millisecond, time.Hour), WithRetryWindow(time.Hour), WithDeadShare(1), WithDeadShare(0.01)}); err != nil {
		t.Errorf("good options: %v", err)
	}
	if err := Run(t.Context(), nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("Run without a connection: %v", err)
	}
}

// TestAllowListURLEntry: an entry written as a URL is refused saying so;
// "http://x/" was refused as "the port must be 1..65535".
func TestAllowListURLEntry(t *testing.T) {
	for _, e := range []string{"http://x/", "https://hooks.example.com", "x.test/hooks"} {
		_, err := parseAllowHosts([]string{e})
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "not a URL") {
			t.Errorf("entry %q: %v; want ErrInvalidOption saying it is not a URL", e, err)
		}
	}
}

func TestAllowList(t *testing.T) {
	rules, err := parseAllowHosts([]string{"localhost,*.dev.test", "[::1]:8443 127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	p := urlPolicy{allow: rules}
	for _, tc := range []struct {
		host, port string
		want       bool
	}{
		{"localhost", "80", true}, {"a.dev.test", "1", true}, {"dev.test", "443", false},
		{"::1", "8443", true}, {"::1", "80", false}, {"127.0.0.1", "9", true}, {"127.0.0.2", "9", false},
		{"evil-localhost", "80", false},
	} {
		if got := p.allowed(tc.host, tc.port); got != tc.want {
			t.Errorf("allowed(%s, %s) = %v", tc.host, tc.port, got)
		}
	}
}

// TestConfigString: a config names itself without token, credentials or
// query.
func TestConfigString(t *testing.T) {
	c := Config{TaskID: "t", ID: "i", URL: "https://h.test/p?key=secret", Token: "tok", Auth: &Auth{Scheme: "Bearer", Credentials: "cred"}}
	s := c.String()
	for _, secret := range []string{"secret", "tok", "cred"} {
		if contains(s, secret) {
			t.Errorf("%q shows %q", s, secret)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// namedBy reads the user_id and task_id a stored response message's frames
// share without decoding them, as encoding/json would read them; anything
// it cannot read so (escapes, null, frames that differ) is empty, and the
// stage reads the envelope then.
func TestNamedBy(t *testing.T) {
	hdr := func(n string) nats.Header {
		h := nats.Header{}
		if n != "" {
			h.Set(subjects.HeaderFrames, n)
		}
		return h
	}
	for _, c := range []struct {
		name, frames, data, user, task string
	}{
		{"one frame", "", `{"request_id":"r","user_id":"alice","task_id":"t1","body":{"user_id":"mallory"}}`, "alice", "t1"},
		{"a burst", "2", `{"user_id":"alice","task_id":"t1"}` + "\n" + `{"task_id":"t1","user_id":"alice"}`, "alice", "t1"},
		{"no task", "", `{"user_id":"bob"}`, "bob", ""},
		{"frames that differ", "2", `{"user_id":"alice","task_id":"t1"}` + "\n" + `{"user_id":"bob","task_id":"t1"}`, "", ""},
		{"escaped value", "", `{"user_id":"al\u0069ce","task_id":"t1"}`, "", ""},
		{"null", "", `{"user_id":null,"task_id":"t1"}`, "", ""},
		{"not an object", "", `["alice"]`, "", ""},
		{"a bad burst", "3", `{"user_id":"alice"}` + "\n" + `{"user_id":"alice"}`, "", ""},
		{"pretty-printed single frame", "", "{\n  \"user_id\": \"alice\",\n  \"task_id\": \"t1\"\n}", "alice", "t1"},
	} {
		if u, tk := namedBy(hdr(c.frames), []byte(c.data)); u != c.user || tk != c.task {
			t.Errorf("%s: %q %q, want %q %q", c.name, u, tk, c.user, c.task)
		}
	}
}

// TestUnwritableStateSkipsTheUpdate: a config's state that can never be
// written (over the server's max_payload, or the stream's largest
// message) makes the message done for that config, with an error logged
// and counted (e2a_push_skipped_total), not looked at again for ever
// (holding the consumer's MaxAckPending); a state unavailable now, or a
// replica behind, is looked at again.
func TestUnwritableStateSkipsTheUpdate(t *testing.T) {
	var log strings.Builder
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := &stage{ctx: context.Background(), log: slog.New(slog.NewTextHandler(&log, nil)), o: options{orderWait: time.Second},
		metrics: m}
	it := item{job: &job{m: &message{requestID: "r-1", seq: 7}}, cfg: Config{ID: "c-1"}}
	for _, err := range []error{fmt.Errorf("kv update: %w", nats.ErrMaxPayload),
		fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum})} {
		if r := s.stateFailed(it, err); r.retry || r.parked {
			t.Errorf("%v: %+v, want done", err, r)
		}
	}
	if n := strings.Count(log.String(), "level=ERROR"); n != 2 {
		t.Errorf("%d errors logged, want 2:\n%s", n, log.String())
	}
	if n := testutil.ToFloat64(m.skipped); n != 2 {
		t.Errorf("e2a_push_skipped_total %v, want 2", n)
	}
	for _, err := range []error{errors.New("timeout"), fmt.Errorf("%w: again", errBehind), errMoved} {
		if r := s.stateFailed(it, err); !r.retry || r.after != time.Second {
			t.Errorf("%v: %+v, want a retry after the order wait", err, r)
		}
	}
}

// TestRenderedCacheBoundedInBytes: the cache of rendered messages starts
// over past maxRenderedBytes of bodies, not only past maxRenderedMsgs
// messages, and counts what it forgets.
func TestRenderedCacheBoundedInBytes(t *testing.T) {
	var c renderedCache
	body := make([]byte, 1<<20)
	for seq := range uint64(maxRenderedBytes>>20 + 8) {
		c.put(&message{seq: seq + 1, events: []event{{v03: body}}}, true)
		if c.bytes > maxRenderedBytes {
			t.Fatalf("%d bytes kept after %d messages of 1 MiB", c.bytes, seq+1)
		}
	}
	if c.get(1, "", time.Time{}, true) != nil {
		t.Fatal("the first message is still kept")
	}
	n, b := len(c.msgs), c.bytes
	for seq := range c.msgs {
		c.forget(seq)
		break
	}
	if len(c.msgs) != n-1 || c.bytes >= b {
		t.Fatalf("forget: %d messages, %d bytes (were %d, %d)", len(c.msgs), c.bytes, n, b)
	}
}

// TestAllowListEmptyLabel: an entry whose name has an empty label ("*..",
// whose domain is empty, "a..b", ".a") is refused, ErrInvalidOption: no
// host a webhook URL can reach has one, so the entry allowed nothing
// while the list was taken. "*.." was taken as "*." and matched no host.
func TestAllowListEmptyLabel(t *testing.T) {
	for _, e := range []string{"*..", "*...", "*..x", "*.a..b", "a..b", ".a", "a.com..", "*..:443", ".."} {
		if rules, err := parseAllowHosts([]string{e}); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "empty label") {
			t.Errorf("entry %q: %+v, %v; want ErrInvalidOption naming an empty label", e, rules, err)
		}
	}
	for _, e := range []string{"a.com.", "*.a.com", "*.a.com.", "10.0.0.1", "[::ffff:10.0.0.1]:80", "fe80::1%eth0"} {
		if _, err := parseAllowHosts([]string{e}); err != nil {
			t.Errorf("entry %q: %v", e, err)
		}
	}
}

// TestAllowListPortNotDigits: an entry's port that is not digits alone
// ("+443", which strconv.Atoi reads as 443) is refused, as the workflow's
// host patterns and E2A_UPSTREAM_ALLOWED_HOSTS refuse it: it was taken as
// 443, where the other two allow-lists refused the same entry.
func TestAllowListPortNotDigits(t *testing.T) {
	for _, e := range []string{"h.test:+443", "h.test:-1", "h.test: 443", "h.test:4_43"} {
		if rules, err := parseAllowHosts([]string{e}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("entry %q: %+v, %v; want ErrInvalidOption", e, rules, err)
		}
	}
}

// TestAllowListPortLeadingZeros: a port written with leading zeros is the
// port its number names, in an entry ("h.test:0443") and in a webhook URL
// ("http://h.test:0080/"), as the dialer reads it: such an entry matched
// no URL (ports were compared as written), nor such a URL an entry.
func TestAllowListPortLeadingZeros(t *testing.T) {
	for _, tc := range []struct {
		entry, url string
		want       bool
	}{
		{"h.test:0080", "http://h.test/", true}, {"h.test:0080", "http://h.test:80/", true},
		{"h.test:0080", "http://h.test:080/", true}, {"h.test:80", "http://h.test:0080/", true},
		{"h.test:08080", "http://h.test:8080/", true}, {"*.h.test:0443", "http://a.h.test:443/", true},
		{"h.test:0080", "http://h.test:8080/", false}, {"h.test:080", "http://h.test:800/", false},
	} {
		rules, err := parseAllowHosts([]string{tc.entry})
		if err != nil {
			t.Fatalf("entry %q: %v", tc.entry, err)
		}
		p := urlPolicy{allow: rules}
		// http is allowed to allow-listed hosts only, checked before any
		// resolution.
		if err := p.check(t.Context(), tc.url, slog.New(slog.DiscardHandler)); (err == nil) != tc.want {
			t.Errorf("entry %q, webhook %s: %v; want allowed %v", tc.entry, tc.url, err, tc.want)
		}
	}
	// Delivered too: the connection's check (transport) reads the port as
	// the URL writes it, and a loopback address is reached only when the
	// entry allows it.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rules, err := parseAllowHosts([]string{"127.0.0.1:0" + u.Port()})
	if err != nil {
		t.Fatal(err)
	}
	p := urlPolicy{allow: rules}
	hook := "http://127.0.0.1:00" + u.Port() + "/hook"
	if err := p.check(t.Context(), hook, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("webhook %s: %v", hook, err)
	}
	tr := p.transport(5 * time.Second)
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(hook)
	if err != nil {
		t.Fatalf("webhook %s allowed by 127.0.0.1:0%s: %v", hook, u.Port(), err)
	}
	resp.Body.Close()
}
