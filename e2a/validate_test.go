package e2a_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// frame builds a valid frame of request "r" and lets mod change it.
func frame(seq int64, final bool, mod ...func(*e2a.Response)) *e2a.Response {
	r := &e2a.Response{
		ProtocolVersion: "1.0",
		ResponseID:      "resp-" + string(rune('a'+seq)),
		RequestID:       "r",
		Sequence:        seq,
		IsFinal:         final,
		Status:          e2a.StatusInProgress,
		ResponseKind:    e2a.KindChunk,
		Timestamp:       "2026-03-29T12:00:00+00:00",
		Provenance:      e2a.Provenance{SourceProtocol: e2a.SourceE2A},
		Body:            json.RawMessage(`{"delta_kind":"text","delta":"x"}`),
	}
	if final {
		r.Status = e2a.StatusSucceeded
		r.ResponseKind = e2a.KindComplete
		r.Body = json.RawMessage(`{"result":{}}`)
	}
	for _, m := range mod {
		m(r)
	}
	return r
}

func failed(r *e2a.Response) {
	r.Status = e2a.StatusFailed
	r.ResponseKind = e2a.KindError
	r.Body = json.RawMessage(`{"code":"x","message":"boom","retryable":false}`)
}

func TestValidateAccepts(t *testing.T) {
	for name, r := range map[string]*e2a.Response{
		"chunk":        frame(0, false),
		"complete":     frame(0, true),
		"failed final": frame(0, true, failed),
		"jsonrpc error": frame(0, true, func(r *e2a.Response) {
			r.Status = e2a.StatusFailed
			r.ResponseKind = e2a.KindACPJSONRPCErr
			r.Body = json.RawMessage(`{"code":-32603,"message":"x"}`)
		}),
		"stream event": frame(0, false, func(r *e2a.Response) {
			r.ResponseKind = e2a.KindA2AStreamEvent
			r.Body = json.RawMessage(`{"branch":"status_update","payload":{}}`)
		}),
		"string rpc id":  frame(0, false, func(r *e2a.Response) { r.JSONRPCID = json.RawMessage(`"a"`) }),
		"number rpc id":  frame(0, false, func(r *e2a.Response) { r.JSONRPCID = json.RawMessage(`-12.5`) }),
		"z timestamp":    frame(0, false, func(r *e2a.Response) { r.Timestamp = "2026-03-29T12:00:00.123Z" }),
		"every kind ext": frame(0, true, func(r *e2a.Response) { r.ResponseKind = e2a.KindExt; r.Body = json.RawMessage(`{"ext_method":"_x"}`) }),
	} {
		if err := r.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	tests := map[string]func(*e2a.Response){
		"no protocol_version":    func(r *e2a.Response) { r.ProtocolVersion = "" },
		"no response_id":         func(r *e2a.Response) { r.ResponseID = "" },
		"no request_id":          func(r *e2a.Response) { r.RequestID = "" },
		"negative sequence":      func(r *e2a.Response) { r.Sequence = -1 },
		"unknown status":         func(r *e2a.Response) { r.Status = "done" },
		"no status":              func(r *e2a.Response) { r.Status = "" },
		"unknown kind":           func(r *e2a.Response) { r.ResponseKind = "e2a.bogus" },
		"no timestamp":           func(r *e2a.Response) { r.Timestamp = "" },
		"timestamp not RFC 3339": func(r *e2a.Response) { r.Timestamp = "yesterday" },
		"epoch timestamp":        func(r *e2a.Response) { r.Timestamp = "1774524781" },
		"no source_protocol":     func(r *e2a.Response) { r.Provenance.SourceProtocol = "" },
		"body missing":           func(r *e2a.Response) { r.Body = nil },
		"body array":             func(r *e2a.Response) { r.Body = json.RawMessage(`[]`) },
		"body null":              func(r *e2a.Response) { r.Body = json.RawMessage(`null`) },
		"failed without e2a.error": func(r *e2a.Response) {
			r.IsFinal = true
			r.Status = e2a.StatusFailed
			r.ResponseKind = e2a.KindComplete
			r.Body = json.RawMessage(`{}`)
		},
		"e2a.error not failed":      func(r *e2a.Response) { failed(r); r.IsFinal = true; r.Status = e2a.StatusSucceeded },
		"e2a.error without code":    func(r *e2a.Response) { failed(r); r.IsFinal = true; r.Body = json.RawMessage(`{"message":"m"}`) },
		"e2a.error without message": func(r *e2a.Response) { failed(r); r.IsFinal = true; r.Body = json.RawMessage(`{"code":"c"}`) },
		"final in_progress":         func(r *e2a.Response) { r.IsFinal = true },
		"non-final succeeded":       func(r *e2a.Response) { r.Status = e2a.StatusSucceeded; r.ResponseKind = e2a.KindComplete },
		"chunk without delta_kind":  func(r *e2a.Response) { r.Body = json.RawMessage(`{"delta":"x"}`) },
		"chunk body wrong type":     func(r *e2a.Response) { r.Body = json.RawMessage(`{"delta_kind":1}`) },
		"stream event unknown branch": func(r *e2a.Response) {
			r.ResponseKind = e2a.KindA2AStreamEvent
			r.Body = json.RawMessage(`{"branch":"other"}`)
		},
		"jsonrpc_id object":             func(r *e2a.Response) { r.JSONRPCID = json.RawMessage(`{"a":1}`) },
		"jsonrpc_id bool":               func(r *e2a.Response) { r.JSONRPCID = json.RawMessage(`true`) },
		"jsonrpc_id not JSON":           func(r *e2a.Response) { r.JSONRPCID = json.RawMessage(`abc`) },
		"failed non-final e2a.error":    func(r *e2a.Response) { failed(r) },
		"in_progress e2a.error non-fin": func(r *e2a.Response) { failed(r); r.Status = e2a.StatusInProgress },
	}
	for name, mod := range tests {
		t.Run(name, func(t *testing.T) {
			r := frame(0, false, mod)
			if err := r.Validate(); !errors.Is(err, e2a.ErrInvalidResponse) {
				t.Errorf("Validate() = %v, want ErrInvalidResponse", err)
			}
		})
	}
}

func TestResponseFromJSONRejects(t *testing.T) {
	valid := `{"protocol_version":"1.0","response_id":"r1","request_id":"q","sequence":0,"is_final":false,"status":"in_progress","response_kind":"e2a.chunk","timestamp":"2026-03-29T12:00:00+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":"x"}}`
	if _, err := e2a.ResponseFromJSON([]byte(valid)); err != nil {
		t.Fatalf("valid frame refused: %v", err)
	}
	required := []string{"protocol_version", "response_id", "request_id", "sequence", "is_final", "status", "response_kind", "timestamp", "provenance", "body"}
	for _, k := range required {
		var m map[string]any
		_ = json.Unmarshal([]byte(valid), &m)
		delete(m, k)
		b, _ := json.Marshal(m)
		if _, err := e2a.ResponseFromJSON(b); !errors.Is(err, e2a.ErrInvalidResponse) {
			t.Errorf("missing %s: %v", k, err)
		}
		m[k] = nil
		b, _ = json.Marshal(m)
		if _, err := e2a.ResponseFromJSON(b); !errors.Is(err, e2a.ErrInvalidResponse) {
			t.Errorf("null %s: %v", k, err)
		}
	}
	for name, in := range map[string]string{
		"not JSON": `{`, "array": `[]`, "null": `null`,
		"too deep": strings.Repeat("[", e2a.MaxNesting+1),
	} {
		if _, err := e2a.ResponseFromJSON([]byte(in)); !errors.Is(err, e2a.ErrInvalidJSON) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, in := range map[string]string{
		"sequence float":  strings.Replace(valid, `"sequence":0`, `"sequence":0.5`, 1),
		"sequence string": strings.Replace(valid, `"sequence":0`, `"sequence":"0"`, 1),
		"is_final string": strings.Replace(valid, `"is_final":false`, `"is_final":"no"`, 1),
		"jsonrpc_id bool": strings.Replace(valid, `"body"`, `"jsonrpc_id":true,"body"`, 1),
		"body string":     strings.Replace(valid, `{"delta_kind":"text","delta":"x"}`, `"x"`, 1),
	} {
		if _, err := e2a.ResponseFromJSON([]byte(in)); !errors.Is(err, e2a.ErrInvalidResponse) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// jsonrpc_id null reads as absent.
	r, err := e2a.ResponseFromJSON([]byte(strings.Replace(valid, `"body"`, `"jsonrpc_id":null,"body"`, 1)))
	if err != nil || r.JSONRPCID != nil {
		t.Errorf("null jsonrpc_id: %v %q", err, r.JSONRPCID)
	}
}

func TestCheckFrames(t *testing.T) {
	ok := []*e2a.Response{frame(0, false), frame(1, false), frame(2, true)}
	if err := e2a.CheckFrames(ok); err != nil {
		t.Fatalf("valid sequence: %v", err)
	}
	if err := e2a.CheckFrames([]*e2a.Response{frame(0, true, failed)}); err != nil {
		t.Fatalf("single failed final: %v", err)
	}
	tests := map[string]struct {
		frames []*e2a.Response
		want   error
	}{
		"empty":                    {nil, e2a.ErrFrameSequence},
		"does not start at 0":      {[]*e2a.Response{frame(1, false), frame(2, true)}, e2a.ErrFrameSequence},
		"gap":                      {[]*e2a.Response{frame(0, false), frame(2, true)}, e2a.ErrFrameSequence},
		"duplicate":                {[]*e2a.Response{frame(0, false), frame(0, false), frame(1, true)}, e2a.ErrFrameSequence},
		"out of order":             {[]*e2a.Response{frame(0, false), frame(2, false), frame(1, true)}, e2a.ErrFrameSequence},
		"no final":                 {[]*e2a.Response{frame(0, false), frame(1, false)}, e2a.ErrFrameSequence},
		"two finals":               {[]*e2a.Response{frame(0, true), frame(1, true)}, e2a.ErrFrameSequence},
		"frame after final":        {[]*e2a.Response{frame(0, false), frame(1, true), frame(2, false)}, e2a.ErrFrameSequence},
		"other request":            {[]*e2a.Response{frame(0, false), frame(1, true, func(r *e2a.Response) { r.RequestID = "other" })}, e2a.ErrFrameSequence},
		"failed without e2a.error": {[]*e2a.Response{frame(0, false), frame(1, true, func(r *e2a.Response) { r.Status = e2a.StatusFailed })}, e2a.ErrInvalidResponse},
		"invalid frame":            {[]*e2a.Response{frame(0, false, func(r *e2a.Response) { r.Timestamp = "" }), frame(1, true)}, e2a.ErrInvalidResponse},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if err := e2a.CheckFrames(tt.frames); !errors.Is(err, tt.want) {
				t.Errorf("CheckFrames = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSequenceCheckerIncremental(t *testing.T) {
	var c e2a.SequenceChecker
	if c.Done() || c.Next() != 0 {
		t.Fatal("zero value")
	}
	if err := c.Add(frame(1, false)); !errors.Is(err, e2a.ErrFrameSequence) {
		t.Fatalf("gap at start: %v", err)
	}
	for i := int64(0); i < 3; i++ {
		if err := c.Add(frame(i, false)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Add(frame(2, false)); !errors.Is(err, e2a.ErrFrameSequence) {
		t.Fatalf("duplicate: %v", err)
	}
	if c.Next() != 3 {
		t.Fatalf("next = %d after a refused frame", c.Next())
	}
	if err := c.Add(frame(3, true)); err != nil || !c.Done() {
		t.Fatal(err)
	}
	if err := c.Add(frame(4, true)); !errors.Is(err, e2a.ErrFrameSequence) {
		t.Fatalf("after final: %v", err)
	}
}

func TestResponseFor(t *testing.T) {
	env, err := e2a.FromJSON([]byte(`{"request_id":"q","jsonrpc_id":7,"session_id":"s","task_id":"t","context_id":"c","message_id":"m","correlation_id":"k","channel":"web","user_id":"u","source_agent_id":"a","method":"chat.send","is_stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	r := e2a.ResponseFor(env)
	if r.ProtocolVersion != "1.0" || r.RequestID != "q" || string(r.JSONRPCID) != "7" || r.SessionID != "s" || r.TaskID != "t" ||
		r.ContextID != "c" || r.MessageID != "m" || r.CorrelationID != "k" || r.Channel != "web" || r.UserID != "u" ||
		r.SourceAgentID != "a" || r.Method != "chat.send" || !r.IsStream || r.IdentityOrigin != e2a.IdentityAgent {
		t.Errorf("ResponseFor = %+v", r)
	}
	env.JSONRPCID[0] = '8'
	if string(r.JSONRPCID) != "7" {
		t.Error("ResponseFor shares jsonrpc_id bytes")
	}
	r.ResponseID, r.Timestamp, r.Status, r.ResponseKind, r.IsFinal = "x", e2a.Now(), e2a.StatusSucceeded, e2a.KindComplete, true
	r.Provenance.SourceProtocol = e2a.SourceE2A
	r.Body = e2a.MarshalBody(e2a.CompleteBody{Result: "ok"})
	if err := r.Validate(); err != nil {
		t.Errorf("completed template invalid: %v", err)
	}
}

func TestBodyAccessors(t *testing.T) {
	r := frame(0, false, func(r *e2a.Response) {
		r.Body = json.RawMessage(`{"delta_kind":"tool","delta":{"type":"function_call","id":"c1","name":"f","args":{"n":12345678901234567890}}}`)
	})
	c, err := r.Chunk()
	if err != nil {
		t.Fatal(err)
	}
	args := c.Delta.(map[string]any)["args"].(map[string]any)
	if args["n"].(json.Number).String() != "12345678901234567890" {
		t.Errorf("big number in body lost: %v", args["n"])
	}
	m, err := r.BodyMap()
	if err != nil || m["delta_kind"] != "tool" {
		t.Errorf("BodyMap = %v, %v", m, err)
	}
	if _, err := r.Error(); !errors.Is(err, e2a.ErrInvalidResponse) {
		t.Errorf("Error() on a chunk: %v", err)
	}
	if _, err := r.Complete(); !errors.Is(err, e2a.ErrInvalidResponse) {
		t.Errorf("Complete() on a chunk: %v", err)
	}
	if _, err := r.StreamEvent(); !errors.Is(err, e2a.ErrInvalidResponse) {
		t.Errorf("StreamEvent() on a chunk: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("MarshalBody(chan) did not panic")
		}
	}()
	e2a.MarshalBody(make(chan int))
}
