package e2a_test

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// An envelope written with MarshalEnvelope uses the JSON field names of the
// E2A specification (§4) and omits empty optionals; FromJSON reads it back
// unchanged, the numbers of params as json.Number.
func ExampleMarshalEnvelope() {
	env := &e2a.Envelope{
		ProtocolVersion: e2a.ProtocolVersion,
		RequestID:       "req_abc_01",
		SessionID:       "sess_xyz",
		Channel:         "web",
		Method:          "chat.send",
		IsStream:        true,
		Timestamp:       "2026-03-28T12:00:00+00:00",
		IdentityOrigin:  e2a.IdentityUser,
		UserID:          "u_001",
		Params:          map[string]any{"query": "Hello", "max_tokens": 256},
		Provenance:      &e2a.Provenance{SourceProtocol: e2a.SourceE2A},
	}
	b, err := e2a.MarshalEnvelope(env)
	if err != nil {
		fmt.Println("marshal:", err)
		return
	}
	fmt.Println(string(b))

	back, err := e2a.FromJSON(b)
	if err != nil {
		fmt.Println("read:", err)
		return
	}
	fmt.Println(back.RequestID, back.Method, back.IsStream)
	fmt.Printf("%q %d\n", back.ParamString("query"), back.ParamInt("max_tokens", 0))
	fmt.Printf("%T\n", back.Params["max_tokens"])
	// Output:
	// {"protocol_version":"1.0","request_id":"req_abc_01","session_id":"sess_xyz","channel":"web","method":"chat.send","is_stream":true,"timestamp":"2026-03-28T12:00:00+00:00","identity_origin":"user","user_id":"u_001","params":{"max_tokens":256,"query":"Hello"},"provenance":{"source_protocol":"e2a"}}
	// req_abc_01 chat.send true
	// "Hello" 256
	// json.Number
}

// FromJSON applies the compatibility rules of the specification (§9, §10):
// the legacy AgentRequest shape below has channel_id and req_method read as
// channel and method, its epoch timestamp normalized to RFC 3339 UTC and its
// metadata kept as channel_context. A field of a JSON type §4 does not allow
// is refused with ErrInvalidEnvelope, never converted.
func ExampleFromJSON() {
	legacy := []byte(`{
		"request_id": "req_legacy_1",
		"channel_id": "feishu",
		"session_id": "sess_feishu_1",
		"req_method": "chat.send",
		"is_stream": true,
		"timestamp": 1774524781.15,
		"params": {"query": "List desktop files"},
		"metadata": {"feishu_open_id": "ou_xxx"}
	}`)
	env, err := e2a.FromJSON(legacy)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("channel:", env.Channel)
	fmt.Println("method:", env.Method)
	fmt.Println("timestamp:", env.Timestamp)
	fmt.Println("channel_context:", env.ChannelContext)

	_, err = e2a.FromJSON([]byte(`{"request_id": 42}`))
	fmt.Println(errors.Is(err, e2a.ErrInvalidEnvelope), err)
	// Output:
	// channel: feishu
	// method: chat.send
	// timestamp: 2026-03-26T11:33:01.150000+00:00
	// channel_context: map[feishu_open_id:ou_xxx]
	// true e2a: invalid envelope: field "request_id": must be a string or null, not a number
}

// An agent answers a request with response frames. ResponseFor starts each
// frame from the request (request_id and the other ids are echoed), the
// writer sets the rest, and MarshalResponse encodes it; ResponseFromJSON reads
// and validates a frame, and the typed accessors (here Complete) decode its
// body.
func ExampleMarshalResponse() {
	req := &e2a.Envelope{RequestID: "req_1", SessionID: "sess_xyz", Method: "chat.send"}

	r := e2a.ResponseFor(req)
	r.ResponseID = "r3"
	r.Sequence = 2
	r.IsFinal = true
	r.Status = e2a.StatusSucceeded
	r.ResponseKind = e2a.KindComplete
	r.Timestamp = e2a.FormatTime(time.Date(2026, 3, 29, 12, 0, 2, 0, time.UTC))
	r.Provenance = e2a.Provenance{SourceProtocol: e2a.SourceE2A}
	r.Body = e2a.MarshalBody(e2a.CompleteBody{Result: map[string]any{"content": "Hello world"}})

	b, err := e2a.MarshalResponse(&r)
	if err != nil {
		fmt.Println("marshal:", err)
		return
	}
	fmt.Println(string(b))

	back, err := e2a.ResponseFromJSON(b)
	if err != nil {
		fmt.Println("read:", err)
		return
	}
	c, err := back.Complete()
	fmt.Println(back.RequestID, back.Sequence, back.IsFinal, c.Result, err)

	// A frame that breaks §12.2: status failed needs response_kind e2a.error.
	r.Status = e2a.StatusFailed
	fmt.Println(r.Validate())
	// Output:
	// {"protocol_version":"1.0","response_id":"r3","request_id":"req_1","sequence":2,"is_final":true,"status":"succeeded","response_kind":"e2a.complete","timestamp":"2026-03-29T12:00:02+00:00","provenance":{"source_protocol":"e2a"},"body":{"result":{"content":"Hello world"}},"session_id":"sess_xyz","identity_origin":"agent","method":"chat.send"}
	// req_1 2 true map[content:Hello world] <nil>
	// e2a: invalid response: status failed requires response_kind e2a.error, got "e2a.complete"
}

// exampleFrame returns the encoded frame seq of request req_1: in_progress text
// chunks, or the final e2a.complete frame.
func exampleFrame(seq int64, final bool, text string) []byte {
	r := e2a.Response{
		ProtocolVersion: e2a.ProtocolVersion,
		ResponseID:      "r" + strconv.FormatInt(seq, 10),
		RequestID:       "req_1",
		Sequence:        seq,
		IsFinal:         final,
		Status:          e2a.StatusInProgress,
		ResponseKind:    e2a.KindChunk,
		Timestamp:       "2026-03-29T12:00:00+00:00",
		Provenance:      e2a.Provenance{SourceProtocol: e2a.SourceE2A},
		Body:            e2a.MarshalBody(e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: text}),
	}
	if final {
		r.Status = e2a.StatusSucceeded
		r.ResponseKind = e2a.KindComplete
		r.Body = e2a.MarshalBody(e2a.CompleteBody{Result: map[string]any{"content": text}})
	}
	b, err := e2a.MarshalResponse(&r)
	if err != nil {
		panic(err)
	}
	return b
}

// Several consecutive frames of a request may be stored as one NATS message,
// a burst: its payload is the frames joined by line feeds (AppendBurst) and
// its E2A-Frames header (subjects.HeaderFrames) gives their count.
// BurstResponses splits and decodes such a message; a count that does not
// match the payload is refused with ErrInvalidBurst.
func ExampleBurstResponses() {
	var payload []byte
	payload = e2a.AppendBurst(payload, exampleFrame(0, false, "Hello"))
	payload = e2a.AppendBurst(payload, exampleFrame(1, false, " world"))
	payload = e2a.AppendBurst(payload, exampleFrame(2, true, "Hello world"))
	header := map[string]string{subjects.HeaderFrames: "3", subjects.HeaderSequence: "0"}

	frames, err := e2a.BurstResponses(header[subjects.HeaderFrames], payload)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range frames {
		fmt.Println(f.Sequence, f.ResponseKind, f.Status, f.IsFinal)
	}
	fmt.Println("valid sequence:", e2a.CheckFrames(frames) == nil)

	_, err = e2a.BurstResponses("2", payload)
	fmt.Println(errors.Is(err, e2a.ErrInvalidBurst))
	// Output:
	// 0 e2a.chunk in_progress false
	// 1 e2a.chunk in_progress false
	// 2 e2a.complete succeeded true
	// valid sequence: true
	// true
}

// CheckFrames checks the invariants of §12.3 over every frame of one
// request: sequences 0, 1, 2, … without gaps, and exactly one final frame,
// the last. Its errors wrap ErrFrameSequence.
func ExampleCheckFrames() {
	read := func(frames ...[]byte) []*e2a.Response {
		var out []*e2a.Response
		for _, b := range frames {
			r, err := e2a.ResponseFromJSON(b)
			if err != nil {
				panic(err)
			}
			out = append(out, r)
		}
		return out
	}
	fmt.Println(e2a.CheckFrames(read(exampleFrame(0, false, "Hi"), exampleFrame(1, true, "Hi"))))
	fmt.Println(e2a.CheckFrames(read(exampleFrame(0, false, "Hi"), exampleFrame(2, true, "Hi"))))
	fmt.Println(e2a.CheckFrames(read(exampleFrame(0, true, "Hi"), exampleFrame(1, true, "Hi"))))
	fmt.Println(e2a.CheckFrames(read(exampleFrame(0, false, "Hi"))))

	err := e2a.CheckFrames(read(exampleFrame(1, true, "Hi")))
	fmt.Println(errors.Is(err, e2a.ErrFrameSequence))
	// Output:
	// <nil>
	// e2a: frame sequence violation: request "req_1": gap, sequence 2 where 1 was expected
	// e2a: frame sequence violation: request "req_1": frame 1 after the final frame
	// e2a: frame sequence violation: request "req_1": no final frame, 1 received
	// true
}

// A turn that ends asking the user a question (input-required) is a final
// a2a.stream_event frame of branch status_update, status succeeded, whose
// body InterruptBody builds; Response.Interrupt reads the state and the
// agent's text back.
func ExampleInterruptBody() {
	body := e2a.InterruptBody(e2a.StateInputRequired, "Which city?")
	r := e2a.Response{
		ProtocolVersion: e2a.ProtocolVersion,
		ResponseID:      "r1",
		RequestID:       "req_7",
		Sequence:        1,
		IsFinal:         true,
		Status:          e2a.StatusSucceeded,
		ResponseKind:    e2a.KindA2AStreamEvent,
		Timestamp:       "2026-03-29T12:00:00+00:00",
		Provenance:      e2a.Provenance{SourceProtocol: e2a.SourceE2A},
		Body:            e2a.MarshalBody(body),
	}
	fmt.Println(string(r.Body))
	fmt.Println("valid:", r.Validate() == nil)
	state, text, ok := r.Interrupt()
	fmt.Println(state, text, ok)
	// Output:
	// {"branch":"status_update","payload":{"kind":"status-update","status":{"state":"input-required","message":{"kind":"message","role":"agent","parts":[{"kind":"text","text":"Which city?"}]}},"final":true}}
	// valid: true
	// input-required Which city? true
}

// FormatTime writes the timestamps of envelopes and frames: RFC 3339 in UTC
// with a +00:00 offset, microseconds only when there is a fraction. ParseTime
// reads any RFC 3339 form back, a leap second included (read as the next
// second).
func ExampleParseTime() {
	paris := time.FixedZone("CEST", 2*60*60)
	fmt.Println(e2a.FormatTime(time.Date(2026, 3, 28, 14, 0, 0, 0, paris)))
	fmt.Println(e2a.FormatTime(time.Date(2026, 3, 28, 12, 0, 0, 150_000_000, time.UTC)))

	t, err := e2a.ParseTime("2026-03-28T14:00:00+02:00")
	fmt.Println(t.UTC(), err)
	t, err = e2a.ParseTime("2016-12-31T23:59:60Z")
	fmt.Println(t.UTC(), err)
	_, err = e2a.ParseTime("2026-03-28 14:00")
	fmt.Println(err != nil)
	// Output:
	// 2026-03-28T12:00:00+00:00
	// 2026-03-28T12:00:00.150000+00:00
	// 2026-03-28 12:00:00 +0000 UTC <nil>
	// 2017-01-01 00:00:00 +0000 UTC <nil>
	// true
}
