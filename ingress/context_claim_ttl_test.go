package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent/demo"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestClaimNotRewrittenWhenRecordsNeverExpire: with E2A_TASKS_TTL 0
// (records never expire: TaskStore.contextRefresh is -1) a new task in an
// existing context does not write the claim again (nothing expires;
// claimContext halved contextRefresh, and -1/2 is 0: every new task of the
// context wrote the claim).
func TestClaimNotRewrittenWhenRecordsNeverExpire(t *testing.T) {
	cfg := natstest.Config()
	cfg.TasksTTL = 0
	_, nc := natstest.RunServer(t, natstest.WithConfig(cfg))
	auth, err := ingress.NewAuth(&ingress.AuthConfig{APIKeys: []ingress.Credential{{Principal: "alice", Secret: "ak_rv2_alice_0123456789"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := pipetest.Start(t, pipetest.WithConn(nc), pipetest.WithIngress(ingress.WithAuth(auth)))
	p.Pool("demo", demo.New())
	send := func(mid string) {
		t.Helper()
		_, b := testkit.Do(t, http.MethodPost, p.URL+"/a2a?agent=demo", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"contextId":"ctx-rv2","kind":"message","role":"user","messageId":"`+mid+`","parts":[{"kind":"text","text":"hello"}]}}}`,
			"X-Api-Key", "ak_rv2_alice_0123456789")
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if m["error"] != nil {
			t.Fatalf("send: %s", b)
		}
	}
	ctx := context.Background()
	kv, err := p.JS.KeyValue(ctx, streams.TasksBucket)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := subjects.EncodeID("ctx-rv2")
	send("m-1")
	e, err := kv.Get(ctx, "context."+tok)
	if err != nil {
		t.Fatal(err)
	}
	rev := e.Revision()
	for _, mid := range []string{"m-2", "m-3", "m-4"} {
		send(mid)
	}
	e, err = kv.Get(ctx, "context."+tok)
	if err != nil {
		t.Fatal(err)
	}
	if e.Revision() != rev {
		t.Errorf("claim written again by new tasks with TTL 0: revision %d -> %d", rev, e.Revision())
	}
}
