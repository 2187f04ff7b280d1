package a2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// chargeHost is the kit's fake pipeline whose caller's Charge (a body's
// second request and after) is refused with refusal.
type chargeHost struct {
	*fakeHost
	refusal host.Refusal
}

func (h chargeHost) Admit(w http.ResponseWriter, r *http.Request, protocol string, refuse host.Refuse) (host.Caller, bool) {
	c, ok := h.fakeHost.Admit(w, r, protocol, refuse)
	if !ok {
		return nil, false
	}
	return chargeCaller{Caller: c, refusal: h.refusal}, true
}

type chargeCaller struct {
	host.Caller
	refusal host.Refusal
}

func (c chargeCaller) Charge(context.Context, string, int) *host.Refusal { return &c.refusal }

// TestRefusalCarriesRetryAfter: a refusal's wait reaches the client. An
// error line carries it as detail.retry_after (whole seconds rounded up,
// at least 1: the rate limit body's retry_after, since A2EError has no
// field of its own for it), and the HTTP answer of a refusal before any
// line as Retry-After unless the gate set one. The 503 of a limiter
// unavailable had no wait at all in its line (only a rate limit's body,
// as detail.limit, had one), and once the answer has started the line is
// the only place it can go.
func TestRefusalCarriesRetryAfter(t *testing.T) {
	unavailable := host.Refusal{Status: http.StatusServiceUnavailable, Code: "unavailable",
		Message: "rate limiter unavailable; retry later", Retryable: true, RetryAfter: 1500 * time.Millisecond}
	rec, msgs := post(t, &fakeHost{Refusal: &unavailable}, `{"a2e":"1.0","id":"p1","type":"ping"}`)
	if rec.Code != http.StatusServiceUnavailable || len(msgs) != 1 || msgs[0].Detail["retry_after"] != float64(2) {
		t.Errorf("refused by the gate: %d %+v, want one error line with detail.retry_after 2", rec.Code, msgs)
	}
	if got := rec.Header().Get("Retry-After"); got != "2" {
		t.Errorf("refused by the gate: Retry-After %q, want 2", got)
	}
	const two = `{"a2e":"1.0","id":"c1","type":"tool/call/req","req_id":"r-1"}
{"a2e":"1.0","id":"c2","type":"tool/call/req","req_id":"r-2"}
`
	h := chargeHost{fakeHost: &fakeHost{}, refusal: unavailable}
	rec, msgs = post(t, h, two)
	last := msgs[len(msgs)-1]
	if rec.Code != http.StatusOK || last.Type != a2e.ErrorType || last.ReqID != "r-2" || last.Code != "unavailable" {
		t.Fatalf("limiter unavailable at the second request: %d, last line %+v", rec.Code, last)
	}
	if last.Retryable == nil || !*last.Retryable || last.Detail["retry_after"] != float64(2) || last.Detail["http_status"] != float64(503) {
		t.Errorf("limiter unavailable: detail %v retryable %v, want retry_after 2, http_status 503, retryable", last.Detail, last.Retryable)
	}
	h.refusal = host.Refusal{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded", Message: "slow down", Retryable: true}
	if _, msgs = post(t, h, two); msgs[len(msgs)-1].Detail["retry_after"] != nil {
		t.Errorf("a refusal with no known wait: detail %v, want no retry_after", msgs[len(msgs)-1].Detail)
	}
}

// TestHugeTypeBounded: a message type of 1 MiB never comes back whole.
// The normalizer quotes and cuts what it echoes of a client's value in
// its messages, but the front door read the type of a normalizer error
// (Error.Method) directly for the error line's capability_name, as it
// reads a submitted message's type: the 1 MiB came back in the line.
func TestHugeTypeBounded(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	for name, tc := range map[string]struct {
		h    *fakeHost
		line string
	}{
		"refused by the normalizer": {&fakeHost{BodyLimit: 2 << 20}, `{"a2e":"1.0","id":"c1","type":"` + huge + `","ts":"never"}`},
		"refused at the publish":    {&fakeHost{BodyLimit: 2 << 20, PublishErr: host.ErrBackpressure}, `{"a2e":"1.0","id":"c1","type":"` + huge + `"}`},
	} {
		rec, msgs := post(t, tc.h, tc.line+"\n")
		if len(msgs) != 1 || msgs[0].Type != a2e.ErrorType || msgs[0].ReqID != "c1" {
			t.Fatalf("%s: %d bytes of answer, want one error line for c1", name, rec.Body.Len())
		}
		if n := rec.Body.Len(); n > 2<<10 {
			t.Errorf("%s: the error line is %d bytes (capability_name %d bytes), want it bounded", name, n, len(msgs[0].CapabilityName))
		}
		if c := msgs[0].CapabilityName; !strings.HasPrefix(c, "xxxx") {
			t.Errorf("%s: capability_name %.80q, want the type's first runes", name, c)
		}
	}
}
