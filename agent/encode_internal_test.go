package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// hostile are strings that exercise every escaping rule of encoding/json.
var hostile = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\nret\rbs\bff\f",
	"\x00\x01\x1f\x7f", "héllo wörld ✓ 日本語 🎉", "line\u2028sep\u2029par", "bad utf8 \xff\xfe end",
	"truncated \xe2\x82", "\"}],\"body\":{}", `,"sequence":0,"is_final":false,"status":"`, sentinel + "s",
}

// The pre-encoded frame is json.Marshal of the same e2a.Response, byte for
// byte, and decodes to the same value.
func TestFrameEncoderMatchesMarshal(t *testing.T) {
	envs := []*e2a.Envelope{
		{RequestID: "r1"},
		{ProtocolVersion: "1.0", RequestID: "r2", JSONRPCID: json.RawMessage(`42`), Channel: "web", UserID: "u", Method: "message/send",
			CorrelationID: "c", TaskID: "t", ContextID: "x", SessionID: "s", MessageID: "m", IsStream: true},
		{RequestID: "r3", JSONRPCID: json.RawMessage(` "id-<&>" `)},
		{RequestID: "r4", JSONRPCID: json.RawMessage(`{"a": [1, 2, null], "b": "\u00e9"}`)},
		{RequestID: "r5", JSONRPCID: json.RawMessage(`null`)},
	}
	for _, s := range hostile {
		envs = append(envs, &e2a.Envelope{ProtocolVersion: s, RequestID: s, Channel: s, UserID: s, Method: s, TaskID: s, SessionID: s})
	}
	bodies := []any{
		e2a.ChunkBody{DeltaKind: "text", Delta: "0123456789abcdef"},
		e2a.ChunkBody{DeltaKind: "tool_call", Delta: map[string]any{"name": "f", "args": []any{1, "<x>"}}},
		e2a.CompleteBody{Result: map[string]any{"content": "x"}},
		e2a.CompleteBody{},
		e2a.ErrorBody{Code: "c", Message: "m", Retryable: true, Details: map[string]any{"k": "v"}},
		json.RawMessage(`{"raw" : [1, 2, 3], "s": "<&>"}`),
		map[string]any{"sessionUpdate": "plan"},
	}
	for _, s := range hostile {
		bodies = append(bodies, e2a.ChunkBody{DeltaKind: s, Delta: s, MimeType: s}, e2a.ChunkBody{DeltaKind: s, Delta: s})
	}
	type vf struct {
		final        bool
		status, kind string
	}
	vars := []vf{{false, e2a.StatusInProgress, e2a.KindChunk}, {true, e2a.StatusSucceeded, e2a.KindComplete}, {true, e2a.StatusFailed, e2a.KindError}}
	for _, s := range hostile {
		vars = append(vars, vf{true, s, s})
	}
	w := &worker{pool: "p<&>", cfg: defaultConfig()}
	w.cfg.workerID = "worker \"1\" ✓"
	n, valid := 0, 0
	for _, env := range envs {
		wr := newWriter(w, env, env.RequestID, "subj", nil, -1)
		if !wr.enc.ok {
			if env.RequestID == sentinel+"s" {
				continue // falls back to json.Marshal (TestFrameEncoderFallback)
			}
			t.Fatalf("envelope %+v: template not split", env)
		}
		for i, b := range bodies {
			for j, v := range vars {
				seq := int64(i*len(vars) + j - 3)
				id := uuid.Must(uuid.NewV7())
				now := time.Now()
				ts := e2a.FormatTime(now)
				var body []byte
				if cb, ok := b.(e2a.ChunkBody); ok && isString(cb.Delta) {
					body = appendChunkBody(nil, &cb, cb.Delta.(string))
					if want, _ := json.Marshal(b); !bytes.Equal(body, want) {
						t.Fatalf("chunk body:\n got %s\nwant %s", body, want)
					}
				} else {
					body, _ = json.Marshal(b)
				}
				got := wr.enc.appendFrame(nil, id, seq, v.final, v.status, v.kind, now, body)
				r := wr.tmpl
				r.ResponseID, r.Sequence, r.IsFinal, r.Status, r.ResponseKind, r.Timestamp, r.Body = id.String(), seq, v.final, v.status, v.kind, ts, body
				want, err := json.Marshal(&r)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("frame differs:\n got %s\nwant %s", got, want)
				}
				var dg, dw any
				if err := json.Unmarshal(got, &dg); err != nil {
					t.Fatalf("%s: %v", got, err)
				}
				_ = json.Unmarshal(want, &dw)
				if !reflect.DeepEqual(dg, dw) {
					t.Fatalf("decoded frames differ:\n got %v\nwant %v", dg, dw)
				}
				rg, errg := e2a.ResponseFromJSON(got)
				rw, errw := e2a.ResponseFromJSON(want)
				if (errg == nil) != (errw == nil) || !reflect.DeepEqual(rg, rw) {
					t.Fatalf("ResponseFromJSON differs: %v / %v", errg, errw)
				}
				if errg == nil {
					valid++
				}
				n++
			}
		}
	}
	t.Logf("%d frames compared, %d valid responses", n, valid)
	if valid == 0 {
		t.Fatal("no frame read back by ResponseFromJSON")
	}
}

func isString(v any) bool { _, ok := v.(string); return ok }

// writer.encode gives what json.Marshal of the response gives, fast path or
// not.
func TestWriterEncode(t *testing.T) {
	w := &worker{pool: "p", cfg: defaultConfig()}
	env := &e2a.Envelope{RequestID: "r", JSONRPCID: json.RawMessage(`7`), Channel: "c"}
	frames := []frame{
		{kind: e2a.KindChunk, status: e2a.StatusInProgress, body: e2a.ChunkBody{DeltaKind: "text", Delta: "a<b"}},
		{kind: e2a.KindChunk, status: e2a.StatusInProgress, body: e2a.ChunkBody{DeltaKind: "text", Delta: "x"}, raw: true},
		{kind: e2a.KindChunk, status: e2a.StatusInProgress, body: e2a.ChunkBody{DeltaKind: "tool_call", Delta: map[string]any{"a": 1}}},
		{kind: e2a.KindComplete, status: e2a.StatusSucceeded, body: e2a.CompleteBody{Result: "ok"}, final: true},
		errorFrame("c", "m\n", false, nil),
	}
	for _, fast := range []bool{true, false} {
		wr := newWriter(w, env, "r", "s", nil, -1)
		wr.enc.ok = fast
		for i, f := range frames {
			got, err := wr.encode(int64(i), f)
			if err != nil {
				t.Fatal(err)
			}
			r, err := e2a.ResponseFromJSON(got)
			if err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			want := wr.tmpl
			want.ResponseID, want.Sequence, want.IsFinal, want.Status, want.ResponseKind, want.Timestamp = r.ResponseID, int64(i), f.final, f.status, f.kind, r.Timestamp
			want.Body, _ = json.Marshal(f.body)
			wb, _ := json.Marshal(&want)
			if !bytes.Equal(got, wb) {
				t.Fatalf("fast %v frame %d:\n got %s\nwant %s", fast, i, got, wb)
			}
		}
	}
	if _, err := newWriter(w, env, "r", "s", nil, -1).encode(0, frame{kind: e2a.KindExt, status: e2a.StatusSucceeded, body: []int{1}, final: true}); !isFrameError(err) {
		t.Fatalf("non-object body: %v", err)
	}
}

// A template that does not encode falls back to json.Marshal (and its error).
func TestFrameEncoderFallback(t *testing.T) {
	if e := newFrameEncoder(&e2a.Response{JSONRPCID: json.RawMessage(`{bad`)}); e.ok {
		t.Fatal("bad jsonrpc_id: encoder ok")
	}
	if e := newFrameEncoder(&e2a.Response{Channel: sentinel}); e.ok {
		t.Fatal("sentinel in a field: encoder ok")
	}
}

// BenchmarkEncode measures the encoding of a request's 8 frames (7 text
// chunks and the final one): "marshal" is json.Marshal of the whole response
// per frame (the fallback), "pre" the pre-encoded template.
func BenchmarkEncode(b *testing.B) {
	w := &worker{pool: "bench", cfg: defaultConfig()}
	env := &e2a.Envelope{RequestID: "0190f6c2-5a3b-7d4e-8f00-123456789abc", JSONRPCID: json.RawMessage(`17`),
		Channel: "web", UserID: "user-42", Method: "message/stream", ContextID: "ctx-1", TaskID: "task-1", IsStream: true}
	chunk := frame{kind: e2a.KindChunk, status: e2a.StatusInProgress, body: e2a.ChunkBody{DeltaKind: "text", Delta: "0123456789abcdef"}}
	final := frame{kind: e2a.KindComplete, status: e2a.StatusSucceeded, body: e2a.CompleteBody{Result: map[string]any{"content": "x"}}, final: true}
	for _, mode := range []string{"marshal", "pre"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			wr := newWriter(w, env, env.RequestID, "subj", nil, -1)
			wr.enc.ok = false
			for b.Loop() {
				if mode == "pre" { // once per request
					wr.enc = newFrameEncoder(&wr.tmpl)
				}
				for seq := range int64(7) {
					if _, err := wr.encode(seq, chunk); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := wr.encode(7, final); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEncodeToReuses: a text chunk encoded into a buffer with room allocates
// nothing but its response id (uuid.NewV7 reads its random bytes through an
// io.Reader, which moves them to the heap): publish hands the writer's buffer
// from one frame to the next. Every writer of a worker shares one
// provenance.details map.
func TestEncodeToReuses(t *testing.T) {
	w := &worker{pool: "p", cfg: defaultConfig()}
	env := &e2a.Envelope{RequestID: "req-1", Channel: "web", UserID: "u", TaskID: "task-1"}
	wr := newWriter(w, env, env.RequestID, "subj", nil, -1)
	chunk := frame{kind: e2a.KindChunk, status: e2a.StatusInProgress, body: e2a.ChunkBody{DeltaKind: "text", Delta: "0123456789abcdef"}}
	want, err := wr.encode(0, chunk)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 2*len(want))
	if n := testing.AllocsPerRun(100, func() {
		out, err := wr.encodeTo(buf, 0, chunk)
		if err != nil || &out[0] != &buf[:1][0] {
			t.Fatalf("encodeTo did not write into the buffer (%v)", err)
		}
	}); n > 1 {
		t.Errorf("encodeTo: %v allocations, want at most 1 (the response id)", n)
	}
	other := newWriter(w, &e2a.Envelope{RequestID: "req-2"}, "req-2", "subj2", nil, -1)
	if fmt.Sprintf("%p", wr.tmpl.Provenance.Details) != fmt.Sprintf("%p", other.tmpl.Provenance.Details) ||
		wr.tmpl.Provenance.Details["pool"] != "p" {
		t.Errorf("provenance details %v and %v are not the worker's one map", wr.tmpl.Provenance.Details, other.tmpl.Provenance.Details)
	}
}

// TestNewFrameEncoderAllocs: a request's template is encoded in 2
// allocations (the template's copy and its JSON): the sentinel values are
// made once per process, not concatenated for every request (6 before; a
// bridge's writer encodes it again for each SetMetadata).
func TestNewFrameEncoderAllocs(t *testing.T) {
	tmpl := e2a.ResponseFor(&e2a.Envelope{RequestID: "req-1", Channel: "web", UserID: "u", TaskID: "task-1"})
	tmpl.Metadata = map[string]any{"llm_response_id": "chatcmpl-1"}
	if n := testing.AllocsPerRun(100, func() {
		if !newFrameEncoder(&tmpl).ok {
			t.Fatal("the template does not split")
		}
	}); n > 2 && !raceEnabled {
		t.Errorf("newFrameEncoder: %v allocations, want at most 2", n)
	}
}

// BenchmarkNewFrameEncoder: a bridged request's template (encoded at its
// pick-up and again at the bridge's SetMetadata), split where its sentinels
// are.
func BenchmarkNewFrameEncoder(b *testing.B) {
	tmpl := e2a.ResponseFor(&e2a.Envelope{ProtocolVersion: "1.0", RequestID: "bench-000123", Channel: "http", Method: "chat.send",
		Provenance: &e2a.Provenance{SourceProtocol: "e2a"}})
	tmpl.Provenance = e2a.Provenance{SourceProtocol: "e2a", Converter: "e2a-pipeline/agent", Details: map[string]any{"pool": "bridge", "worker": "0192f3a4-5b6c-7d8e-9f01-23456789abcd"}}
	tmpl.Metadata = map[string]any{"llm_response_id": "chatcmpl-0123456789"}
	b.ReportAllocs()
	for b.Loop() {
		if !newFrameEncoder(&tmpl).ok {
			b.Fatal("the template does not split")
		}
	}
}

// newFrameEncoderRef is newFrameEncoder as it searched before: a count of
// the sentinels, then each piece searched from the start.
func newFrameEncoderRef(tmpl *e2a.Response) frameEncoder {
	r := *tmpl
	r.ResponseID, r.Sequence, r.IsFinal = sentinelR, 0, false
	r.Status, r.ResponseKind, r.Timestamp, r.Body = sentinelS, sentinelK, sentinelT, sentinelBody
	out, err := e2a.MarshalResponse(&r)
	if err != nil || bytes.Count(out, sentinelBytes) != 5 {
		return frameEncoder{}
	}
	i := bytes.Index(out, sentinelRespID)
	j := bytes.Index(out, sentinelMiddle)
	k := bytes.Index(out, sentinelBody)
	if i < 0 || j < i+len(sentinelRespID) || k < j+len(sentinelMiddle) {
		return frameEncoder{}
	}
	return frameEncoder{ok: true, head: out[:i:i], mid: out[i+len(sentinelRespID) : j : j],
		tail: out[j+len(sentinelMiddle) : k : k], end: out[k+len(sentinelBody):]}
}

// TestNewFrameEncoderSplitsAsBefore: the one-pass search splits every
// template as the count and searches did, and refuses the same: a
// sentinel (or its part after "e2a") in another field, before, between or
// after the variable fields.
func TestNewFrameEncoderSplitsAsBefore(t *testing.T) {
	tail := sentinel[sentinelSkip:]
	var tmpls []e2a.Response
	for _, v := range []string{"", "web", sentinel, tail, "x" + tail, "e2" + tail, sentinel + sentinel, "e2a" + tail[:5], "S", "SSentinel"} {
		tmpls = append(tmpls,
			e2a.ResponseFor(&e2a.Envelope{RequestID: "req-1", Channel: v, UserID: "u", TaskID: "task-1"}),
			e2a.ResponseFor(&e2a.Envelope{RequestID: v, Channel: "web"}),
			e2a.Response{RequestID: "r", Provenance: e2a.Provenance{SourceProtocol: v}, Metadata: map[string]any{"k": v}},
			e2a.Response{RequestID: "r", ACPMeta: map[string]any{"k": v}, Method: v},
			e2a.Response{RequestID: "r", JSONRPCID: json.RawMessage(`"` + v + `"`)},
		)
	}
	split := 0
	for _, tm := range tmpls {
		got, want := newFrameEncoder(&tm), newFrameEncoderRef(&tm)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v:\nsplit %v %q %q %q %q\nwant  %v %q %q %q %q", tm, got.ok, got.head, got.mid, got.tail, got.end,
				want.ok, want.head, want.mid, want.tail, want.end)
		}
		if got.ok {
			split++
		}
	}
	if split == 0 || split == len(tmpls) {
		t.Errorf("%d templates of %d split: both kinds are wanted", split, len(tmpls))
	}
}
