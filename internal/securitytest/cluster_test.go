package securitytest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// TestOwnershipOnCluster: on a 3-node cluster with every stream replicated
// 3 times, ingress and egress connected to a follower of E2A_REQUESTS (so
// direct gets may be answered by a replica that lags the leader), the owner
// reads its request right after the 202 and retries its own id as a
// duplicate, every time, while another principal gets 404 and 409; and the
// same holds after the requests stream's leader is killed.
func TestOwnershipOnCluster(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	leader := c.StreamLeader(streams.RequestsStream)
	follower := (leader + 1) % 3
	nc, err := c.Node(follower).Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	auth, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{
		{Principal: "alice", Secret: keyAlice}, {Principal: "bob", Secret: keyBob}}})
	if err != nil {
		t.Fatal(err)
	}
	eg, err := egress.New(nc, egress.WithAuthorizer(func(r *http.Request) (tenant.Principal, error) {
		p, err := auth.Tenant(r)
		ingress.StripCredentialHeaders(r.Header)
		return p, err
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eg.Close)
	in, err := ingress.New(nc, eg, ingress.WithAuth(auth))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	in.Register(mux)
	eg.Register(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	s := &suite{t: t, base: "http://" + ln.Addr().String(), hc: &http.Client{Timeout: 30 * time.Second}}
	alice := map[string]string{"X-Api-Key": keyAlice}
	bob := map[string]string{"X-Api-Key": keyBob}

	round := func(id string) {
		t.Helper()
		body := fmt.Appendf(nil, `{"request_id":%q,"params":{"text":"alice's %s"}}`, id, id)
		// While the cluster elects leaders (each stream its own) any call
		// may answer 503 (retryable, as documented): it is retried; every
		// other answer is checked as it is.
		deadline := time.Now().Add(30 * time.Second)
		do := func(method, path string, body []byte, h map[string]string) response {
			r := s.do(method, path, body, h)
			for r.status == http.StatusServiceUnavailable && time.Now().Before(deadline) {
				r = s.do(method, path, body, h)
			}
			return r
		}
		if r := do(http.MethodPost, "/v1/requests", body, alice); r.status != http.StatusAccepted {
			t.Fatalf("%s: POST %s", id, r)
		}
		if r := do(http.MethodGet, "/v1/requests/"+id, nil, alice); r.status != http.StatusAccepted {
			t.Fatalf("%s: the owner's GET right after the 202: %s", id, r)
		}
		if r := do(http.MethodPost, "/v1/requests", body, alice); r.status != http.StatusAccepted || !bytes.Contains(r.body, []byte(`"duplicate":true`)) {
			t.Fatalf("%s: the owner's retry: %s", id, r)
		}
		if r := do(http.MethodGet, "/v1/requests/"+id, nil, bob); r.status != http.StatusNotFound || bytes.Contains(r.body, []byte("alice's")) {
			t.Fatalf("%s: bob's GET: %s", id, r)
		}
		if r := do(http.MethodPost, "/v1/requests", body, bob); r.status != http.StatusConflict || bytes.Contains(r.body, []byte("alice's")) {
			t.Fatalf("%s: bob's duplicate: %s", id, r)
		}
	}
	for i := range 20 {
		round(fmt.Sprintf("cl-own-%d", i))
	}
	c.Kill(leader)
	for i := range 10 {
		round(fmt.Sprintf("cl-own-after-%d", i))
	}
}
