package agent

import (
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestSetMetadataStrings: metadata of strings (a bridge's llm_response_id)
// is copied as it is, not through JSON (20 allocations per call before, 5
// now with the template's encoding: most of the OpenAI bridge's runtime
// cost after its frames), and frames carry exactly the bytes the copy
// through JSON gave, whatever the strings hold (escapes, invalid UTF-8, as
// key or value); metadata of other values still goes through JSON.
func TestSetMetadataStrings(t *testing.T) {
	w := &worker{pool: "p", cfg: defaultConfig()}
	env := &e2a.Envelope{RequestID: "req-1", Channel: "web"}
	encode := func(md map[string]any) string {
		t.Helper()
		r := e2a.Response{RequestID: "req-1", Metadata: md}
		b, err := e2a.MarshalResponse(&r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var cases []map[string]any
	for _, s := range hostile {
		cases = append(cases, map[string]any{"llm_response_id": s}, map[string]any{s: "v", "k": s})
	}
	cases = append(cases, map[string]any{"n": uint64(12345678901234567890), "s": "x"}, map[string]any{"o": map[string]any{"a": "<b>"}})
	for _, m := range cases {
		wr := newWriter(w, env, env.RequestID, "subj", nil, -1)
		if err := wr.SetMetadata(m); err != nil {
			t.Fatal(err)
		}
		var viaJSON map[string]any
		b, _ := json.Marshal(m)
		if err := json.Unmarshal(b, &viaJSON); err != nil {
			t.Fatal(err)
		}
		if got, want := encode(wr.tmpl.Metadata), encode(viaJSON); got != want {
			t.Errorf("metadata %q: frame\n%s\nwant\n%s", m, got, want)
		}
	}
	wr := newWriter(w, env, env.RequestID, "subj", nil, -1)
	m := map[string]any{"llm_response_id": "chatcmpl-e2abench0001"}
	if n := testing.AllocsPerRun(100, func() { _ = wr.SetMetadata(m) }); n > 5 && !raceEnabled {
		t.Errorf("SetMetadata of a string: %v allocations, want at most 5", n)
	}
}
