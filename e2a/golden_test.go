package e2a_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// update rewrites the golden files: go test ./e2a/ -run Golden -update
var update = flag.Bool("update", false, "rewrite golden files under testdata/golden")

// canonical lists the golden inputs that are already in canonical E2A form:
// parse → write must give the same JSON (up to key order and whitespace).
// Any other input is a legacy or compatibility form whose migrated output is
// pinned by its .out file only.
var canonical = map[string]string{
	"spec_11_1_gateway_chat": "spec_11_1_gateway_chat",
	// §11.1: "channel_context may be omitted (or {} when serialized empty)":
	// the {} form is written as the form without it.
	"spec_11_1_gateway_chat_empty_channel_context": "spec_11_1_gateway_chat",
	"spec_11_3_acp_ingress":                        "spec_11_3_acp_ingress",
	"spec_11_5_session_prompt_multimodal":          "spec_11_5_session_prompt_multimodal",
	"extra_full_envelope":                          "extra_full_envelope",
	"spec_12_8_two_chunks_final":                   "spec_12_8_two_chunks_final",
	"extra_failed_final_frame":                     "extra_failed_final_frame",
}

func goldenDir() string { return filepath.Join("testdata", "golden") }

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	return reflect.DeepEqual(decodeAny(t, a), decodeAny(t, b))
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

func inputs(t *testing.T, ext string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(goldenDir(), "*.in"+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs *%s: %v", ext, err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".in"+ext))
	}
	return names
}

// TestGoldenEnvelopes reads every spec example of §11 (and a few extra
// envelopes), writes it back and compares with the golden output.
func TestGoldenEnvelopes(t *testing.T) {
	for _, name := range inputs(t, ".json") {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(goldenDir(), name+".in.json"))
			if err != nil {
				t.Fatal(err)
			}
			env, err := e2a.FromJSON(in)
			if err != nil {
				t.Fatalf("FromJSON: %v", err)
			}
			out, err := json.MarshalIndent(env, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, '\n')
			testkit.Golden(t, filepath.Join(goldenDir(), name+".out.json"), out, *update)

			// Writing is stable: the written form reads back to itself.
			again, err := e2a.FromJSON(out)
			if err != nil {
				t.Fatalf("FromJSON(written): %v", err)
			}
			out2, _ := json.MarshalIndent(again, "", "  ")
			if !bytes.Equal(out[:len(out)-1], out2) {
				t.Errorf("write → read → write differs:\n%s\n%s", out, out2)
			}
			if same, ok := canonical[name]; ok {
				want, err := os.ReadFile(filepath.Join(goldenDir(), same+".in.json"))
				if err != nil {
					t.Fatal(err)
				}
				if !jsonEqual(t, out, want) {
					t.Errorf("canonical example does not write back as itself:\n%s", out)
				}
			}
		})
	}
}

// TestGoldenLegacyMigration pins what §11.2 promises about the legacy
// AgentRequest shape, independently of the golden file.
func TestGoldenLegacyMigration(t *testing.T) {
	in, err := os.ReadFile(filepath.Join(goldenDir(), "spec_11_2_legacy_agent_request.in.json"))
	if err != nil {
		t.Fatal(err)
	}
	env, err := e2a.FromJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	if env.Channel != "feishu" || env.Method != "chat.send" || env.RequestID != "req_legacy_1" || env.SessionID != "sess_feishu_1" || !env.IsStream {
		t.Errorf("legacy fields not migrated: %+v", env)
	}
	if env.Timestamp != "2026-03-26T11:33:01.150000+00:00" {
		t.Errorf("timestamp = %q", env.Timestamp)
	}
	if _, err := e2a.ParseTime(env.Timestamp); err != nil {
		t.Errorf("timestamp not RFC 3339: %v", err)
	}
	if env.ChannelContext["feishu_open_id"] != "ou_xxx" || env.ChannelContext["message_id"] != "om_xxx" {
		t.Errorf("metadata not migrated to channel_context: %v", env.ChannelContext)
	}
	out, _ := json.Marshal(env)
	for _, legacy := range []string{`"channel_id"`, `"req_method"`, `"metadata"`} {
		if bytes.Contains(out, []byte(legacy)) {
			t.Errorf("written form still has legacy key %s: %s", legacy, out)
		}
	}
}

// TestGoldenFrames reads every NDJSON frame example of §12 (and extras),
// writes each frame back, compares with the golden output and checks the
// frame invariants.
func TestGoldenFrames(t *testing.T) {
	for _, name := range inputs(t, ".ndjson") {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join(goldenDir(), name+".in.ndjson"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var frames []*e2a.Response
			var out bytes.Buffer
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				line := bytes.TrimSpace(sc.Bytes())
				if len(line) == 0 {
					continue
				}
				r, err := e2a.ResponseFromJSON(line)
				if err != nil {
					t.Fatalf("ResponseFromJSON(%s): %v", line, err)
				}
				w, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := canonical[name]; ok && !jsonEqual(t, w, line) {
					t.Errorf("frame does not write back as itself:\n got %s\nwant %s", w, line)
				}
				out.Write(w)
				out.WriteByte('\n')
				frames = append(frames, r)
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			testkit.Golden(t, filepath.Join(goldenDir(), name+".out.ndjson"), out.Bytes(), *update)
			if err := e2a.CheckFrames(frames); err != nil {
				t.Errorf("CheckFrames: %v", err)
			}
			var c e2a.SequenceChecker
			for _, r := range frames {
				if err := c.Add(r); err != nil {
					t.Fatalf("SequenceChecker: %v", err)
				}
			}
			if !c.Done() || c.Next() != int64(len(frames)) {
				t.Errorf("checker done=%v next=%d", c.Done(), c.Next())
			}
		})
	}
}

// TestGoldenFrameBodies decodes the typed bodies of §12.8.
func TestGoldenFrameBodies(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(goldenDir(), "spec_12_8_two_chunks_final.in.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	var text strings.Builder
	for _, l := range lines[:2] {
		r, err := e2a.ResponseFromJSON(l)
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.Chunk()
		if err != nil || c.DeltaKind != e2a.DeltaText {
			t.Fatalf("chunk: %+v %v", c, err)
		}
		text.WriteString(c.Delta.(string))
	}
	r, err := e2a.ResponseFromJSON(lines[2])
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Complete()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Result.(map[string]any)["content"]; got != text.String() {
		t.Errorf("complete %q != chunks %q", got, text.String())
	}
	if _, err := r.Chunk(); err == nil {
		t.Error("Chunk() on an e2a.complete frame must fail")
	}
}
