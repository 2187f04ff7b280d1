package e2a_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// Fuzz targets. The seed corpus is kept in testdata/fuzz/<Target>/ (written
// from the golden inputs by TestWriteFuzzCorpus -update) and extended by f.Add.
// Run: go test ./e2a/ -run '^$' -fuzz FuzzFromJSON -fuzztime 20s

// FuzzFromJSON: FromJSON never panics, refuses only with its sentinels,
// stores no time ParseTime reads that time.Parse does not (a leap second),
// and whatever it accepts writes valid UTF-8 JSON that reads back to the
// same written form (write → read → write is stable).
func FuzzFromJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"timestamp":1774524781.15}`, `{"timestamp":"1e9"}`, `{"jsonrpc_id":null}`,
		`{"binding":{"a":[1]},"metadata":{"k":"v"},"payload":{"x":1},"channel_id":"c","req_method":"m"}`,
		`{"params":{"n":123456789012345678901234567890}}`, "{\"method\":\"\xff\"}",
		`{"jsonrpc_id":"\ud800"}`, `{"provenance":{},"auth":{"extra_headers":{"a":"b"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := e2a.FromJSON(data)
		if err != nil {
			if !errors.Is(err, e2a.ErrInvalidJSON) && !errors.Is(err, e2a.ErrInvalidEnvelope) {
				t.Fatalf("FromJSON error without a sentinel: %v", err)
			}
			return
		}
		// A time ParseTime reads is stored as time.Parse reads it: a leap
		// second is written as the next second.
		for _, ts := range []string{env.Timestamp, env.Deadline} {
			if _, err := e2a.ParseTime(ts); err == nil {
				if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
					t.Fatalf("stored time %q is not read by time.Parse: %v", ts, err)
				}
			}
		}
		w1, err := json.Marshal(env)
		if err != nil {
			t.Fatalf("accepted envelope does not marshal: %v", err)
		}
		if !utf8.Valid(w1) {
			t.Fatalf("written envelope is not valid UTF-8: %q", w1)
		}
		env2, err := e2a.FromJSON(w1)
		if err != nil {
			t.Fatalf("written envelope does not read back: %v\n%s", err, w1)
		}
		w2, err := json.Marshal(env2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w1, w2) {
			t.Fatalf("write → read → write unstable:\n%s\n%s", w1, w2)
		}
		_ = env.Clone()
	})
}

// FuzzResponseFromJSON: ResponseFromJSON never panics, refuses only with its
// sentinels, and an accepted frame is valid, writes valid UTF-8 and reads
// back to the same written form.
func FuzzResponseFromJSON(f *testing.F) {
	for _, s := range []string{
		`{"protocol_version":"1.0","response_id":"r","request_id":"q","sequence":0,"is_final":true,"status":"failed","response_kind":"e2a.error","timestamp":"2026-03-29T12:00:00Z","provenance":{"source_protocol":"e2a"},"body":{"code":"c","message":"m"},"jsonrpc_id":"\ud800"}`,
		"{\"protocol_version\":\"1.0\",\"response_id\":\"r\",\"request_id\":\"q\",\"sequence\":1,\"is_final\":false,\"status\":\"in_progress\",\"response_kind\":\"e2a.chunk\",\"timestamp\":\"2026-03-29T12:00:00Z\",\"provenance\":{\"source_protocol\":\"e2a\"},\"body\":{\"delta_kind\":\"text\",\"delta\":\"\xff\"}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := e2a.ResponseFromJSON(data)
		if err != nil {
			if !errors.Is(err, e2a.ErrInvalidJSON) && !errors.Is(err, e2a.ErrInvalidResponse) {
				t.Fatalf("ResponseFromJSON error without a sentinel: %v", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted frame does not validate: %v", err)
		}
		w1, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("accepted frame does not marshal: %v", err)
		}
		if !utf8.Valid(w1) {
			t.Fatalf("written frame is not valid UTF-8: %q", w1)
		}
		r2, err := e2a.ResponseFromJSON(w1)
		if err != nil {
			t.Fatalf("written frame does not read back: %v\n%s", err, w1)
		}
		w2, _ := json.Marshal(r2)
		if !bytes.Equal(w1, w2) {
			t.Fatalf("write → read → write unstable:\n%s\n%s", w1, w2)
		}
		if err := e2a.CheckFrames([]*e2a.Response{r}); err == nil && (r.Sequence != 0 || !r.IsFinal) {
			t.Fatalf("CheckFrames accepted a lone frame seq=%d final=%v", r.Sequence, r.IsFinal)
		}
	})
}

// typeSeeds seed FuzzFromJSON's kept corpus (testdata/fuzz/FuzzFromJSON/
// types_<name>) with the members of a wrong JSON type FromJSON refuses (a
// number request_id was read as its text) and the times RFC 3339 allows
// that Go's parser does not: a leap second, read as the next second, or
// refused where none can be.
var typeSeeds = map[string]string{
	"request_id_number":    `{"request_id":42}`,
	"request_id_float":     `{"request_id":-1.5e3,"method":"m"}`,
	"session_id_number":    `{"session_id":7}`,
	"task_id_bool":         `{"task_id":true}`,
	"message_id_object":    `{"message_id":{}}`,
	"correlation_id_array": `{"correlation_id":["c"]}`,
	"channel_id_number":    `{"channel_id":1}`,
	"is_stream_string":     `{"is_stream":"true"}`,
	"is_stream_number":     `{"is_stream":1}`,
	"output_modes_null":    `{"expected_output_modes":["text/plain",null]}`,
	"jsonrpc_id_number":    `{"jsonrpc_id":42,"request_id":"42"}`,
	"metadata_string":      `{"metadata":"m"}`,
	"leap_utc":             `{"timestamp":"2016-12-31T23:59:60Z","deadline":"2016-12-31T23:59:60.5Z"}`,
	"leap_offset":          `{"deadline":"1990-12-31T15:59:60-08:00"}`,
	"leap_lower_case":      `{"deadline":"2016-12-31t23:59:60z"}`,
	"leap_misplaced":       `{"timestamp":"2016-12-31T12:30:60Z"}`,
	"leap_misplaced_lower": `{"deadline":"2016-12-31t23:58:60+00:00"}`,
	"leap_year_9999":       `{"timestamp":"9999-12-31T23:59:60Z"}`,
	"leap_no_offset":       `{"timestamp":"2016-12-31T23:59:60"}`,
	"second_61":            `{"deadline":"2016-12-31T23:59:61Z"}`,
	"version_number_leap":  `{"protocol_version":60,"timestamp":"2016-06-30T23:59:60+00:00"}`,
}

// TestWriteFuzzCorpus keeps the checked-in seed corpus in step with the
// golden inputs: every golden envelope seeds FuzzFromJSON and every golden
// frame seeds FuzzResponseFromJSON; typeSeeds seed FuzzFromJSON too. With
// -update it rewrites the files; otherwise it checks they exist.
func TestWriteFuzzCorpus(t *testing.T) {
	for name, s := range typeSeeds {
		testkit.FuzzSeed(t, filepath.Join("testdata", "fuzz", "FuzzFromJSON", "types_"+name), []byte(s), *update)
	}
	seeds := map[string][][]byte{}
	for _, name := range inputs(t, ".json") {
		b, err := os.ReadFile(filepath.Join(goldenDir(), name+".in.json"))
		if err != nil {
			t.Fatal(err)
		}
		seeds["FuzzFromJSON"] = append(seeds["FuzzFromJSON"], b)
	}
	for _, name := range inputs(t, ".ndjson") {
		b, err := os.ReadFile(filepath.Join(goldenDir(), name+".in.ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			seeds["FuzzResponseFromJSON"] = append(seeds["FuzzResponseFromJSON"], line)
		}
	}
	for target, list := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		for i, b := range list {
			testkit.FuzzSeed(t, filepath.Join(dir, fmt.Sprintf("golden_%02d", i)), b, *update)
		}
	}
}

// TestBindingDepth: a binding nested just under MaxNesting is moved two
// levels deeper (provenance.details); the written envelope must still read.
func TestBindingDepth(t *testing.T) {
	n := e2a.MaxNesting - 1 // binding value depth so that the input is exactly MaxNesting deep
	in := `{"binding":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	env, err := e2a.FromJSON([]byte(in))
	if err != nil {
		return // refusing is fine; accepting and then not reading back is not
	}
	w, _ := json.Marshal(env)
	if _, err := e2a.FromJSON(w); err != nil {
		t.Fatalf("accepted binding does not read back after migration: %v", err)
	}
}
