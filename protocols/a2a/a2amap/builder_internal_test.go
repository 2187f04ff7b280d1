package a2amap

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestMarshalTaskSplitRunes: text a frame's JSON cannot carry (a rune
// split across pieces, a byte that is not UTF-8), written into a content
// message's builders, is marshaled as json.Marshal marshals the task:
// once a piece is not valid UTF-8 the text is escaped whole.
func TestMarshalTaskSplitRunes(t *testing.T) {
	b := NewTaskBuilder("t", "c", nil, &e2a.Envelope{RequestID: "r", Params: map[string]any{"text": "q"}})
	chunk := &e2a.Response{RequestID: "r", ResponseID: "r1", ResponseKind: e2a.KindChunk, Status: e2a.StatusInProgress,
		Body: e2a.MarshalBody(e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "café <&> "})}
	if err := b.Add(chunk); err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		want, err := json.Marshal(V03Task(b.Task()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.MarshalV03Task(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: MarshalV03Task %s (%v), json.Marshal %s", step, got, err, want)
		}
	}
	check("valid")
	m := b.agg.msgs[0]
	if b.mirrors[&m.text].bad {
		t.Fatal("valid text marked bad")
	}
	for _, piece := range []string{"\xf0\x9f", "\x99\x82", " ok", "\xff", "\u2028 end"} {
		m.text.WriteString(piece)
		check(piece)
		if !b.mirrors[&m.text].bad {
			t.Errorf("after %q the mirror is not marked bad", piece)
		}
	}
}

// TestMarshalTaskSplices: with earlier turns (their messages placed from
// JSON made once) and a growing text, every MarshalV03Task is json.Marshal's
// bytes and replaces its placeholders without falling back.
func TestMarshalTaskSplices(t *testing.T) {
	prev := []Request{{Envelope: &e2a.Envelope{RequestID: "r0", Params: map[string]any{"text": "first <q>"}}, Frames: []*e2a.Response{
		{RequestID: "r0", ResponseID: "a0", ResponseKind: e2a.KindChunk, Status: e2a.StatusInProgress,
			Body: e2a.MarshalBody(e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: "answer & more\u2028"})},
		{RequestID: "r0", ResponseID: "a1", ResponseKind: e2a.KindComplete, Status: e2a.StatusSucceeded, IsFinal: true,
			Body: e2a.MarshalBody(e2a.CompleteBody{})}}}}
	b := NewTaskBuilder("t", "c", prev, &e2a.Envelope{RequestID: "r1", Params: map[string]any{"text": "second"}})
	for i, d := range []string{"one ", "<two> ", "three"} {
		if err := b.Add(&e2a.Response{RequestID: "r1", ResponseID: "b", ResponseKind: e2a.KindChunk, Status: e2a.StatusInProgress,
			Body: e2a.MarshalBody(e2a.ChunkBody{DeltaKind: e2a.DeltaText, Delta: d})}); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(V03Task(b.Task()))
		got, err := b.MarshalV03Task(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after %d chunks: MarshalV03Task %s (%v), json.Marshal %s", i+1, got, err, want)
		}
	}
	if b.pre == nil || len(b.baseJSON) != 3 || b.misses != 0 {
		t.Errorf("placeholder message %q %q, %d earlier messages, %d misses", b.pre, b.post, len(b.baseJSON), b.misses)
	}
}
