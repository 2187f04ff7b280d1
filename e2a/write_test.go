package e2a

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// checkMarshal fails unless marshal (MarshalEnvelope, MarshalResponse)
// answers as json.Marshal: the same bytes, or an error where it gives one.
func checkMarshal[T any](t *testing.T, v *T, marshal func(*T) ([]byte, error)) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := marshal(v)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("error %v, json.Marshal error %v", err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("differs from json.Marshal:\n got %s\nwant %s", got, want)
	}
}

func checkMarshalEnvelope(t *testing.T, env *Envelope) {
	t.Helper()
	checkMarshal(t, env, MarshalEnvelope)
}

// writeFast reports whether appendEnvelope writes env itself.
func writeFast(env *Envelope) bool { _, ok := appendEnvelope(nil, env); return ok }

// marshalSeeds are envelopes with every kind of value the writer meets or
// declines.
func marshalSeeds() []*Envelope {
	deep := map[string]any{}
	m := deep
	for range maxWriteDepth + 2 {
		n := map[string]any{}
		m["d"] = n
		m = n
	}
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	return []*Envelope{
		{},
		{RequestID: "r", IsStream: true, Trace: &TraceContext{}},
		{Params: map[string]any{}, Provenance: &Provenance{}, Auth: &Auth{}},
		{Params: map[string]any{"html": "<a href=\"x\">&</a>", "ls": "a\u2028b\u2029c", "bad": "\xff\xfe", "ctl": "\x00\x1f\b\f\n\r\t\\"}},
		{Params: map[string]any{"f": 1.5, "small": 1e-7, "big": 1e21, "neg": -2.5e-9, "zero": 0.0, "int": 42.0, "max": math.MaxFloat64}},
		{Params: map[string]any{"nan": math.NaN()}},
		{Params: map[string]any{"inf": math.Inf(-1)}},
		{Params: map[string]any{"n": json.Number("12345678901234567890"), "e": json.Number(""), "neg": json.Number("-1.5e3")}},
		{Params: map[string]any{"bad": json.Number("1 ")}},
		{Params: map[string]any{"bad": json.Number("abc")}},
		{Params: map[string]any{"bad": json.Number("0x10")}},
		{Params: map[string]any{"nil": nil, "nm": map[string]any(nil), "na": []any(nil), "ns": []string(nil), "nss": map[string]string(nil)}},
		{Params: map[string]any{"arr": []any{1.0, "x", true, false, nil, []any{}, map[string]any{}}, "ss": []string{"a", "<"}, "sm": map[string]string{"b": "2", "a": "1"}}},
		{Params: map[string]any{"int": 7, "raw": json.RawMessage(`{"a":1}`), "t": struct{ A int }{1}}},
		{Params: deep},
		{Params: cyclic},
		{JSONRPCID: json.RawMessage(`"req-1"`)},
		{JSONRPCID: json.RawMessage(`7`)},
		{JSONRPCID: json.RawMessage(`"a b"`)},
		{JSONRPCID: json.RawMessage(`"<&>"`)},
		{JSONRPCID: json.RawMessage(`{"x": 1}`)},
		{JSONRPCID: json.RawMessage(`nope`)},
		{JSONRPCID: json.RawMessage("\"\u2028\"")},
		{JSONRPCID: json.RawMessage{}},
		{ExpectedOutputModes: []string{}, Auth: &Auth{ExtraHeaders: map[string]string{}}},
		{
			ProtocolVersion: "1.0", RequestID: "01a2155a-c628-78c3", CorrelationID: "c", TaskID: "t", ContextID: "ctx",
			SessionID: "s", Channel: "http", Method: "message/stream", MessageID: "m-1", Timestamp: "2026-11-26T00:56:40.232415+00:00",
			IdentityOrigin: "user", UserID: "u", SourceAgentID: "a", ExtMethod: "x", SessionUpdateKind: "k",
			ExpectedOutputModes: []string{"text/plain", "application/json"}, Deadline: "2026-01-01T00:00:00Z",
			Provenance:     &Provenance{SourceProtocol: "a2a", Converter: "c", ConvertedAt: "now", Details: map[string]any{"op": "submit", "task_created": true}},
			Auth:           &Auth{MethodID: "m", BearerToken: "b", APIKeyRef: "k", CredentialRef: "c", ExtraHeaders: map[string]string{"X": "1", "A": "<"}, Meta: map[string]any{"z": 1.0}},
			ChannelContext: map[string]any{"a": "b"}, A2AMetadata: map[string]any{"m": []any{"x"}}, ACPMeta: map[string]any{"k": nil},
			Trace: &TraceContext{Traceparent: "00-x", Tracestate: "k=v"},
		},
	}
}

// TestMarshalEnvelopeMatches: MarshalEnvelope writes what json.Marshal
// writes, for the seeds, every envelope the read seeds give and the golden
// envelopes; the writer handles most of them itself.
func TestMarshalEnvelopeMatches(t *testing.T) {
	envs := marshalSeeds()
	inputs := append([]string(nil), fromJSONSeeds...)
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.in.json"))
	if len(files) == 0 {
		t.Fatal("no golden envelopes")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
	}
	for _, in := range inputs {
		if env, err := FromJSON([]byte(in)); err == nil {
			envs = append(envs, env)
		}
	}
	fast := 0
	for _, env := range envs {
		checkMarshalEnvelope(t, env)
		if writeFast(env) {
			fast++
		}
	}
	if fast < len(envs)*3/4 {
		t.Errorf("the writer wrote %d envelopes of %d itself", fast, len(envs))
	}
	for _, env := range marshalSeeds()[5:7] { // NaN, -Inf
		if _, err := MarshalEnvelope(env); err == nil {
			t.Errorf("MarshalEnvelope(%v) gave no error", env.Params)
		}
	}
}

// TestMarshalEnvelopeAllocs: an A2A envelope is written in a few
// allocations (json.Marshal takes about 60 for it, through reflection and
// sorting).
func TestMarshalEnvelopeAllocs(t *testing.T) {
	env, err := FromJSON([]byte(fromJSONSeeds[6]))
	if err != nil {
		t.Fatal(err)
	}
	if !writeFast(env) {
		t.Fatal("the writer declined the A2A envelope")
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = MarshalEnvelope(env) }); n > 3 {
		t.Errorf("MarshalEnvelope: %.0f allocations, want ≤ 3", n)
	}
}

// FuzzMarshalEnvelope compares MarshalEnvelope with json.Marshal on every
// envelope FromJSON reads, and on its params read as encoding/json reads
// them (float64 numbers).
func FuzzMarshalEnvelope(f *testing.F) {
	for _, s := range fromJSONSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := FromJSON(data)
		if err != nil {
			return
		}
		checkMarshalEnvelope(t, env)
		var m map[string]any
		if json.Unmarshal(data, &m) == nil {
			env.Params, env.ChannelContext = m, nil
			checkMarshalEnvelope(t, env)
		}
	})
}

func BenchmarkMarshalEnvelope(b *testing.B) {
	env, err := FromJSON([]byte(fromJSONSeeds[6]))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fast bool
	}{{"json.Marshal", false}, {"MarshalEnvelope", true}} {
		b.Run(c.name, func(b *testing.B) {
			fastWrite = c.fast
			defer func() { fastWrite = true }()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := MarshalEnvelope(env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMarshalResponseMatches: MarshalResponse writes what json.Marshal
// writes, for responses with every member and kind of value, and for every
// response the read seeds give; the writer handles most itself.
func TestMarshalResponseMatches(t *testing.T) {
	rs := []*Response{
		{},
		{Body: json.RawMessage(`{"a":1}`), JSONRPCID: json.RawMessage(`"x"`), IsStream: true, Sequence: -3, IsFinal: true},
		{Body: json.RawMessage(`{"a": 1}`)},
		{Body: json.RawMessage(`{"h":"<"}`)},
		{Body: json.RawMessage(`nope`)},
		{Body: json.RawMessage{}},
		{Body: json.RawMessage(`{}`), JSONRPCID: json.RawMessage("\"\u2028\"")},
		{Provenance: Provenance{SourceProtocol: "<e2a>", Converter: "agent", ConvertedAt: "t", Details: map[string]any{"pool": "p", "n": json.Number("1")}}},
		{Metadata: map[string]any{"nan": math.NaN()}},
		{Metadata: map[string]any{"t": struct{ A int }{1}}},
		{
			ProtocolVersion: "1.0", ResponseID: "r-\xff", RequestID: "q&", Sequence: math.MaxInt64, Status: "in_progress", ResponseKind: "e2a.chunk",
			Timestamp: "2026-11-26T00:56:40.232415Z", Body: json.RawMessage(`{"delta_kind":"text","delta":"hi"}`),
			CorrelationID: "c", TaskID: "t", ContextID: "ctx", SessionID: "s", MessageID: "m", IdentityOrigin: "user", Channel: "http",
			UserID: "u", SourceAgentID: "a", Method: "message/stream", Metadata: map[string]any{"m": 1.5}, Projections: map[string]any{"p": []any{"x"}},
			ChannelContext: map[string]any{"c": nil}, A2AMetadata: map[string]any{"k": "v"}, ACPMeta: map[string]any{"_": true},
		},
	}
	for _, s := range responseSeeds {
		var r Response
		if json.Unmarshal([]byte(s), &r) == nil {
			rs = append(rs, &r)
		}
	}
	fast := 0
	for _, r := range rs {
		checkMarshal(t, r, MarshalResponse)
		if _, ok := appendResponse(nil, r); ok {
			fast++
		}
	}
	if fast < len(rs)*2/3 {
		t.Errorf("the writer wrote %d responses of %d itself", fast, len(rs))
	}
}

// FuzzMarshalResponse compares MarshalResponse with json.Marshal on every
// response json.Unmarshal reads.
func FuzzMarshalResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Response
		if json.Unmarshal(data, &r) != nil {
			return
		}
		checkMarshal(t, &r, MarshalResponse)
	})
}
