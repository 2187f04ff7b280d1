package ingress_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestDebugLineEveryDoor: with the logger at Debug (E2A_LOG_LEVEL=debug),
// every door's answer has its line, as a REST request's: the JSON-RPC
// doors (/a2a, /acp) with the call's method and the request it
// published, A2E, and a gRPC call at its admission. Only the REST routes
// had one.
func TestDebugLineEveryDoor(t *testing.T) {
	var logs testkit.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := pipetest.Start(t, pipetest.WithGRPC(), pipetest.WithIngress(ingress.WithLogger(log)))
	p.Pool("demo", demo.New(), agent.WithMetrics(p.Registry))
	send := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-log","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`
	if resp, b := do(t, "POST", p.URL+"/a2a?agent=demo", send, "Content-Type", "application/json"); resp.StatusCode != http.StatusOK {
		t.Fatalf("/a2a: %d %s", resp.StatusCode, b)
	}
	if resp, b := do(t, "POST", p.URL+"/a2e?agent=demo", `{"a2e":"1.0","id":"p1","type":"ping"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("/a2e: %d %s", resp.StatusCode, b)
	}
	c, ctx := grpcProtoClient(t, p.GRPCAddr)
	_, _ = c.GetTask(ctx, nil)
	lines := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["level"] != "DEBUG" {
			continue
		}
		if path, _ := m["path"].(string); m["msg"] == "http" {
			lines[path] = m
		}
		if m["msg"] == "grpc" {
			lines["grpc"] = m
		}
	}
	if a := lines["/a2a"]; a == nil || a["code"] != float64(200) || a["rpc"] != "message/send" || a["request_id"] == "" {
		t.Errorf("/a2a's debug line %v", a)
	}
	if a := lines["/a2e"]; a == nil || a["code"] != float64(200) {
		t.Errorf("/a2e's debug line %v", a)
	}
	if g := lines["grpc"]; g == nil || g["method"] == "" {
		t.Errorf("the gRPC call's debug line %v", g)
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs.String())
	}
}
