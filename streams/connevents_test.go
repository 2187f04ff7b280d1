package streams_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// connEventLog is a ConnEvents writing JSON lines to a buffer, and a way
// to wait for a line.
type connEventLog struct {
	ev  *streams.ConnEvents
	buf *testkit.Buffer
}

func newConnEventLog() *connEventLog {
	buf := &testkit.Buffer{}
	return &connEventLog{ev: streams.NewConnEvents(slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))), buf: buf}
}

// line waits for a log line whose msg is msg and returns it decoded.
func (l *connEventLog) line(t *testing.T, msg string) map[string]any {
	t.Helper()
	var got map[string]any
	testkit.Eventually(t, 15*time.Second, "a log line "+msg, func() bool {
		for _, s := range strings.Split(l.buf.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(s), &m) == nil && m["msg"] == msg {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// TestConnEventsLostAndRestored: a stage's connection losing its server
// and regaining it is said in the process's log (nats.go alone says
// nothing of either), with the connection's name and the server's URL
// without its credentials, and counted; closing the connection at
// shutdown is no loss.
func TestConnEventsLostAndRestored(t *testing.T) {
	srv := natstest.RunRestartable(t)
	l := newConnEventLog()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := streams.Connect(ctx, streams.ConnConfig{NatsURL: fmt.Sprintf("nats://u:s3cret@127.0.0.1:%d", srv.Port()), Name: "e2a-test",
		ReconnectWait: 50 * time.Millisecond}, l.ev.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	lost := l.line(t, "NATS connection lost; reconnecting")
	if lost["connection"] != "e2a-test" || lost["level"] != "WARN" || lost["err"] == nil {
		t.Errorf("loss logged as %v", lost)
	}
	srv.Start()
	back := l.line(t, "NATS connection restored")
	if back["connection"] != "e2a-test" || back["server"] != fmt.Sprintf("nats://u:xxxxx@127.0.0.1:%d", srv.Port()) || back["reconnects"] != 1.0 {
		t.Errorf("restored logged as %v", back)
	}
	nc.Close()
	l.line(t, "NATS connection closed")
	if got := l.buf.String(); strings.Contains(got, "s3cret") || strings.Count(got, "NATS connection lost") != 1 {
		t.Errorf("the log holds the password or a second loss (the close):\n%s", got)
	}
	if d, r := l.ev.Count(streams.ConnDisconnected), l.ev.Count(streams.ConnReconnected); d != 1 || r != 1 {
		t.Errorf("counted %d disconnects and %d reconnects, want 1 and 1", d, r)
	}
}

// TestConnEventsAsyncErrors: a subscription too slow for its messages and
// a publish the user may not make are errors the server or the client
// raise outside any call; nats.go writes them to stderr as bare text
// unless told otherwise. They are logged with the subject, counted by
// kind, and the message's content is never in the line.
func TestConnEventsAsyncErrors(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: "stage", Password: "pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{"allowed.>"}},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	l := newConnEventLog()
	nc, err := nats.Connect(srv.ClientURL(), append(l.ev.Options(), nats.UserInfo("stage", "pw"), nats.Name("e2a-test"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// A subscription holding one message at most, its handler blocked.
	release := make(chan struct{})
	sub, err := nc.Subscribe("allowed.slow", func(*nats.Msg) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	if err := sub.SetPendingLimits(1, -1); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := nc.Publish("allowed.slow", []byte("secret-payload")); err != nil {
			t.Fatal(err)
		}
	}
	slow := l.line(t, "NATS subscription too slow: messages dropped")
	if slow["subject"] != "allowed.slow" || slow["connection"] != "e2a-test" || slow["dropped"] == nil {
		t.Errorf("slow consumer logged as %v", slow)
	}

	if err := nc.Publish("denied.subject", []byte("secret-payload")); err != nil {
		t.Fatal(err)
	}
	denied := l.line(t, "NATS permissions violation")
	if denied["level"] != "ERROR" || !strings.Contains(fmt.Sprint(denied["err"]), `"denied.subject"`) {
		t.Errorf("permissions violation logged as %v", denied)
	}
	if strings.Contains(l.buf.String(), "secret-payload") {
		t.Errorf("a message's content was logged:\n%s", l.buf.String())
	}
	if s, p := l.ev.Count(streams.ConnSlowConsumer), l.ev.Count(streams.ConnPermissionDenied); s < 1 || p != 1 {
		t.Errorf("counted %d slow consumers and %d permission violations", s, p)
	}
}
