package a2a

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	a2av1 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/protocols/conformance"
	"github.com/e2a-pipeline/pipeline/render"
)

// renderStream renders frames with the A2A SSE renderer, the text fast
// path on or off, the frames decoded or (lazy) as a reader without decode
// gives them.
func renderStream(t *testing.T, fast, lazy bool, id json.RawMessage, from int64, frames []*e2a.Response) []byte {
	t.Helper()
	old := fastText
	fastText = fast
	defer func() { fastText = old }()
	out, err := conformance.RenderFrames(func(o *render.Output) render.Renderer {
		return NewStream(o, frames[0].RequestID, a2amap.Params{JSONRPCID: id, TaskID: "task-<1>", ContextID: "ctx &1",
			Submitted: conformance.Time(), Interaction: true}, from)
	}, frames, lazy)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestA2AFastTextMatches: the text fast path writes byte for byte what the
// general path (event struct, json.Marshal) writes, for hostile texts and
// ids, runs of text split by reasoning and tool chunks, with and without
// llm_response_id, and resumed streams.
func TestA2AFastTextMatches(t *testing.T) {
	frames := conformance.TextFrames()
	for _, id := range []string{`"req-002"`, `7`, `"<id>&"`, ``, `1.5e3`} {
		for _, from := range []int64{0, 3} {
			slow := renderStream(t, false, false, json.RawMessage(id), from, frames)
			for _, lazy := range []bool{false, true} {
				fast := renderStream(t, true, lazy, json.RawMessage(id), from, frames)
				if !bytes.Equal(fast, slow) {
					t.Fatalf("id %s from %d lazy %v:\nfast:\n%s\nslow:\n%s", id, from, lazy, fast, slow)
				}
			}
			if !bytes.Contains(slow, []byte(`\u003cb\u003e`)) {
				t.Fatalf("the hostile text is missing:\n%s", slow)
			}
		}
	}
}

// TestA2AFastTextLabeled: a text chunk that names its artifact, or gives
// it or its part metadata (artifact_metadata, artifact_part_metadata),
// takes the general path, whose event carries the artifact's name,
// description and metadata and the part's (the fast path's would not):
// both write the same bytes, in v0.3.
func TestA2AFastTextLabeled(t *testing.T) {
	frames := conformance.LabeledTextFrames()
	slow := renderStream(t, false, false, json.RawMessage(`"req-1"`), 0, frames)
	for _, lazy := range []bool{false, true} {
		if fast := renderStream(t, true, lazy, json.RawMessage(`"req-1"`), 0, frames); !bytes.Equal(fast, slow) {
			t.Fatalf("lazy %v:\nfast:\n%s\nslow:\n%s", lazy, fast, slow)
		}
	}
	for _, want := range []string{`"name":"Report \u003c1\u003e"`, `"description":"What \"was\" found."`, `"description":"no id"`,
		`"metadata":{"labels":["a","b"],"source":"\u003cx\u003e"}`, `"metadata":{"n":2,"source":"later"}`, `"metadata":{"lang":"en"}`, `"metadata":{"lang":"en","thought":true}`} {
		if !bytes.Contains(slow, []byte(want)) {
			t.Fatalf("%s is missing:\n%s", want, slow)
		}
	}
}

// TestReadTextUpdateLabeled: the fast path leaves to the general path
// exactly the chunks whose metadata holds a label key (artifact_name,
// artifact_description, artifact_metadata, artifact_part_metadata),
// decoded or read from their bytes, and takes those whose text only
// quotes the keys or whose metadata has another artifact_ key.
func TestReadTextUpdateLabeled(t *testing.T) {
	frames := conformance.LabeledTextFrames()
	fast := map[int]bool{1: true, 3: true} // "a2 …" (the keys in its text, artifact_other), "a3"
	for i, f := range frames[:len(frames)-1] {
		raw, _ := json.Marshal(f)
		head, err := render.HeadFrame(raw, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		for _, fr := range []*render.Frame{{Response: f, Raw: raw, StreamSeq: uint64(i + 1)}, head} {
			m := a2amap.NewStreamMapper(f.RequestID, a2amap.Params{}, 0)
			if _, ok := ReadTextUpdate(m, fr); ok != fast[i] {
				t.Errorf("frame %d (metadata %v, decoded %v): fast path %v, want %v", i, f.Metadata, fr.Response != nil, ok, fast[i])
			}
		}
	}
}

// BenchmarkStreamText: the A2A SSE renderer writing a plain text chunk
// read without decode (the text fast path), per frame.
func BenchmarkStreamText(b *testing.B) {
	f := conformance.Chunk("req-bench", 1, e2a.DeltaText, strings.Repeat("token ", 16), "")
	raw, _ := json.Marshal(f)
	o := render.NewOutput(httptest.NewRecorder(), time.Second)
	rend := NewStream(o, "req-bench", a2amap.Params{JSONRPCID: json.RawMessage(`"req-1"`), TaskID: "task-1", ContextID: "ctx-1"}, 0)
	head, err := render.HeadFrame(raw, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		fr := new(render.Frame)
		*fr = *head
		fr.StreamSeq = uint64(i + 1)
		if err := rend.Frame(fr); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 0 {
			o = render.NewOutput(httptest.NewRecorder(), time.Second)
			rend.(*stream).Out = o
		}
	}
}

// TestResultEventMatches: a stream's result events are byte for byte what
// json.Marshal writes for the JSON-RPC response around the event, for ids
// of every shape and events with text to escape.
func TestResultEventMatches(t *testing.T) {
	ts := conformance.Time()
	msg := a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "<b>&\u2028 \"quoted\""})
	events := []any{
		a2a.TaskStatusUpdateEvent{TaskID: "task-<1>", ContextID: "ctx &1", Final: true,
			Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: msg, Timestamp: &ts}},
		&a2a.TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", LastChunk: true,
			Artifact: &a2a.Artifact{ID: "a<1>", Parts: a2a.ContentParts{a2a.TextPart{Text: "x > y"}}}},
		map[string]any{"kind": "task", "id": "é"},
		nil,
	}
	// Status updates take appendStatusUpdate's path when they have no
	// message or metadata; these check it writes json.Marshal's bytes, and
	// the others that they are left to it.
	paris := ts.In(time.FixedZone("CET", 3600))
	nanos := time.Date(2026, 11, 26, 5, 4, 3, 120, time.UTC)
	for _, su := range []a2a.TaskStatusUpdateEvent{
		{TaskID: "task-<1>", ContextID: "ctx &1\u2028\xff", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: &ts}},
		{TaskID: "t", ContextID: "c", Final: true, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &nanos}},
		{TaskID: "t", ContextID: "", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}},
		{TaskID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &paris}},
		{TaskID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateFailed, Message: msg}},
		{TaskID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}, Metadata: map[string]any{"k": 1}},
		{TaskID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}, Metadata: map[string]any{}},
	} {
		events = append(events, &su)
	}
	for _, id := range []string{`"req-002"`, `7`, `"<id>&"`, ``, ` { "a" : 1 } `} {
		for _, ev := range events {
			rec := httptest.NewRecorder()
			r := &stream{StreamBase: StreamBase{Out: render.NewOutput(rec, time.Second)}, p: a2amap.Params{JSONRPCID: json.RawMessage(id)}}
			if err := r.resultEvent("4", ev); err != nil {
				t.Fatal(err)
			}
			want := httptest.NewRecorder()
			if err := render.SSEEventJSON(render.NewOutput(want, time.Second), "4", "", jsonrpc.ResultResponse(json.RawMessage(id), ev)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rec.Body.Bytes(), want.Body.Bytes()) {
				t.Fatalf("id %s:\ngot  %s\nwant %s", id, rec.Body.Bytes(), want.Body.Bytes())
			}
		}
	}
}

// TestStreamTextAllocs: once a stream has written its first text event, the
// next ones (the bulk of a streamed answer) allocate nothing: the event and
// its SSE framing are assembled in buffers the stream and its output reuse,
// up to render.MaxScratch.
func TestStreamTextAllocs(t *testing.T) {
	f := conformance.Chunk("req-allocs", 1, e2a.DeltaText, strings.Repeat("token ", 16), "")
	raw, _ := json.Marshal(f)
	head, err := render.HeadFrame(raw, 1)
	if err != nil {
		t.Fatal(err)
	}
	o := render.NewOutput(&testkit.DiscardResponseWriter{}, 0)
	rend := NewStream(o, "req-allocs", a2amap.Params{JSONRPCID: json.RawMessage(`"req-1"`), TaskID: "task-1", ContextID: "ctx-1"}, 0)
	fr := new(render.Frame)
	write := func() {
		*fr = *head
		if err := rend.Frame(fr); err != nil {
			t.Fatal(err)
		}
	}
	write()
	if n := testing.AllocsPerRun(100, write); n != 0 {
		t.Errorf("%v allocations per text event, want 0", n)
	}
	// A text larger than render.MaxScratch goes out; its buffer is not kept.
	big := conformance.Chunk("req-allocs", 2, e2a.DeltaText, strings.Repeat("x", render.MaxScratch), "")
	rawBig, _ := json.Marshal(big)
	if head, err = render.HeadFrame(rawBig, 2); err != nil {
		t.Fatal(err)
	}
	write()
	if c := cap(rend.(*stream).Buf); c > render.MaxScratch {
		t.Errorf("the stream kept a %d-byte buffer", c)
	}
}

func a2aEventsOf(t *testing.T, fast, lazy bool, from int64, frames []*e2a.Response) []a2av1.Event {
	t.Helper()
	old := fastText
	fastText = fast
	defer func() { fastText = old }()
	m := a2amap.NewStreamMapper(frames[0].RequestID, a2amap.Params{TaskID: "task-<1>", ContextID: "ctx &1", Interaction: true}, from)
	var evs []a2av1.Event
	for i, f := range frames {
		raw, _ := json.Marshal(f)
		fr := &render.Frame{Response: f, Raw: raw, StreamSeq: uint64(i + 1)}
		if lazy {
			var err error
			if fr, err = render.HeadFrame(raw, uint64(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		if !frameA2AEvents(m, fr, func(ev a2av1.Event, err error) bool {
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
			return true
		}) {
			t.Fatalf("frame %d: stopped", i)
		}
	}
	return evs
}

// TestA2AEventsFastTextMatches: the events A2AEvents (the A2A v1.0
// binding's stream) builds for plain text chunks from their bytes are the
// ones Mapper.Events builds, for hostile texts, runs of text split by
// reasoning and tool chunks, with and without llm_response_id, and resumed
// streams.
func TestA2AEventsFastTextMatches(t *testing.T) {
	frames := conformance.TextFrames()
	for _, from := range []int64{0, 3} {
		slow := a2aEventsOf(t, false, false, from, frames)
		for _, lazy := range []bool{false, true} {
			fast := a2aEventsOf(t, true, lazy, from, frames)
			if !reflect.DeepEqual(fast, slow) {
				f, _ := json.Marshal(fast)
				s, _ := json.Marshal(slow)
				t.Fatalf("from %d lazy %v:\nfast: %s\nslow: %s", from, lazy, f, s)
			}
		}
		if len(slow) < len(frames) {
			t.Fatalf("%d events for %d frames", len(slow), len(frames))
		}
	}
}
