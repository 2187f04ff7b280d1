package push_test

import (
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestTokenHeadersOfTheSDKs: a v1.0 config's token reaches its webhook in
// both headers the A2A SDKs' v1.0 senders use, A2A-Notification-Token
// (a2a-go/v2's a2asrv/push) and X-A2A-Notification-Token (a2a-python 1.x's
// BasePushNotificationSender, @a2a-js/sdk 1.0's default sender,
// a2a-java's BasePushNotificationSender, whose receivers and samples read
// it), the same value; a v0.3 config's in X-A2A-Notification-Token only,
// as the v0.3 SDKs send it. A2A v1.0 names no token header. Before, a
// v1.0 config's token was sent as A2A-Notification-Token alone: a receiver
// written for the Python, JS or Java SDK's deliveries found no token and
// refused every update.
func TestTokenHeadersOfTheSDKs(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	v1, v03 := newReceiver(t, nil), newReceiver(t, nil)
	e.create("alice", push.Config{TaskID: "hdr", URL: v1.srv.URL, Token: "tok-1", Version: push.V1})
	e.create("alice", push.Config{TaskID: "hdr", URL: v03.srv.URL, Token: "tok-03", Version: push.V03})
	e.turn("alice", "hdr", "", "a", 2)
	for _, r := range []*receiver{v1, v03} {
		testkit.Eventually(t, 20*time.Second, "the turn's updates delivered", func() bool { return len(r.accepted()) >= 3 })
	}
	for _, d := range v1.accepted() {
		if d.tokenV1 != "tok-1" || d.tokenV03 != "tok-1" {
			t.Fatalf("v1.0 update %s: %s %q, %s %q; want the token in both", d.eventID,
				push.HeaderTokenV1, d.tokenV1, push.HeaderTokenV03, d.tokenV03)
		}
	}
	for _, d := range v03.accepted() {
		if d.tokenV1 != "" || d.tokenV03 != "tok-03" {
			t.Fatalf("v0.3 update %s: %s %q, %s %q; want the token in %[4]s only", d.eventID,
				push.HeaderTokenV1, d.tokenV1, push.HeaderTokenV03, d.tokenV03)
		}
	}
}
