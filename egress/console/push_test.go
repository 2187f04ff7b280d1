package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/internal/pushtest"
	"github.com/e2a-pipeline/pipeline/push"
)

// pushView is the console's view of a push store, as cmd/e2a wires it.
func pushView(st *push.Store) console.PushView {
	return func(ctx context.Context, principal, taskID string) ([]console.PushDelivery, error) {
		ds, err := st.Deliveries(ctx, principal, taskID)
		out := make([]console.PushDelivery, 0, len(ds))
		for _, d := range ds {
			out = append(out, console.PushDelivery(d))
		}
		return out, err
	}
}

// startPushConsole is startPipeline with API keys, a push store the
// console views and the push stage; alice has a config (cfg-1, to the
// receiver, with a secret path, query, token and credentials) of her task
// t-alice.
func startPushConsole(t *testing.T) (*pipeline, *pushtest.Receiver) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var st *push.Store
	view := func(ctx context.Context, principal, taskID string) ([]console.PushDelivery, error) {
		return pushView(st)(ctx, principal, taskID)
	}
	p := startPipeline(t, pipelineOptions{auth: true, console: []console.Option{console.WithPushView(view)}})
	var err error
	if st, err = push.NewStore(ctx, p.nc, push.WithAllowHosts("127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	stageDone := make(chan error, 1)
	go func() { stageDone <- push.Run(ctx, p.nc, push.WithAllowHosts("127.0.0.1")) }()
	t.Cleanup(func() { cancel(); <-stageDone })
	r := pushtest.NewReceiver(t)
	if _, err := st.Create(ctx, "alice", push.Config{TaskID: "t-alice", ID: "cfg-1", URL: r.URL + "/secret-path?q=secret-query",
		Token: "tok-secret", Auth: &push.Auth{Scheme: "Bearer", Credentials: "cred-secret"}}); err != nil {
		t.Fatal(err)
	}
	return p, r
}

// TestTaskPush: GET /console/api/tasks/{task}/push shows alice her
// task's config (the webhook's host, the last update handled, no
// failure) once the push stage delivered the request's updates, and
// never the URL's path or query, the token or the credentials; bob sees
// no config of alice's task, asked as himself or naming her; the audit
// role names her and sees it. Without a push view the route is 404.
func TestTaskPush(t *testing.T) {
	if err := console.WithPushView(nil)(nil); err == nil {
		t.Error("WithPushView(nil) accepted")
	}
	p0 := startPipeline(t, pipelineOptions{noAgent: true})
	if resp, _ := p0.do(t, "GET", "/console/api/tasks/t1/push", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("without a push view: %d, want 404", resp.StatusCode)
	}

	p, r := startPushConsole(t)
	id := p.submit(t, `{"task_id":"t-alice","params":{"text":"push view","frames":2}}`, "X-Api-Key", keyAlice)
	waitFinal(t, p, id)
	var got console.TaskPush
	waitFor(t, 20*time.Second, "alice's config at the task's last update", func() bool {
		resp, b := p.do(t, "GET", "/console/api/tasks/t-alice/push", "", "X-Api-Key", keyAlice)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("alice: %d %s", resp.StatusCode, b)
		}
		for _, secret := range []string{"secret-path", "secret-query", "tok-secret", "cred-secret"} {
			if strings.Contains(string(b), secret) {
				t.Fatalf("the view shows %q: %s", secret, b)
			}
		}
		got = decode[console.TaskPush](t, b)
		ds := r.All()
		return len(got.Configs) == 1 && len(ds) > 0 && ds[len(ds)-1].State == "TASK_STATE_COMPLETED" &&
			got.Configs[0].LastEvent == ds[len(ds)-1].EventID
	})
	c := got.Configs[0]
	if got.Principal != "alice" || c.ConfigID != "cfg-1" || c.Host != strings.TrimPrefix(r.URL, "http://") ||
		!strings.HasPrefix(c.LastEvent, id+":") || c.Attempts != 0 || c.DeadLetters != 0 || c.DeadLetterMode {
		t.Errorf("alice's view %+v", got)
	}
	for _, path := range []string{"/console/api/tasks/t-alice/push", "/console/api/tasks/t-alice/push?user=alice"} {
		resp, b := p.do(t, "GET", path, "", "X-Api-Key", keyBob)
		var tp console.TaskPush
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &tp) != nil || len(tp.Configs) != 0 || strings.Contains(string(b), "cfg-1") {
			t.Errorf("bob GET %s: %d %s, want no config", path, resp.StatusCode, b)
		}
	}
	resp, b := p.do(t, "GET", "/console/api/tasks/t-alice/push?user=alice", "", "X-Api-Key", keyOps)
	if tp := decode[console.TaskPush](t, b); resp.StatusCode != http.StatusOK || len(tp.Configs) != 1 || tp.Configs[0].ConfigID != "cfg-1" {
		t.Errorf("audit GET ?user=alice: %d %s", resp.StatusCode, b)
	}
}
