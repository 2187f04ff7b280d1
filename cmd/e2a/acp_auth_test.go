package main

import (
	"context"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

const (
	acpAliceKey = "ak_alice_0123456789abcdef"
	acpBobKey   = "ak_bob_0123456789abcdefgh"
	acpKeys     = "E2A_API_KEYS=alice:" + acpAliceKey + ",bob:" + acpBobKey
)

// TestACPAuthNeedsCredential: `e2a acp` under the pipeline's auth
// (E2A_API_KEYS) without the editor's credential exits at start, naming
// the variables, instead of serving every editor as the anonymous
// principal; a wrong credential exits at start too, never quoted; so do
// both variables at once.
func TestACPAuthNeedsCredential(t *testing.T) {
	base := []string{"E2A_NATS_URL=", "E2A_NATS_PORT=0", "E2A_STORE_DIR=" + t.TempDir(), acpKeys}
	for _, tc := range []struct {
		name  string
		env   []string
		wants []string
	}{
		{"none", []string{"E2A_ACP_API_KEY=", "E2A_ACP_BEARER_TOKEN="}, []string{"E2A_ACP_API_KEY", "E2A_ACP_BEARER_TOKEN"}},
		{"wrong key", []string{"E2A_ACP_API_KEY=ak_wrong_0123456789abcdef", "E2A_ACP_BEARER_TOKEN="}, []string{"E2A_ACP_API_KEY", "invalid API key"}},
		{"wrong token", []string{"E2A_ACP_API_KEY=", "E2A_ACP_BEARER_TOKEN=tok_wrong_0123456789abcdef"}, []string{"E2A_ACP_BEARER_TOKEN"}},
		{"both", []string{"E2A_ACP_API_KEY=" + acpAliceKey, "E2A_ACP_BEARER_TOKEN=tok_wrong_0123456789abcdef"}, []string{"E2A_ACP_API_KEY", "E2A_ACP_BEARER_TOKEN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, out, errOut := runBin(t, append(append([]string{}, base...), tc.env...), "acp")
			if code != exitFailure {
				t.Fatalf("e2a acp under auth, %s: exit %d, want %d (stderr %s)", tc.name, code, exitFailure, errOut)
			}
			for _, w := range tc.wants {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr must name %q: %s", w, errOut)
				}
			}
			for _, secret := range []string{"ak_wrong", "tok_wrong", acpAliceKey, acpBobKey} {
				if strings.Contains(errOut, secret) || strings.Contains(out, secret) {
					t.Errorf("a secret was printed: %s%s", out, errOut)
				}
			}
			if out != "" {
				t.Errorf("stdout must stay empty (it is the editor's protocol stream): %q", out)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v: must exit at start", d)
			}
		})
	}
}

// TestACPAuthCredentialServes: with the pipeline's auth and the editor's
// API key, `e2a acp` serves as that key's principal: initialize lists
// the pipeline's auth methods, and a prompt turn runs.
func TestACPAuthCredentialServes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := startACP(t, ctx, "E2A_NATS_PORT=0", "E2A_STORE_DIR="+t.TempDir(), "E2A_REQUESTS_MAX_BYTES=67108864", acpKeys,
		"E2A_ACP_API_KEY="+acpAliceKey)
	ini, sess := p.open(t, ctx)
	if len(ini.AuthMethods) == 0 {
		t.Fatalf("initialize lists no auth methods: %+v", ini)
	}
	res, err := p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sess, Prompt: []acp.ContentBlock{acp.TextBlock("hello")}})
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", res, err)
	}
	p.stop(t)
	if s := p.stderr.String(); strings.Contains(s, acpAliceKey) || !strings.Contains(s, "alice") {
		t.Fatalf("stderr must name the principal, never the key: %s", s)
	}
}
