package push_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestWebhookPathNotLogged: a webhook whose URL path is its secret (Slack,
// Discord and similar hooks: docs/security.md says a URL's path "may hold a
// webhook's token", and the console shows a push config's host only)
// refuses an update; the stage's log line names its host, not that path
// (it quoted it).
func TestWebhookPathNotLogged(t *testing.T) {
	const secret = "T0SECRETPATHb2f1c9d7e8a6"
	e := newEnv(t)
	e.startStage()
	r := newReceiver(t, func(int, http.ResponseWriter) int { return http.StatusNotFound })
	e.create("alice", push.Config{TaskID: "t1", URL: r.srv.URL + "/services/" + secret})
	e.turn("alice", "t1", "", "", 1)
	testkit.Eventually(t, 20*time.Second, "the refusal logged", func() bool {
		return strings.Contains(e.log.String(), "webhook refused an update")
	})
	if line := firstLine(e.log.String(), secret); line != "" {
		t.Errorf("the stage's log quotes the webhook's secret path: %s", line)
	}
}
