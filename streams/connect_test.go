package streams_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/streams"
)

// TestRedactURLs: credentials in NATS URLs are never printed (found by a
// review: e2a dev printed and logged E2A_NATS_URL as given).
func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                            "nats://127.0.0.1:4222",
		"nats://u:s3cret@h:4222":                           "nats://u:xxxxx@h:4222",
		"nats://t0ken@h:4222":                              "nats://xxxxx@h:4222",
		"nats://a:p1@h1:4222,nats://h2:4222,tls://b:p2@h3": "nats://a:xxxxx@h1:4222,nats://h2:4222,tls://b:xxxxx@h3",
	} {
		if got := streams.RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
	c := streams.ConnConfig{NatsURL: "nats://u:s3cret@h:4222"}
	if strings.Contains(c.String(), "s3cret") || strings.Contains(fmt.Sprint(c.LogValue()), "s3cret") {
		t.Errorf("a URL's password shown: %s", c)
	}
}

// TestInboxPrefixPerUser: a connection as a user gets the inboxes
// "_INBOX.<user>.*", the one part of _INBOX its user may subscribe to in
// deploy/nats/accounts.conf; a request's reply reaches it there. With
// nats.go's default inboxes (_INBOX.<random>) that user could not
// subscribe to its own replies, and a user that may (_INBOX.>) reads
// every other client's.
func TestInboxPrefixPerUser(t *testing.T) {
	srv := runServer(t, &server.Options{Users: []*server.User{
		{Username: "svc", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"svc.echo"}},
		}},
		{Username: "ingress", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"svc.echo"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.ingress.>"}},
		}},
	}})
	svc, err := streams.Connect(ctx(t), streams.ConnConfig{NatsURL: srv.ClientURL(), User: "svc", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := svc.Subscribe("svc.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		t.Fatal(err)
	}
	if err := svc.Flush(); err != nil {
		t.Fatal(err)
	}
	nc, err := streams.Connect(ctx(t), streams.ConnConfig{NatsURL: srv.ClientURL(), User: "ingress", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if in := nc.NewInbox(); !strings.HasPrefix(in, "_INBOX.ingress.") {
		t.Errorf("inbox %q, want _INBOX.ingress.*", in)
	}
	m, err := nc.RequestWithContext(ctx(t), "svc.echo", []byte("ping"))
	if err != nil || string(m.Data) != "ping" {
		t.Fatalf("request as ingress: %v %v", m, err)
	}

	// An explicit prefix wins; a user name that is no subject token gives
	// nats.go's default.
	for _, c := range []struct {
		cfg  streams.ConnConfig
		want string
	}{
		{streams.ConnConfig{NatsURL: srv.ClientURL(), User: "ingress", Password: "pw", InboxPrefix: "_I.team-a"}, "_I.team-a."},
		{streams.ConnConfig{NatsURL: srv.ClientURL()}, "_INBOX."},
	} {
		opts, err := c.cfg.Options()
		if err != nil {
			t.Fatal(err)
		}
		var o nats.Options
		for _, opt := range opts {
			if err := opt(&o); err != nil {
				t.Fatal(err)
			}
		}
		if o.InboxPrefix+"." != c.want && !(o.InboxPrefix == "" && c.want == nats.InboxPrefix) {
			t.Errorf("%+v: inbox prefix %q, want %q", c.cfg, o.InboxPrefix, c.want)
		}
	}
	for user, want := range map[string]string{"agent-demo": "_INBOX.agent-demo", "svc_1": "_INBOX.svc_1", "": "", "a.b": "", "a b": "", "a*": "", "é": ""} {
		if got := streams.InboxPrefixFor(user); got != want {
			t.Errorf("InboxPrefixFor(%q) = %q, want %q", user, got, want)
		}
	}
	for _, bad := range []string{"_INBOX.>", "_INBOX.*.x", "a..b", "a.", ".a", "a b"} {
		if err := (streams.ConnConfig{NatsURL: "nats://a", InboxPrefix: bad}).Validate(); !errors.Is(err, streams.ErrInvalidConnConfig) {
			t.Errorf("inbox prefix %q: %v", bad, err)
		}
	}
}
