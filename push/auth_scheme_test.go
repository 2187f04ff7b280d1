package push_test

import (
	"errors"
	"testing"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	a2a "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/push"
)

// TestAuthSchemeWithoutCredentials: A2A v0.3's
// PushNotificationAuthenticationInfo lists the schemes the webhook
// accepts, credentials optional (types.ts: "schemes: string[];
// credentials?: string"; the spec's §9.5 example sends {"schemes":
// ["Bearer"]} alone), and v1.0's AuthenticationInfo takes any IANA scheme
// with optional credentials. A config naming a scheme the stage does not
// send (OAuth2, Digest) without credentials has nothing to send under
// it: it is stored, answered as given, and delivered with its token and
// no Authorization header. With credentials such a scheme, or none, is
// still refused: they could not be sent as asked.
func TestAuthSchemeWithoutCredentials(t *testing.T) {
	e := newEnv(t)
	e.startStage()
	r := pushtest.NewReceiver(t)
	ctx := tctx(t)
	v03 := &a2a03.TaskPushConfig{TaskID: "t1", Config: a2a03.PushConfig{URL: r.URL + "/v03", Token: "tok03",
		Auth: &a2a03.PushAuthInfo{Schemes: []string{"OAuth2"}}}}
	got03, err := e.store.Create(ctx, "alice", push.FromV03(v03))
	if err != nil {
		t.Fatalf("v0.3 config with schemes [OAuth2] and no credentials: %v", err)
	}
	if back := got03.V03(); back.Config.Auth == nil || len(back.Config.Auth.Schemes) != 1 || back.Config.Auth.Schemes[0] != "OAuth2" {
		t.Errorf("v0.3 config answered %+v, want its schemes [OAuth2]", back.Config.Auth)
	}
	v1 := &a2a.PushConfig{TaskID: "t1", ID: "v1", URL: r.URL + "/v1", Token: "tok1", Auth: &a2a.PushAuthInfo{Scheme: "Digest"}}
	got1, err := e.store.Create(ctx, "alice", push.FromV1(v1))
	if err != nil {
		t.Fatalf("v1.0 config with scheme Digest and no credentials: %v", err)
	}
	if back := got1.V1(); back.Auth == nil || back.Auth.Scheme != "Digest" {
		t.Errorf("v1.0 config answered %+v, want its scheme Digest", back.Auth)
	}
	for _, bad := range []push.Config{
		push.FromV03(&a2a03.TaskPushConfig{TaskID: "t1", Config: a2a03.PushConfig{URL: r.URL,
			Auth: &a2a03.PushAuthInfo{Schemes: []string{"OAuth2"}, Credentials: "c"}}}),
		push.FromV03(&a2a03.TaskPushConfig{TaskID: "t1", Config: a2a03.PushConfig{URL: r.URL,
			Auth: &a2a03.PushAuthInfo{Credentials: "c"}}}),
		{TaskID: "t1", URL: r.URL, Auth: &push.Auth{}},
		{TaskID: "t1", URL: r.URL, Auth: &push.Auth{Scheme: "Bad Scheme"}},
	} {
		if _, err := e.store.Create(ctx, "alice", bad); !errors.Is(err, push.ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", bad.Auth, err)
		}
	}
	e.turn("alice", "t1", "", "", 2)
	for path, done := range map[string]string{"/v03": "completed", "/v1": "TASK_STATE_COMPLETED"} {
		for _, d := range r.Await(t, 20*time.Second, path, done) {
			if d.Auth != "" || d.Token == "" {
				t.Fatalf("delivery to %s: Authorization %q, token %q; want no Authorization and the token", path, d.Auth, d.Token)
			}
		}
	}
}
