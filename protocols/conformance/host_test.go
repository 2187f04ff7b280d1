package conformance_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// TestHost: the fake host refuses with its Refusal, publishes (or fails
// with PublishErr) and records, holds and gives back stream slots, and
// serves a request's Frames through a renderer (here egress's NDJSON, as
// ServeE2A): one line per frame, in order.
func TestHost(t *testing.T) {
	h := &conformance.Host{}
	rec := httptest.NewRecorder()
	c, ok := h.Admit(rec, httptest.NewRequest(http.MethodPost, "/x", nil), "x", func(http.ResponseWriter, host.Refusal) {
		t.Fatal("refused")
	})
	if !ok {
		t.Fatal("not admitted")
	}
	sub, err := c.Submit(context.Background(), host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r1", Method: "m"}, Slot: true})
	if err != nil || sub.RequestID != "r1" || len(h.Published()) != 1 || h.Pools()[0] != "echo" || h.Slots() != 1 {
		t.Fatalf("submit: %+v %v %v %d", sub, err, h.Published(), h.Slots())
	}
	sub.Done()
	sub.Done()
	if h.Slots() != 0 {
		t.Fatalf("%d slots after Done", h.Slots())
	}
	release, ok := c.StreamSlot(rec, nil)
	if !ok || h.Slots() != 1 {
		t.Fatalf("slot: %v %d", ok, h.Slots())
	}
	release()
	release()
	if h.Slots() != 0 {
		t.Fatalf("%d slots after release", h.Slots())
	}

	sc := conformance.Scenarios()[0]
	h.Frames = map[string][]*e2a.Response{sc.RequestID(): sc.Frames}
	rec = httptest.NewRecorder()
	h.ServeE2A(rec, httptest.NewRequest(http.MethodGet, "/x", nil), sc.RequestID())
	lines, err := conformance.NDJSONLines(rec.Body.Bytes())
	if err != nil || len(lines) != len(sc.Frames) {
		t.Fatalf("%d lines for %d frames (%v): %s", len(lines), len(sc.Frames), err, rec.Body)
	}
	for i, l := range lines {
		r, err := e2a.ResponseFromJSON(l)
		if err != nil || r.Sequence != sc.Frames[i].Sequence {
			t.Fatalf("line %d: %v %s", i, err, l)
		}
	}
	if s := h.Served(); len(s) != 1 || s[0] != sc.RequestID()+" e2a_ndjson" {
		t.Fatalf("served %v", s)
	}

	refused := &conformance.Host{Refusal: &host.Refusal{Status: 429, Code: "rate_limit_exceeded"}}
	var got host.Refusal
	if _, ok := refused.Admit(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/x", nil), "x", func(_ http.ResponseWriter, f host.Refusal) { got = f }); ok || got.Code != "rate_limit_exceeded" {
		t.Fatalf("admitted, or refused with %+v", got)
	}
	c2, _ := (&conformance.Host{NoSlot: true, PublishErr: host.ErrBackpressure}).Admit(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/x", nil), "x", nil)
	if _, err := c2.Submit(context.Background(), host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r2"}}); !errors.Is(err, host.ErrBackpressure) {
		t.Fatalf("submit error %v", err)
	}
	if _, err := c2.Submit(context.Background(), host.Submission{Pool: "echo", Envelope: &e2a.Envelope{RequestID: "r3"}, Slot: true}); !errors.Is(err, host.ErrTooManyStreams) {
		t.Fatalf("submit error %v", err)
	}
	if _, ok := c2.StreamSlot(httptest.NewRecorder(), func(_ http.ResponseWriter, f host.Refusal) { got = f }); ok || got.Code != "too_many_streams" {
		t.Fatalf("slot given, or refused with %+v", got)
	}
}
