package protocols_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	a2asdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/a2av1"
	"github.com/e2a-pipeline/pipeline/protocols/a2e"
	"github.com/e2a-pipeline/pipeline/protocols/acp"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// fuzzSep separates the frames of one fuzz input: the record separator of
// JSON text sequences (RFC 7464), so that a frame may hold line breaks (a
// frame stored pretty-printed) and the renderers' one-line rules are
// exercised too.
const fuzzSep = "\x1e"

// fuzzMaxFrames bounds the frames of one input.
const fuzzMaxFrames = 8

// fuzzRequestID is the request the frames are read for.
const fuzzRequestID = "req-fuzz"

// Output shapes of the renderers, for the well-formedness checks.
const (
	shapeSSE    = "sse"    // Server-Sent Events, every data: one JSON value
	shapeNDJSON = "ndjson" // one JSON value a line (blank lines: heartbeats)
	shapeJSON   = "json"   // one JSON value (blank lines first: heartbeats)
)

// renderCase is one renderer under the fuzz test: the registry format it
// answers, the shape of its output, whether its messages are JSON-RPC 2.0
// objects, and how it is built as the protocol's front door builds it.
type renderCase struct {
	name    string
	format  string
	shape   string
	jsonrpc bool
	// stored: the renderer writes frames as stored (E2A's), so their bytes,
	// valid UTF-8 or not, are the publisher's; every other renderer
	// re-encodes and must write UTF-8.
	stored bool
	// wallClock: what it writes carries the time it runs (A2A's
	// resubscription opens with a working status-update stamped now), so
	// two runs differ.
	wallClock bool
	// pingClock: its heartbeat is a line stamped now (A2E's ping), left
	// out when two runs are compared.
	pingClock bool
	make      func(o *render.Output, from int64, final bool) render.Renderer
}

// renderCases: every renderer of every registered format, with the
// variants of its parameters that change what it writes.
func renderCases() []renderCase {
	submitted := conformance.Time()
	a2aStream := func(p a2amap.Params) func(o *render.Output, from int64, _ bool) render.Renderer {
		p.JSONRPCID, p.Submitted = json.RawMessage(`"rpc-1"`), submitted
		return func(o *render.Output, from int64, _ bool) render.Renderer {
			return a2a.NewStream(o, fuzzRequestID, p, from)
		}
	}
	a2aSend := func(p a2amap.Params) func(o *render.Output, _ int64, _ bool) render.Renderer {
		p.JSONRPCID = json.RawMessage(`7`)
		return func(o *render.Output, _ int64, _ bool) render.Renderer { return a2a.NewSend(o, fuzzRequestID, p) }
	}
	one := 1
	textOnly := []string{"text/plain"}
	env := []byte(`{"protocol_version":"1.0","request_id":"req-fuzz","params":{"text":"hi"}}`)
	var cases []renderCase
	for _, w := range []struct {
		suffix             string
		projections, redac bool
	}{{"", false, false}, {"_projections", true, false}, {"_redacted", false, true}, {"_projections_redacted", true, true}} {
		cases = append(cases,
			renderCase{name: egress.FormatE2ASSE + w.suffix, format: egress.FormatE2ASSE, shape: shapeSSE, stored: true,
				make: func(o *render.Output, _ int64, _ bool) render.Renderer {
					return egress.WrapE2A(egress.NewE2ASSE(o, 2*time.Second, "ok"), projector(w.projections), w.redac)
				}},
			renderCase{name: egress.FormatE2ANDJSON + w.suffix, format: egress.FormatE2ANDJSON, shape: shapeNDJSON, stored: true,
				make: func(o *render.Output, _ int64, _ bool) render.Renderer {
					return egress.WrapE2A(egress.NewE2ANDJSON(o), projector(w.projections), w.redac)
				}},
			renderCase{name: egress.FormatE2AJSON + w.suffix, format: egress.FormatE2AJSON, shape: shapeJSON, stored: true,
				make: func(o *render.Output, from int64, final bool) render.Renderer {
					return egress.WrapE2A(egress.NewE2AJSON(o, fuzzRequestID, env, final, from), projector(w.projections), w.redac)
				}},
		)
	}
	cases = append(cases,
		renderCase{name: a2a.StreamFormat, format: a2a.StreamFormat, shape: shapeSSE, jsonrpc: true,
			make: a2aStream(a2amap.Params{Interaction: true})},
		renderCase{name: a2a.StreamFormat + "_basic", format: a2a.StreamFormat, shape: shapeSSE, jsonrpc: true,
			make: a2aStream(a2amap.Params{TaskID: "task-1", ContextID: "ctx-1"})},
		renderCase{name: a2a.StreamFormat + "_text_only", format: a2a.StreamFormat, shape: shapeSSE, jsonrpc: true,
			make: a2aStream(a2amap.Params{AcceptedOutputModes: textOnly, Interaction: true})},
		renderCase{name: a2a.StreamFormat + "_resubscribe", format: a2a.StreamFormat, shape: shapeSSE, jsonrpc: true, wallClock: true,
			make: a2aStream(a2amap.Params{Resubscribe: true, TaskID: "task-1", Interaction: true})},
		renderCase{name: a2a.SendFormat, format: a2a.SendFormat, shape: shapeJSON, jsonrpc: true,
			make: a2aSend(a2amap.Params{Interaction: true})},
		renderCase{name: a2a.SendFormat + "_basic", format: a2a.SendFormat, shape: shapeJSON, jsonrpc: true,
			make: a2aSend(a2amap.Params{HistoryLength: &one})},
		renderCase{name: a2a.SendFormat + "_text_only", format: a2a.SendFormat, shape: shapeJSON, jsonrpc: true,
			make: a2aSend(a2amap.Params{AcceptedOutputModes: textOnly, Interaction: true})},
		// A2A v1.0's JSON-RPC stream: an error's ErrorInfo carries the
		// time it is written.
		renderCase{name: a2av1.StreamFormat, format: a2av1.StreamFormat, shape: shapeSSE, jsonrpc: true, wallClock: true,
			make: func(o *render.Output, from int64, _ bool) render.Renderer {
				return a2av1.NewStream(o, fuzzRequestID, a2amap.Params{Interaction: true, Submitted: submitted}, json.RawMessage(`"rpc-1"`), from)
			}},
		renderCase{name: a2av1.StreamFormat + "_basic", format: a2av1.StreamFormat, shape: shapeSSE, jsonrpc: true, wallClock: true,
			make: func(o *render.Output, from int64, _ bool) render.Renderer {
				return a2av1.NewStream(o, fuzzRequestID, a2amap.Params{TaskID: "task-1", ContextID: "ctx-1", Submitted: submitted}, json.RawMessage(`7`), from)
			}},
		renderCase{name: a2av1.StreamFormat + "_rest", format: a2av1.StreamFormat, shape: shapeSSE, wallClock: true,
			make: func(o *render.Output, from int64, _ bool) render.Renderer {
				return a2av1.NewRESTStream(o, fuzzRequestID, a2amap.Params{Interaction: true, Submitted: submitted}, from)
			}},
		renderCase{name: a2a.AgentVaultFormat, format: a2a.AgentVaultFormat, shape: shapeSSE,
			make: func(o *render.Output, _ int64, _ bool) render.Renderer {
				return a2a.NewAgentVaultStream(o, fuzzRequestID, a2a.AgentVaultParams{JSONRPCID: json.RawMessage(`"av"`)})
			}},
		renderCase{name: acp.Format + "_ndjson", format: acp.Format, shape: shapeNDJSON, jsonrpc: true,
			make: func(o *render.Output, _ int64, _ bool) render.Renderer {
				return acp.NewRenderer(o, acp.Params{JSONRPCID: json.RawMessage(`42`)})
			}},
		renderCase{name: acp.Format + "_sse", format: acp.Format, shape: shapeSSE, jsonrpc: true,
			make: func(o *render.Output, _ int64, _ bool) render.Renderer {
				return acp.NewRenderer(o, acp.Params{JSONRPCID: json.RawMessage(`"p"`), SessionID: "s1", SSE: true})
			}},
		renderCase{name: a2e.Format, format: a2e.Format, shape: shapeNDJSON, pingClock: true,
			make: func(o *render.Output, _ int64, _ bool) render.Renderer {
				return a2e.NewRenderer(o, a2e.Params{ReqID: "a1", ReqType: "tool/call/req"})
			}},
		renderCase{name: a2e.Format + "_defaults", format: a2e.Format, shape: shapeNDJSON, pingClock: true,
			make: func(o *render.Output, _ int64, _ bool) render.Renderer {
				return a2e.NewRenderer(o, a2e.Params{})
			}},
	)
	return cases
}

// splitFrames cuts data into at most fuzzMaxFrames frames.
func splitFrames(data []byte) [][]byte {
	parts := bytes.SplitN(data, []byte(fuzzSep), fuzzMaxFrames)
	return parts
}

// readFrames mirrors what a Reader does with the stored frames of one
// request read from sequence from (egress.Reader.accept and Next): a frame
// whose head does not decode is ErrInvalidFrame (a frame without a
// sequence is taken as sequence 0, as when the publisher set the sequence
// header to 0); a frame before the resume point is skipped (a final one
// ends the read); a gap is ErrInvalidFrame; a decoding reader also
// refuses a frame that does not decode whole, or whose decoded sequence is
// not its head's. deliver is called with each frame delivered, in order,
// up to the final frame; its error ends the read. The result is nil after
// the final frame, the reader's error, deliver's, or ErrWaitTimeout when
// the frames end without a final one (the reader waits for more, then
// gives up).
func readFrames(frames [][]byte, from int64, decode bool, deliver func(f *render.Frame) error) error {
	expect := from
	for i, raw := range frames {
		streamSeq := uint64(i + 1)
		f, err := render.HeadFrame(raw, streamSeq)
		if err != nil {
			return err
		}
		seq := render.SeqID(f)
		n, final := frameHead(raw)
		switch {
		case n < expect:
			if final {
				return nil
			}
			continue
		case n > expect:
			return fmt.Errorf("%w: request %q: stored sequence %s where %d was expected", egress.ErrInvalidFrame, fuzzRequestID, seq, expect)
		}
		if decode {
			resp := new(e2a.Response)
			if err := json.Unmarshal(raw, resp); err != nil {
				return fmt.Errorf("%w: sequence %s: %v", egress.ErrInvalidFrame, seq, err)
			}
			if resp.Sequence != n {
				return fmt.Errorf("%w: header sequence %d, body sequence %d", egress.ErrInvalidFrame, n, resp.Sequence)
			}
			f = &render.Frame{Response: resp, Raw: raw, StreamSeq: streamSeq}
		}
		if err := deliver(f); err != nil {
			return err
		}
		if final {
			return nil
		}
		expect = n + 1
	}
	return fmt.Errorf("%w: request %q: waited 5m0s", egress.ErrWaitTimeout, fuzzRequestID)
}

// frameHead is the head of a frame HeadFrame accepted, as the reader
// reads it (what json.Unmarshal gives: the reader's scan is checked to
// agree with it), a missing sequence read as 0.
func frameHead(raw []byte) (seq int64, final bool) {
	var h struct {
		Sequence     *int64 `json:"sequence"`
		IsFinal      bool   `json:"is_final"`
		ResponseKind string `json:"response_kind"`
	}
	_ = json.Unmarshal(raw, &h)
	if h.Sequence != nil {
		seq = *h.Sequence
	}
	return seq, h.IsFinal
}

// fuzzSeeds are the inputs the corpus starts from: the conformance
// scenarios' frames, the text fast paths' frames, and hostile shapes.
func fuzzSeeds() [][]byte {
	join := func(frames []*e2a.Response) []byte {
		var parts [][]byte
		for _, r := range frames {
			b, err := json.Marshal(r)
			if err != nil {
				panic(err)
			}
			parts = append(parts, b)
		}
		return bytes.Join(parts, []byte(fuzzSep))
	}
	var seeds [][]byte
	for _, sc := range conformance.Scenarios() {
		if len(sc.Frames) > 0 {
			seeds = append(seeds, join(sc.Frames))
		}
	}
	tf := conformance.TextFrames()
	for i := 0; i < len(tf); i += fuzzMaxFrames - 1 {
		end := min(i+fuzzMaxFrames-1, len(tf))
		chunk := tf[i:end]
		for j, r := range chunk {
			c := *r
			c.Sequence = int64(j)
			chunk[j] = &c
		}
		seeds = append(seeds, join(chunk))
	}
	head := `"protocol_version":"1.0","response_id":"r","request_id":"req-fuzz","timestamp":"2025-01-23T10:30:00Z","provenance":{"source_protocol":"e2a"}`
	frame := func(seq int, final bool, status, kind, body string) string {
		return fmt.Sprintf(`{%s,"sequence":%d,"is_final":%t,"status":%q,"response_kind":%q,"body":%s}`, head, seq, final, status, kind, body)
	}
	chunk := func(seq int, body string) string { return frame(seq, false, "in_progress", e2a.KindChunk, body) }
	done := func(seq int) string { return frame(seq, true, "succeeded", e2a.KindComplete, `{"result":"ok"}`) }
	seq := func(fs ...string) []byte { return []byte(strings.Join(fs, fuzzSep)) }
	deep := strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200)
	deepArr := strings.Repeat(`[`, 300) + strings.Repeat("]", 300)
	seeds = append(seeds,
		seq(chunk(0, `{"delta_kind":"text","delta":"a"}`), done(1)),
		seq(chunk(0, `{"delta_kind":"tool","delta":`+deep+`}`), done(1)),
		seq(chunk(0, `{"delta_kind":"custom","delta":`+deepArr+`}`), done(1)),
		seq(chunk(0, `{"delta_kind":"text","delta":1e999999}`), done(1)),
		seq(chunk(0, `{"delta_kind":"text","delta":-0.000000000000000000000000000001e-400}`), chunk(1, `{"delta_kind":"reasoning","delta":123456789012345678901234567890}`), done(2)),
		seq(chunk(0, `null`), frame(1, true, "succeeded", e2a.KindComplete, `null`)),
		seq(chunk(0, `{"delta_kind":null,"delta":null}`), frame(1, true, "failed", e2a.KindError, `null`)),
		seq(chunk(0, `[]`), frame(1, true, "failed", e2a.KindError, `{"code":1,"message":[],"details":"x","retryable":"yes","external":{"protocol":"acp","code":1e400,"message":{}}}`)),
		seq(chunk(0, `"text"`), frame(1, true, "succeeded", e2a.KindComplete, `{"result":{"content":5,"text":null}}`)),
		seq(frame(0, true, "succeeded", e2a.KindComplete, `{"result":{"stopReason":{"x":1}}}`)),
		// Wrong types for the head and the envelope's fields.
		[]byte(`{"sequence":"0","is_final":"true","response_kind":5,"body":{}}`),
		[]byte(`{"sequence":0.5,"is_final":1}`),
		[]byte(`{"sequence":0,"is_final":true,"response_kind":"e2a.complete","status":7,"timestamp":{},"provenance":"e2a","metadata":[],"jsonrpc_id":{"a":1},"body":{"result":"x"}}`),
		[]byte(`{"sequence":0,"is_final":true,"response_kind":"e2a.complete","metadata":{"llm_response_id":5},"projections":[1],"body":{"result":"x"}}`),
		seq(`{"sequence":0,"response_kind":"e2a.chunk","metadata":{"llm_response_id":{"x":1}},"body":{"delta_kind":"text","delta":"x"}}`, `{"sequence":1,"is_final":true,"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"end"}}`),
		seq(chunk(0, `{"delta_kind":"text","delta":"a"}`), `{"sequence":1,"is_final":true,"status":"succeeded","response_kind":"e2a.complete","timestamp":5,"body":{"result":"x"}}`),
		// An artifact's labels (a2amap.MetaArtifact*): good, of the wrong
		// type, and a text that only quotes the keys.
		seq(`{"sequence":0,"response_kind":"e2a.chunk","metadata":{"llm_response_id":"a1","artifact_name":"R","artifact_metadata":{"k":[1]},"artifact_part_metadata":{"lang":"en"}},"body":{"delta_kind":"text","delta":"x"}}`,
			`{"sequence":1,"response_kind":"e2a.chunk","metadata":{"llm_response_id":"a1","artifact_metadata":"no","artifact_part_metadata":[1]},"body":{"delta_kind":"reasoning","delta":"y"}}`,
			`{"sequence":2,"response_kind":"e2a.chunk","metadata":{"llm_response_id":"a1"},"body":{"delta_kind":"text","delta":"\"artifact_metadata\":{}"}}`, done(3)),
		[]byte(`null`), []byte(`[]`), []byte(`"frame"`), []byte(`{}`), []byte(`{"sequence":-1,"is_final":true}`),
		[]byte(`{"sequence":0,"Sequence":1,"IS_FINAL":true,"Response_Kind":"e2a.error","body":{"code":"x"}}`),
		[]byte("{\"sequence\":0,\n\"is_final\":true,\r\n\"response_kind\":\"e2a.complete\",\t\"body\":{\"result\":\"multi\\nline\"}}"),
		[]byte("{\"sequence\":0,\"is_final\":true,\"response_kind\":\"e2a.complete\",\"body\":{\"result\":\"\xff\xfe bad utf-8 \xc3\"}}"),
		[]byte("{\"sequence\":0,\"is_final\":true,\"response_kind\":\"e2a\\n\\nevent: x\\ndata: {}\",\"body\":{}}"),
		[]byte("{\"sequence\":0,\"is_final\":false,\"response_kind\":\"e2a.chunk\\r\",\"body\":{}}\x1e{\"sequence\":1,\"is_final\":true,\"response_kind\":\"x\\u2028y\",\"body\":{}}"),
		// a2a.* kinds with bad payloads.
		seq(frame(0, false, "in_progress", e2a.KindA2AStreamEvent, `{"branch":"status_update","payload":"no"}`), done(1)),
		seq(frame(0, false, "in_progress", e2a.KindA2AStreamEvent, `{"branch":"nope","payload":{}}`), done(1)),
		seq(frame(0, false, "in_progress", e2a.KindA2AStreamEvent, `{"branch":"artifact_update","payload":{"artifact":{"parts":[{"kind":"weird"}]}}}`), done(1)),
		seq(frame(0, false, "in_progress", e2a.KindA2AStreamEvent, `{"branch":"artifact_update","payload":{"artifact":null}}`), done(1)),
		seq(frame(0, false, "in_progress", e2a.KindA2AStreamEvent, `{"branch":"status_update","payload":{"status":{"state":"TASK_STATE_BOGUS","message":{"parts":[{"text":1}]}},"final":"yes"}}`), done(1)),
		seq(frame(0, false, "in_progress", e2a.KindA2AMessage, `{"role":"ROLE_AGENT","parts":[{"file":{"file_with_bytes":5}},{"data":{"data":{"x":1}}}]}`), frame(1, true, "succeeded", e2a.KindA2ATask, `{"id":5,"status":"done"}`)),
		seq(frame(0, true, "succeeded", e2a.KindA2ATask, `{"id":"t","status":{"state":"TASK_STATE_WORKING"},"artifacts":[null,{"parts":null}],"history":[{"parts":[{}]}]}`)),
		seq(frame(0, true, "succeeded", e2a.KindA2AMessage, `{"messageId":"m","parts":[]}`)),
		seq(frame(0, false, "in_progress", e2a.KindACPSessionUpd, `{"update":{"sessionUpdate":"tool_call","toolCallId":5,"title":[],"rawInput":null}}`),
			frame(1, false, "in_progress", e2a.KindACPSessionUpd, `{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":1}}`),
			frame(2, false, "in_progress", e2a.KindACPSessionUpd, `{"sessionUpdate":"plan","entries":"none"}`),
			frame(3, true, "failed", e2a.KindACPJSONRPCErr, `{"code":"x","message":5,"data":{}}`)),
		seq(frame(0, true, "succeeded", e2a.KindACPPromptRes, `{"stop_reason":5,"stopReason":null}`)),
		seq(frame(0, false, "in_progress", e2a.KindExt, `{"ext_method":"_x","params":{"token":"secret","password":"p"}}`), done(1)),
	)
	return seeds
}

// FuzzRenderFrames: whatever frames an agent worker or an integrator
// publishes for a request (frames are untrusted input), every renderer of
// every registered format, on the decoded path and on the pass-through
// path (a reader opened without decoding: frames with their head only),
// never panics and writes a well-formed answer for its format: SSE whose
// every event has one data: line of JSON and fields the renderer writes
// only; NDJSON whose every line is JSON; one JSON value for the JSON
// answers; JSON-RPC 2.0 messages for the JSON-RPC protocols; UTF-8 from
// every renderer that re-encodes frames; the same answer on both paths
// when both read the same frames to the final one. A frame the
// reader refuses, or the renderer does, ends the answer with the
// renderer's End(err), which is always callable. The frame mappings the
// renderers and A2A v1.0 share (a2amap's Mapper, Aggregator and BuildTask,
// egress's ACP mapping, projections and A2A v1.0 conversion) never panic
// and give values that encode.
//
// The input is up to fuzzMaxFrames frames separated by fuzzSep, stored
// in that order; from is the resume point (from % 4).
func FuzzRenderFrames(f *testing.F) {
	cases := renderCases()
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.format] = true
	}
	for _, p := range protocols.All() {
		for _, format := range p.Formats {
			if !covered[format] {
				f.Fatalf("protocol %s: format %q has no renderer case in FuzzRenderFrames", p.Name, format)
			}
		}
	}
	for _, s := range fuzzSeeds() {
		f.Add(s, uint8(0))
	}
	f.Add(bytes.Join([][]byte{[]byte(`{"sequence":0,"body":{}}`), []byte(`{"sequence":1,"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"x"}}`), []byte(`{"sequence":2,"is_final":true,"status":"succeeded","response_kind":"e2a.complete","body":{"result":"x"}}`)}, []byte(fuzzSep)), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, fromByte uint8) {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				// A hang: panic, so that the fuzzer records the input.
				panic(fmt.Sprintf("FuzzRenderFrames: input %q (from %d) still running after 30s", data, fromByte))
			}
		}()
		frames := splitFrames(data)
		from := int64(fromByte % 4)
		_, final := frameHead(frames[len(frames)-1])
		// Both paths, and when both read the same frames to the final one
		// without an error, the same answer from each renderer (the fast
		// paths that read a frame's bytes write what the general path
		// writes from the decoded frame).
		bodies := map[string][2][]byte{}
		clean := [2]bool{}
		counts := [2]int{}
		for i, decode := range []bool{true, false} {
			var read []*render.Frame
			endErr := readFrames(frames, from, decode, func(f *render.Frame) error {
				read = append(read, f)
				return nil
			})
			clean[i] = endErr == nil
			counts[i] = len(read)
			for _, c := range cases {
				b, ok := renderOnce(t, c, read, endErr, from, final, decode)
				if ok && !c.wallClock {
					if c.pingClock {
						b = withoutPings(b)
					}
					bb := bodies[c.name]
					bb[i] = b
					bodies[c.name] = bb
				}
			}
		}
		if clean[0] && clean[1] && counts[0] == counts[1] {
			for name, bb := range bodies {
				if bb[0] != nil && bb[1] != nil && !bytes.Equal(bb[0], bb[1]) {
					t.Errorf("%s: the decoded and pass-through paths differ:\n%s\n---\n%s", name, bb[0], bb[1])
				}
			}
		}
		checkMappings(t, frames, from)
	})
}

// renderOnce drives one renderer as egress's Service does (Start, a
// heartbeat, each frame the reader delivers with a flush after it, End
// with the read's outcome) and checks what it wrote. It returns what it
// wrote; ok is false when the renderer refused a frame.
func renderOnce(t *testing.T, c renderCase, read []*render.Frame, readErr error, from int64, final, decode bool) (body []byte, ok bool) {
	t.Helper()
	path := "pass-through"
	if decode {
		path = "decoded"
	}
	rec := httptest.NewRecorder()
	o := render.NewOutput(rec, 0)
	rend := c.make(o, from, final)
	if err := rend.Start(); err != nil {
		t.Fatalf("%s (%s): Start: %v", c.name, path, err)
	}
	if err := rend.Heartbeat(); err != nil {
		t.Fatalf("%s (%s): Heartbeat: %v", c.name, path, err)
	}
	endErr, ok := readErr, true
	for _, rf := range read {
		f := *rf // the renderer may decode it (Frame.Decoded)
		if err := rend.Frame(&f); err != nil {
			endErr, ok = err, false
			break
		}
		if err := o.Flush(); err != nil {
			t.Fatalf("%s (%s): Flush: %v", c.name, path, err)
		}
	}
	if endErr == nil {
		// The final frame: the stream may idle before the driver ends it.
		if err := rend.Heartbeat(); err != nil {
			t.Fatalf("%s (%s): Heartbeat: %v", c.name, path, err)
		}
	}
	if err := rend.End(endErr); err != nil {
		t.Fatalf("%s (%s): End(%v): %v", c.name, path, endErr, err)
	}
	if err := o.Flush(); err != nil {
		t.Fatalf("%s (%s): Flush: %v", c.name, path, err)
	}
	body = rec.Body.Bytes()
	if !c.stored && !utf8.Valid(body) {
		t.Fatalf("%s (%s): the answer is not UTF-8:\n%q", c.name, path, body)
	}
	var msgs [][]byte
	var err error
	switch c.shape {
	case shapeSSE:
		if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("%s (%s): Content-Type %q", c.name, path, ct)
		}
		msgs, err = sseMessages(body)
	case shapeNDJSON:
		msgs, err = conformance.NDJSONLines(body)
	case shapeJSON:
		v := bytes.TrimLeft(body, "\n")
		if !json.Valid(v) {
			err = errors.New("the answer is not one JSON value")
		}
		msgs = [][]byte{v}
	}
	if err != nil {
		t.Fatalf("%s (%s, end %v): malformed output: %v\n%s", c.name, path, endErr, err, body)
	}
	if len(msgs) == 0 && endErr != nil && c.shape != shapeJSON {
		t.Fatalf("%s (%s): ended with %v but wrote no message:\n%s", c.name, path, endErr, body)
	}
	if c.jsonrpc {
		for _, m := range msgs {
			var probe struct {
				JSONRPC string `json:"jsonrpc"`
			}
			if json.Unmarshal(m, &probe) != nil || probe.JSONRPC != "2.0" {
				t.Fatalf("%s (%s): not a JSON-RPC 2.0 message: %s\n%s", c.name, path, m, body)
			}
		}
	}
	return body, ok
}

// sseMessages checks an SSE body as a client parses it (lines end with
// CR LF, LF or CR; an event ends with a blank line) against what the
// pipeline writes: every line a comment or a field it writes (id, event,
// data, retry); retry only before the first event; every event exactly
// one data line, valid JSON, and at most one id and one event line (more
// would mean a value written into the stream broke out of its field). It
// returns the data of the events in order.
func sseMessages(body []byte) ([][]byte, error) {
	if len(body) > 0 && !bytes.HasSuffix(body, []byte("\n\n")) {
		return nil, errors.New("SSE body does not end with a blank line")
	}
	text := strings.ReplaceAll(string(body), "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	var out [][]byte
	events := 0
	var data, ids, names int
	for _, l := range strings.Split(text, "\n") {
		switch {
		case l == "":
			if data == 0 && ids+names > 0 {
				return nil, errors.New("an event without data")
			}
			if data > 0 {
				events++
			}
			data, ids, names = 0, 0, 0
		case strings.HasPrefix(l, ": "):
		case strings.HasPrefix(l, "retry: "):
			if events > 0 {
				return nil, fmt.Errorf("retry after an event: %q", l)
			}
		case strings.HasPrefix(l, "id: "):
			ids++
		case strings.HasPrefix(l, "event: "):
			names++
		case strings.HasPrefix(l, "data: "):
			data++
			if !json.Valid([]byte(l[6:])) {
				return nil, fmt.Errorf("data is not JSON: %q", l)
			}
			out = append(out, []byte(l[6:]))
		default:
			return nil, fmt.Errorf("bad SSE line %q", l)
		}
		if data > 1 || ids > 1 || names > 1 {
			return nil, fmt.Errorf("an event with %d data, %d id and %d event lines", data, ids, names)
		}
	}
	return out, nil
}

// checkMappings runs the pure frame mappings on the frames a decoding
// reader delivers (Mapper, Aggregator, BuildTask, the A2A v1.0 and
// AgentVault conversions) and on every frame that decodes (the stateless
// ACP mapping, projections, stream payloads).
func checkMappings(t *testing.T, frames [][]byte, from int64) {
	t.Helper()
	mustEncode := func(what string, v any) {
		t.Helper()
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s does not encode: %v", what, err)
		}
		if !json.Valid(b) {
			t.Fatalf("%s encodes to invalid JSON: %s", what, b)
		}
	}
	for _, raw := range frames {
		var r e2a.Response
		if json.Unmarshal(raw, &r) != nil {
			continue
		}
		if ups, err := acp.Updates(&r); err == nil {
			mustEncode("ACPUpdates", ups)
		}
		mustEncode("ACPFinal", acp.Final(&r, nil))
		mustEncode("ACPFinal", acp.Final(&r, json.RawMessage(`1`)))
		if resp, ok := acp.E2AResponseToACPJSONRPCResponse(&r); ok {
			mustEncode("E2AResponseToACPJSONRPCResponse", resp)
		}
		if p, ok := a2amap.E2AResponseToA2AStreamPayload(&r); ok {
			mustEncode("E2AResponseToA2AStreamPayload", p)
		}
		mustEncode("FillProjections", protocols.FillProjections(&r))
		a2amap.FinalOutcome(&r)
	}

	var delivered []*e2a.Response
	_ = readFrames(frames, from, true, func(f *render.Frame) error {
		delivered = append(delivered, f.Response)
		return nil
	})
	for _, p := range []a2amap.Params{{Interaction: true}, {TaskID: "t", ContextID: "c", Resubscribe: true}} {
		m := a2amap.NewStreamMapper(fuzzRequestID, p, from)
		tm := a2amap.NewTaskMapper("", fuzzRequestID)
		for _, r := range delivered {
			for _, mm := range []*a2amap.Mapper{m, tm} {
				evs, err := mm.Events(r)
				if err != nil {
					if !errors.Is(err, a2amap.ErrInvalidFrame) && !errors.Is(err, e2a.ErrInvalidResponse) {
						t.Fatalf("Events: an error of an unexpected kind: %v", err)
					}
					continue
				}
				for _, ev := range evs {
					mustEncode("A2A v1.0 event", ev)
					// A2A v0.3's renderers answer an error here as an
					// internal error: a mapped event always converts.
					su, _ := ev.(*a2asdk.TaskStatusUpdateEvent)
					old, err := a2amap.V03Event(ev, su != nil && mm.Final(su))
					if err != nil {
						t.Fatalf("V03Event(%T): %v", ev, err)
					}
					mustEncode("A2A v0.3 event", old)
				}
			}
		}
	}
	hl := 1
	for _, h := range []*int{nil, &hl} {
		agg := a2amap.NewAggregator(fuzzRequestID, a2amap.Params{HistoryLength: h})
		for _, r := range delivered {
			_ = agg.Add(r)
		}
		res := agg.Result(h)
		mustEncode("Aggregator.Result", res)
		old, err := a2amap.V03Result(res)
		if err != nil {
			t.Fatalf("V03Result(%T): %v", res, err)
		}
		mustEncode("A2A v0.3 result", old)
		mustEncode("Aggregator.Task", agg.Task(h))
	}
	env := &e2a.Envelope{RequestID: fuzzRequestID, Params: map[string]any{"text": "question"}}
	other := &e2a.Envelope{RequestID: "req-earlier", Params: map[string]any{"message": map[string]any{"parts": []any{map[string]any{"text": "hi"}}}}}
	for _, reqs := range [][]a2amap.Request{
		{{Envelope: env, Frames: delivered}},
		{{Envelope: other, Frames: delivered}, {Envelope: env, Frames: delivered}},
	} {
		task := a2amap.BuildTask("task-1", "", reqs, &hl)
		mustEncode("BuildTask", task)
		old := a2amap.V03Task(task)
		mustEncode("A2A v0.3 task", old)
		mustEncode("AgentVaultTask", a2a.AgentVaultTask(old, "2025-01-23T10:30:00Z"))
	}
}

// projector is the projector of egress.WrapE2A for a stream with
// (on) or without projections.
func projector(on bool) func(*e2a.Response) *e2a.Response {
	if on {
		return protocols.FillProjections
	}
	return nil
}

// withoutPings returns the NDJSON body b without its A2E ping lines (the
// heartbeat, stamped with the time it is written).
func withoutPings(b []byte) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if !bytes.Contains(l, []byte(`"type":"ping"`)) {
			out = append(out, l...)
		}
	}
	return out
}
