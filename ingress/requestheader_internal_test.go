package ingress

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// setHeader is the request header as publishAfter built it before
// requestHeader: one Set per header.
func setHeader(t *testing.T, env *e2a.Envelope, after []string, check idCheck) nats.Header {
	h := nats.Header{}
	if check == checkWindow {
		h.Set(subjects.HeaderMsgID, env.RequestID)
	}
	h.Set(subjects.HeaderRequestID, env.RequestID)
	if len(after) > 0 {
		h.Set(subjects.HeaderAfterRequest, after[0])
	}
	if len(after) > 1 {
		list, _ := json.Marshal(after[1:])
		h.Set(subjects.HeaderEarlierRequests, string(list))
	}
	if check == checkStored {
		any, err := subjects.RequestAnyPool(env.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		h.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		h.Set(jetstream.ExpectedLastSubjSeqSubjHeader, any)
	}
	if env.Trace != nil {
		if env.Trace.Traceparent != "" {
			h.Set(subjects.HeaderTraceparent, env.Trace.Traceparent)
		}
		if env.Trace.Tracestate != "" {
			h.Set(subjects.HeaderTracestate, env.Trace.Tracestate)
		}
	}
	return h
}

// TestRequestHeader: a request message's header is the one a Set per
// header made, each value its own slice of one string (a later Add or Set
// on one header leaves the others as they are), in 4 allocations for a
// request of a chosen id (its expected-last-subject filter, the values'
// array, the map and its slots): 7 before. Only Publisher.Publish's
// (checkWindow) carries Nats-Msg-Id.
func TestRequestHeader(t *testing.T) {
	trace := &e2a.TraceContext{Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Tracestate: "k=v"}
	for _, c := range []struct {
		env   *e2a.Envelope
		after []string
		check idCheck
	}{
		{&e2a.Envelope{RequestID: "r1"}, nil, checkWindow},
		{&e2a.Envelope{RequestID: "r1"}, nil, checkStored},
		{&e2a.Envelope{RequestID: "r1"}, nil, checkNone},
		{&e2a.Envelope{RequestID: "r1", Trace: trace}, []string{"r0"}, checkStored},
		{&e2a.Envelope{RequestID: "r1", Trace: &e2a.TraceContext{Traceparent: trace.Traceparent}}, []string{"r0", "q", "p"}, checkWindow},
		{&e2a.Envelope{RequestID: "r1", Trace: &e2a.TraceContext{Traceparent: trace.Traceparent}}, []string{"r0", "q"}, checkNone},
	} {
		got, err := requestHeader(c.env, c.after, c.check)
		if err != nil {
			t.Fatal(err)
		}
		if want := setHeader(t, c.env, c.after, c.check); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: header %v, want %v", c, got, want)
		}
		got.Add(subjects.HeaderMsgID, "x")
		if got.Get(subjects.HeaderRequestID) != c.env.RequestID {
			t.Errorf("%+v: an Add to one header changed another: %v", c, got)
		}
	}
	env := &e2a.Envelope{RequestID: "bridge-mx1a2b3c-000123"}
	if n := testing.AllocsPerRun(100, func() { _, _ = requestHeader(env, nil, checkStored) }); n > 4 {
		t.Errorf("requestHeader: %v allocations, want at most 4", n)
	}
}
