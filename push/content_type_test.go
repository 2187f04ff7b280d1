package push_test

import (
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestContentTypeOfVersions: both generations' updates are posted as
// application/json, what A2A v1.0.0's Push Notification Payload (§4.3.3)
// and v0.3's example name and what the SDKs' senders send (a2a-go/v2,
// a2a-python); v1.0.1's application/a2a+json is not sent, so that a
// receiver parsing application/json only reads the body (docs/push.md).
func TestContentTypeOfVersions(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	r := pushtest.NewReceiver(t)
	e.create("alice", push.Config{TaskID: "ct", URL: r.URL + "/v1", Version: push.V1})
	e.create("alice", push.Config{TaskID: "ct", URL: r.URL + "/v03", Version: push.V03})
	e.turn("alice", "ct", "", "a", 2)
	for _, c := range []struct{ path, done string }{{"/v1", "TASK_STATE_COMPLETED"}, {"/v03", "completed"}} {
		ds := r.Await(t, 20*time.Second, c.path, c.done)
		if len(ds) == 0 {
			t.Fatalf("no update to %s", c.path)
		}
		for _, d := range ds {
			if d.ContentType != "application/json" {
				t.Errorf("update %s to %s: Content-Type %q, want application/json", d.EventID, c.path, d.ContentType)
				break
			}
		}
	}
}
