package streams_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
)

// TestApplyRefusedToAStageUser: a stage of a newer build started as its
// NATS user, which may read the streams but not change them, on the
// streams of an earlier build (before `e2a streams apply` of the newer
// one ran) gets ErrNotPermitted naming what differs, after one refused
// update, and sends no other: it exited with "context deadline exceeded"
// after each refused update had been sent again for 30 s (2 minutes,
// measured with a build of 2026-12-01's streams and deploy's
// accounts.conf). The same user's Apply of streams that match changes
// nothing and succeeds.
func TestApplyRefusedToAStageUser(t *testing.T) {
	srv := runServer(t, &server.Options{JetStream: true, StoreDir: t.TempDir(), Users: []*server.User{
		{Username: "admin", Password: "pw"},
		{Username: "stage", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"$JS.API.INFO", "$JS.API.STREAM.INFO.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.stage.>"}},
		}},
	}})
	connect := func(user string) jetstream.JetStream {
		nc, err := streams.Connect(ctx(t), streams.ConnConfig{NatsURL: srv.ClientURL(), User: user, Password: "pw"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return natstest.JetStream(t, nc)
	}
	admin, stage := connect("admin"), connect("stage")

	// The earlier build's layout: two resources differ from this one's.
	now, earlier := natstest.Config(), natstest.Config()
	earlier.RequestsMaxBytes = now.RequestsMaxBytes / 2
	earlier.KeyValueMaxBytes = now.KeyValueMaxBytes / 2
	if _, err := streams.Apply(ctx(t), admin, earlier); err != nil {
		t.Fatal(err)
	}

	rep, err := streams.Apply(ctx(t), stage, now)
	if !errors.Is(err, streams.ErrNotPermitted) {
		t.Fatalf("Apply as a stage user on an earlier layout: %v, want ErrNotPermitted", err)
	}
	if !strings.Contains(err.Error(), "MaxBytes") {
		t.Errorf("the error does not say what differs: %v", err)
	}
	var failed []string
	for _, c := range rep.Changes {
		if c.Action == streams.ActionFailed {
			failed = append(failed, c.Name)
			if !errors.Is(c.Err, streams.ErrNotPermitted) || len(c.Drift) == 0 {
				t.Errorf("%s: %v, drift %q; want ErrNotPermitted with its drift", c.Name, c.Err, c.Drift)
			}
		} else if c.Action != streams.ActionUnchanged {
			t.Errorf("%s: %s by a user that may not change it", c.Name, c.Action)
		}
	}
	if len(failed) < 2 {
		t.Errorf("failed %q: want E2A_REQUESTS and every bucket", failed)
	}

	if _, err := streams.Apply(ctx(t), admin, now); err != nil {
		t.Fatal(err)
	}
	if _, err := streams.Apply(ctx(t), stage, now); err != nil {
		t.Errorf("Apply as a stage user of the streams as defined: %v", err)
	}
}
