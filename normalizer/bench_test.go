package normalizer_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// Benchmarks, one per protocol, on a typical request (a golden input).
// They report normalizations per second (norm/s) besides ns/op, B/op and
// allocs/op:
//
//	go test ./normalizer/ -run '^$' -bench . -benchmem
var benchInputs = map[string]string{
	normalizer.ProtocolE2A:        "e2a/spec_11_1_gateway_chat.in.json",
	normalizer.ProtocolACP:        "acp/wire_session_prompt.in.json",
	normalizer.ProtocolA2A:        "a2a/trpc_message_send.in.json",
	normalizer.ProtocolAgentVault: "agentvault/tasks_send_initiate.in.json",
	normalizer.ProtocolA2E:        "a2e/spec_tool_call_req.in.json",
	normalizer.ProtocolWorkflow:   "a2e.workflow/spec_complete_example.in.jsonl",
}

func benchAdapter(b *testing.B, protocol string) {
	n := testNormalizer(b)
	adapter, _ := n.Adapter(protocol)
	body, err := os.ReadFile(filepath.Join("testdata", "golden", benchInputs[protocol]))
	if err != nil {
		b.Fatal(err)
	}
	now := func() time.Time { return fixedNow }
	newID := func() string { return "id-bench" }
	hdr := confHeaders()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := adapter(normalizer.Input{Body: body, Header: hdr, Now: now, NewID: newID}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "norm/s")
}

func BenchmarkE2A(b *testing.B)        { benchAdapter(b, normalizer.ProtocolE2A) }
func BenchmarkACP(b *testing.B)        { benchAdapter(b, normalizer.ProtocolACP) }
func BenchmarkA2A(b *testing.B)        { benchAdapter(b, normalizer.ProtocolA2A) }
func BenchmarkAgentVault(b *testing.B) { benchAdapter(b, normalizer.ProtocolAgentVault) }
func BenchmarkA2E(b *testing.B)        { benchAdapter(b, normalizer.ProtocolA2E) }
func BenchmarkWorkflow(b *testing.B)   { benchAdapter(b, normalizer.ProtocolWorkflow) }

// BenchmarkACPExport measures EnvelopeToACPPeerCall (E2A → ACP JSON-RPC).
func BenchmarkACPExport(b *testing.B) {
	env, err := e2a.FromJSON([]byte(`{"method":"chat.send","request_id":"r1","session_id":"s1","params":{"content":"Hello","mode":"plan","query":"Hello"}}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := normalizer.EnvelopeToACPPeerCall(env); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "norm/s")
}
