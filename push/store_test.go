package push_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
	"github.com/e2a-pipeline/pipeline/streams"
)

// resolver answers names from a table the test may change.
var _ push.Resolver = (*resolver)(nil)

type resolver struct {
	mu sync.Mutex
	m  map[string][]string
}

func (r *resolver) set(name string, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[name] = ips
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []netip.Addr
	for _, s := range r.m[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// urlRulesStore is a config store whose resolver knows public.test (a
// public address) and names of forbidden ones (loop.test, mixed.corp.test,
// meta.test, v6.test, mapped.test), with dev.local (loopback) and
// 127.0.0.2:8080 allow-listed; res is its resolver.
func urlRulesStore(t testing.TB) (s *push.Store, res *resolver) {
	t.Helper()
	res = &resolver{m: map[string][]string{
		"public.test":     {"93.184.216.34"},
		"loop.test":       {"127.0.0.1"},
		"mixed.corp.test": {"93.184.216.34", "10.1.2.3"},
		"meta.test":       {"169.254.169.254"},
		"v6.test":         {"fd00::1"},
		"mapped.test":     {"::ffff:127.0.0.1"},
		"dev.local":       {"127.0.0.1"},
	}}
	_, nc := natstest.RunServer(t)
	s, err := push.NewStore(tctx(t), nc, push.WithResolver(res), push.WithAllowHosts("dev.local, 127.0.0.2:8080"))
	if err != nil {
		t.Fatal(err)
	}
	return s, res
}

// TestURLRules: every SSRF vector of the workflow suite, and the scheme
// and user-information rules, refused at creation with ErrURLRefused.
func TestURLRules(t *testing.T) {
	s, _ := urlRulesStore(t)
	for _, tc := range []struct{ url, want string }{
		{"http://public.test/hook", "https is required"},
		{"ftp://public.test/hook", "scheme"},
		{"https://user:pw@public.test/hook", "user information"},
		{"https:///hook", "no host"},
		{"/relative", "not an absolute URL"},
		{"https://127.0.0.1/hook", "not an allowed destination"},
		{"https://169.254.169.254/latest/meta-data/", "not an allowed destination"},
		{"https://[::ffff:127.0.0.1]/hook", "not an allowed destination"},
		{"https://[::1]/hook", "not an allowed destination"},
		{"https://0.0.0.0/hook", "not an allowed destination"},
		{"https://10.0.0.1/hook", "not an allowed destination"},
		{"https://192.168.1.1/hook", "not an allowed destination"},
		{"https://100.64.0.1/hook", "not an allowed destination"},
		{"https://loop.test/hook", "not an allowed destination"},
		{"https://mixed.corp.test/hook", "not an allowed destination"},
		{"https://meta.test/hook", "not an allowed destination"},
		{"https://v6.test/hook", "not an allowed destination"},
		{"https://nowhere.test/hook", "not an allowed destination"},
		{"http://127.0.0.2/hook", "https is required"}, // allow-listed on port 8080 only
		{"https://" + strings.Repeat("a", 2100) + ".test/", "longer than"},
	} {
		_, err := s.Create(tctx(t), "alice", push.Config{TaskID: "t", URL: tc.url})
		if !errors.Is(err, push.ErrURLRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: %v, want ErrURLRefused with %q", tc.url, err, tc.want)
		}
	}
	for _, ok := range []string{"https://public.test/hook", "http://dev.local:9999/hook", "http://127.0.0.2:8080/x"} {
		if _, err := s.Create(tctx(t), "alice", push.Config{TaskID: "t", URL: ok}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestDNSChangesAtDelivery: a host that resolved to a public address at
// creation and to loopback at delivery is not connected to: the update
// is dead-lettered with the address rule as its reason.
func TestDNSChangesAtDelivery(t *testing.T) {
	res := &resolver{m: map[string][]string{"hook.test": {"93.184.216.34"}}}
	e := newEnv(t, push.WithResolver(res))
	hit := make(chan struct{}, 100)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hit <- struct{}{} }))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := e.create("alice", push.Config{TaskID: "t1", URL: fmt.Sprintf("https://hook.test:%d/", port)})
	res.set("hook.test", "127.0.0.1")
	e.startStage(push.WithResolver(res), push.WithRetryWindow(50*time.Millisecond))
	e.turn("alice", "t1", "", "", 1)
	var dead []push.DeadLetter
	testkit.Eventually(t, 20*time.Second, "dead-lettered", func() bool {
		dead, _ = push.ListDead(context.Background(), e.nc, push.DeadFilter{Principal: "alice", TaskID: "t1", ConfigID: c.ID}, 10)
		return len(dead) > 0
	})
	if !strings.Contains(dead[0].Reason, "private, loopback") {
		t.Errorf("reason %q, want the address rule", dead[0].Reason)
	}
	if len(hit) != 0 {
		t.Errorf("the loopback server was called")
	}
}

// TestStoreScoping: the ownership rule over Create, Get, List and Delete,
// pagination, replace by id, limits and the two generations' shapes.
func TestStoreScoping(t *testing.T) {
	_, nc := natstest.RunServer(t)
	s, err := push.NewStore(tctx(t), nc, push.WithAllowHosts("127.0.0.1"), push.WithMaxPerTask(5), push.WithMaxTasksPerPrincipal(3))
	if err != nil {
		t.Fatal(err)
	}
	ctx := tctx(t)
	v1 := &a2a.PushConfig{TaskID: "task", ID: "one", URL: "http://127.0.0.1:1/a", Token: "tk",
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cr"}}
	got, err := s.Create(ctx, "alice", push.FromV1(v1))
	if err != nil {
		t.Fatal(err)
	}
	if back := got.V1(); back.ID != "one" || back.URL != v1.URL || back.Token != "tk" || back.Auth.Credentials != "cr" || back.Auth.Scheme != "Bearer" {
		t.Errorf("v1.0 round trip %+v", back)
	}
	v03 := &a2a03.TaskPushConfig{TaskID: "task", Config: a2a03.PushConfig{URL: "http://127.0.0.1:1/b",
		Auth: &a2a03.PushAuthInfo{Schemes: []string{"OAuth", "basic"}, Credentials: "x"}}}
	got03, err := s.Create(ctx, "alice", push.FromV03(v03))
	if err != nil || got03.ID == "" || got03.Version != push.V03 || got03.Auth.Scheme != "Basic" {
		t.Fatalf("v0.3 create: %+v %v", got03, err)
	}
	if back := got03.V03(); back.Config.ID != got03.ID || back.Config.Auth.Schemes[0] != "Basic" {
		t.Errorf("v0.3 round trip %+v", back)
	}
	// Another principal: nothing exists.
	if _, err := s.Get(ctx, "bob", "task", "one"); !errors.Is(err, push.ErrNotFound) {
		t.Errorf("bob gets alice's config: %v", err)
	}
	if l, next, err := s.List(ctx, "bob", "task", 0, ""); err != nil || len(l) != 0 || next != "" {
		t.Errorf("bob lists %d of alice's configs (%v)", len(l), err)
	}
	if err := s.Delete(ctx, "bob", "task", "one"); !errors.Is(err, push.ErrNotFound) {
		t.Errorf("bob deletes alice's config: %v", err)
	}
	// bob's own config of the same task id is his, and alice's is intact.
	if _, err := s.Create(ctx, "bob", push.Config{TaskID: "task", ID: "one", URL: "http://127.0.0.1:1/bob"}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Get(ctx, "alice", "task", "one"); err != nil || c.URL != v1.URL {
		t.Errorf("alice's config after bob's create: %+v %v", c, err)
	}
	// Replace by id, pagination.
	if _, err := s.Create(ctx, "alice", push.Config{TaskID: "task", ID: "one", URL: "http://127.0.0.1:1/c"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p", "q", "r"} {
		if _, err := s.Create(ctx, "alice", push.Config{TaskID: "task", ID: id, URL: "http://127.0.0.1:1/" + id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, "alice", push.Config{TaskID: "task", ID: "s", URL: "http://127.0.0.1:1/s"}); !errors.Is(err, push.ErrLimit) {
		t.Errorf("6th config of a task: %v, want ErrLimit", err)
	}
	var ids []string
	tok := ""
	for range 5 {
		page, next, err := s.List(ctx, "alice", "task", 2, tok)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page {
			ids = append(ids, c.ID)
		}
		if tok = next; tok == "" {
			break
		}
	}
	if want := []string{got03.ID, "one", "p", "q", "r"}; fmt.Sprint(ids) != fmt.Sprint(sortStrings(want)) {
		t.Errorf("listed %v, want %v", ids, sortStrings(want))
	}
	if _, _, err := s.List(ctx, "alice", "task", 2, "garbage!"); !errors.Is(err, push.ErrInvalidPageToken) {
		t.Errorf("bad page token: %v", err)
	}
	if err := s.Delete(ctx, "alice", "task", "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "alice", "task", "p"); !errors.Is(err, push.ErrNotFound) {
		t.Errorf("deleted config: %v", err)
	}
	// Per-principal limit: alice has "task"; two more tasks, then refused.
	for _, task := range []string{"t2", "t3"} {
		if _, err := s.Create(ctx, "alice", push.Config{TaskID: task, URL: "http://127.0.0.1:1/"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, "alice", push.Config{TaskID: "t4", URL: "http://127.0.0.1:1/"}); !errors.Is(err, push.ErrLimit) {
		t.Errorf("4th task of alice: %v, want ErrLimit", err)
	}
	if _, err := s.Create(ctx, "bob", push.Config{TaskID: "t4", URL: "http://127.0.0.1:1/"}); err != nil {
		t.Errorf("bob's second task: %v", err)
	}
	for _, bad := range []push.Config{
		{URL: "http://127.0.0.1:1/"},
		{TaskID: "t", URL: ""},
		{TaskID: "t", URL: "http://127.0.0.1:1/", Version: "2.0"},
		{TaskID: "t", URL: "http://127.0.0.1:1/", Auth: &push.Auth{Scheme: "Digest", Credentials: "x"}},
		{TaskID: "t", URL: "http://127.0.0.1:1/", Token: "a\r\nX-Evil: 1"},
		// Control characters no HTTP header may carry: net/http refuses
		// them at every POST, so such a config could never deliver.
		{TaskID: "t", URL: "http://127.0.0.1:1/", Token: "tok\x01en"},
		{TaskID: "t", URL: "http://127.0.0.1:1/", Token: "tok\x7fen"},
		{TaskID: "t", URL: "http://127.0.0.1:1/", Auth: &push.Auth{Scheme: "Bearer", Credentials: "cred\x1bx"}},
		// Whitespace at either end, which net/http trims from a header it
		// sends: the receiver would get another token than it registered.
		{TaskID: "t", URL: "http://127.0.0.1:1/", Token: " tok"},
		{TaskID: "t", URL: "http://127.0.0.1:1/", Token: "tok\t"},
		{TaskID: "t", URL: "http://127.0.0.1:1/", Auth: &push.Auth{Scheme: "Bearer", Credentials: "cred "}},
	} {
		if _, err := s.Create(ctx, "alice", bad); !errors.Is(err, push.ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", bad, err)
		}
	}
	// The bucket expires with the tasks.
	js := natstest.JetStream(t, nc)
	kv, err := js.KeyValue(ctx, streams.PushBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if want := streams.DefaultConfig().TasksTTL; err != nil || st.TTL() != want || want == 0 {
		t.Errorf("bucket TTL %v (%v), want the tasks' %v", st.TTL(), err, streams.DefaultConfig().TasksTTL)
	}
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestURLPortOutOfRange: a port outside 1..65535 is refused at creation.
// url.Parse takes any digits for a port, so such a URL was stored (an
// allow-listed host's too), and every POST of the config failed to dial
// until the retry window dead-lettered the task's updates.
func TestURLPortOutOfRange(t *testing.T) {
	s, _ := urlRulesStore(t)
	for _, u := range []string{"https://public.test:99999/hook", "https://public.test:0/hook",
		"http://dev.local:65536/hook", "http://dev.local:00/hook"} {
		_, err := s.Create(tctx(t), "alice", push.Config{TaskID: "t", URL: u})
		if !errors.Is(err, push.ErrURLRefused) || !strings.Contains(err.Error(), "port") {
			t.Errorf("%s: %v, want ErrURLRefused naming the port", u, err)
		}
	}
	for _, ok := range []string{"https://public.test:65535/hook", "http://dev.local:1/hook", "http://dev.local:/hook"} {
		if _, err := s.Create(tctx(t), "alice", push.Config{TaskID: "t", URL: ok}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
