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
		want, err := json.Marshal(b.Task())
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.MarshalTask(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: MarshalTask %s (%v), json.Marshal %s", step, got, err, want)
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
