package ingress_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/e2a-pipeline/pipeline/ingress"
)

// TestA2AExtensionsEchoed: the answer to a call that activates the trpc
// interaction spec (its URI in the A2A-Extensions service parameter, the
// card lists it) names it in its A2A-Extensions header (gRPC: header
// metadata), X-A2A-Extensions on v0.3: "the response SHOULD include the
// A2A-Extensions header, listing all extensions that were successfully
// activated for that request" (A2A topics/extensions.md, v0.3 and v1.0).
// Only the replay extension was echoed. An extension the card does not
// list is not; a call naming none gets no header.
func TestA2AExtensionsEchoed(t *testing.T) {
	p, addr := startGRPCPipeline(t)
	ext := ingress.TRPCInteractionExtension
	requested := ext + ", https://example.com/unknown/v1"
	post := func(path, hdr, val, body string) http.Header {
		t.Helper()
		req, err := http.NewRequestWithContext(tckCtx(t), http.MethodPost, p.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if val != "" {
			req.Header.Set(hdr, val)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		return resp.Header
	}
	v1Msg := `{"message":{"role":"ROLE_USER","messageId":"MID","parts":[{"text":"hi"}]}}`
	v1 := func(id string) string { return strings.Replace(v1Msg, "MID", id, 1) }
	for _, c := range []struct{ name, path, hdr, body string }{
		{"v1.0 SendMessage", "/a2a/v1", "A2A-Extensions", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + v1("m1") + `}`},
		{"v1.0 SendStreamingMessage", "/a2a/v1", "A2A-Extensions", `{"jsonrpc":"2.0","id":2,"method":"SendStreamingMessage","params":` + v1("m2") + `}`},
		{"v1.0 message:send", "/a2a/v1/message:send", "A2A-Extensions", v1("m3")},
		{"v1.0 message:stream", "/a2a/v1/message:stream", "A2A-Extensions", v1("m4")},
		{"v0.3 message/send", "/a2a", "X-A2A-Extensions", `{"jsonrpc":"2.0","id":5,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m5","parts":[{"kind":"text","text":"hi"}]}}}`},
		{"v0.3 message/stream", "/a2a", "X-A2A-Extensions", `{"jsonrpc":"2.0","id":6,"method":"message/stream","params":{"message":{"kind":"message","role":"user","messageId":"m6","parts":[{"kind":"text","text":"hi"}]}}}`},
	} {
		if got := post(c.path, c.hdr, requested, c.body).Values(c.hdr); strings.Join(got, ",") != ext {
			t.Errorf("%s with %s %q: answer's %s %q, want %q", c.name, c.hdr, requested, c.hdr, got, ext)
		}
		body := strings.Replace(c.body, `"messageId":"m`, `"messageId":"n`, 1)
		if got := post(c.path, "", "", body).Values(c.hdr); len(got) != 0 {
			t.Errorf("%s without %s: answer's %s %q, want none", c.name, c.hdr, c.hdr, got)
		}
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	msg := &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "g1", Role: a2apb.Role_ROLE_USER,
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hi"}}}}}
	var md metadata.MD
	if _, err := a2apb.NewA2AServiceClient(conn).SendMessage(metadata.AppendToOutgoingContext(tckCtx(t), "a2a-extensions", requested),
		msg, grpc.Header(&md)); err != nil {
		t.Fatal(err)
	}
	if got := md.Get("a2a-extensions"); strings.Join(got, ",") != ext {
		t.Errorf("gRPC SendMessage: header a2a-extensions %q, want %q", got, ext)
	}
}
