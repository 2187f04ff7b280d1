package e2a_test

import (
	"net/http"
	"testing"
)

// Spec §4.3: identity_origin is one of "system / user / agent / service".
// POST /v1/requests publishes an envelope whose identity_origin is any
// string the body names (without a principal that overrides it: auth off,
// or a gateway that AssertsUser), instead of answering 400 invalid_request:
// agents receive an identity origin outside the specification.
func TestFrontDoorRefusesIdentityOriginOutsideEnum(t *testing.T) {
	h := newHost(nil)
	rec := post(h, "/v1/requests?agent=echo", `{"request_id":"io-1","user_id":"u_001","identity_origin":"root","params":{"text":"hi"}}`)
	if rec.Code != http.StatusBadRequest {
		pub := "nothing"
		if p := h.Published(); len(p) > 0 {
			pub = "identity_origin " + p[0].IdentityOrigin
		}
		t.Fatalf("identity_origin \"root\": %d %s (published %s), want 400 invalid_request", rec.Code, rec.Body, pub)
	}
	if b := errorOf(t, rec); b.Code != "invalid_request" || b.Retryable {
		t.Fatalf("error %+v, want invalid_request, not retryable", b)
	}
	if n := len(h.Published()); n != 0 {
		t.Fatalf("%d envelopes published", n)
	}
}
