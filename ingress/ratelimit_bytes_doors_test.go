package ingress_test

import (
	"context"
	"encoding/json"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestRateLimitBytesAtTheDoors: a budget of 2,000 request bytes a minute.
// alice's requests of 1,500 characters each: the first two are stored (the
// second crosses the budget: its size is known only once it is published),
// then her E2A request is refused 429 with the budget in the message and a
// Retry-After, and her A2A call -32029 in JSON-RPC's shape. What she was
// charged is exactly what E2A_REQUESTS holds of hers, headers included;
// bob, with his own budget, is admitted meanwhile.
func TestRateLimitBytesAtTheDoors(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	kv, err := js.KeyValue(context.Background(), streams.RateLimitBucket)
	if err != nil {
		t.Fatal(err)
	}
	lim := ingress.NewLimiter(kv, ingress.LimiterConfig{Limits: ingress.RateLimits{BytesPerMinute: 2000}}, ingress.WithLimiterClock(testkit.MidMinute()),
		ingress.WithLimiterErrorHook(func(err error) { t.Errorf("limiter fell back: %v", err) }))
	base := frontDoor(t, nc, ingress.WithAuth(rlrAuth(t, rlrSigningKey)), ingress.WithLimiter(lim))
	alice := []string{"X-Api-Key", rlrAliceKey}
	bob := []string{"X-Api-Key", rlrBobKey}
	text := strings.Repeat("x", 1500)
	e2aBody := `{"params":{"text":"` + text + `"}}`

	for i := range 2 {
		if resp, b := do(t, "POST", base+"/v1/requests", e2aBody, alice...); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("alice's request %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	resp, b := do(t, "POST", base+"/v1/requests", e2aBody, alice...)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-RateLimit-Limit") != "" ||
		!strings.Contains(string(b), "2000 request bytes per minute") {
		t.Fatalf("alice's third request: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	resp, b = do(t, "POST", base+"/a2a", `{"jsonrpc":"2.0","id":7,"method":"tasks/send","params":{"message":{"role":"user","parts":[{"type":"text","text":"hi"}]}}}`, alice...)
	var rpc struct {
		ID    int             `json:"id"`
		Error *jsonrpc.Error  `json:"error"`
		Rest  json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &rpc); err != nil || rpc.Error == nil || rpc.Error.Code != jsonrpc.CodeRateLimited || rpc.ID != 7 ||
		!strings.Contains(rpc.Error.Message, "request bytes per minute") {
		t.Fatalf("alice's A2A call: %d %s", resp.StatusCode, b)
	}
	if resp, b := do(t, "POST", base+"/v1/requests", e2aBody, bob...); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("bob: %d %s", resp.StatusCode, b)
	}

	// Charged: the stored messages' sizes, as the stream counts them.
	stored := map[string]int64{}
	s, err := js.Stream(context.Background(), streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			UserID string `json:"user_id"`
		}
		if err := json.Unmarshal(m.Data, &env); err != nil {
			t.Fatal(err)
		}
		h := m.Header
		for _, get := range []string{"Nats-Sequence", "Nats-Stream", "Nats-Subject", "Nats-Time-Stamp"} {
			h.Del(get) // the get's, not the stored message's
		}
		stored[env.UserID] += streams.MessageSize(&nats.Msg{Header: h, Data: m.Data})
	}
	st, err := lim.Status(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(st.Usage["request_bytes_last_minute"]); got != stored["alice"] || got < 3000 {
		t.Fatalf("alice charged %d bytes; E2A_REQUESTS holds %d of hers (%v)", got, stored["alice"], stored)
	}
	if st, _ := lim.Status(context.Background(), "bob"); int64(st.Usage["request_bytes_last_minute"]) != stored["bob"] {
		t.Fatalf("bob charged %d bytes, stored %d", st.Usage["request_bytes_last_minute"], stored["bob"])
	}
}
