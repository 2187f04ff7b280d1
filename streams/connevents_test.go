package streams_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
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
	srv := permissionServer(t)
	l := newConnEventLog()
	nc, err := nats.Connect(srv.ClientURL(), append(l.ev.Options(), nats.UserInfo("stage", "pw"), nats.Name("e2a-test"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	overflow(t, nc, "allowed.slow", []byte("secret-payload"))
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

// TestConnEventsCloseAfterOutlivedError: nats.go keeps a slow consumer's
// or a permissions violation's error as the connection's LastError (it
// clears it only at a reconnect), though the connection went on. Closing
// that connection at shutdown is no error: the close is logged at Debug,
// the violation was said when it happened. A connection the client gives
// up (no server left) is still closed at Error, with its reason.
func TestConnEventsCloseAfterOutlivedError(t *testing.T) {
	srv := permissionServer(t)
	l := newConnEventLog()
	nc, err := nats.Connect(srv.ClientURL(), append(l.ev.Options(), nats.UserInfo("stage", "pw"), nats.Name("e2a-test"))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("denied.subject", nil); err != nil {
		t.Fatal(err)
	}
	l.line(t, "NATS permissions violation")
	nc.Close()
	if closed := l.line(t, "NATS connection closed"); closed["level"] != "DEBUG" {
		t.Errorf("a close at shutdown after a permissions violation logged as %v", closed)
	}

	gone := natstest.RunRestartable(t)
	l = newConnEventLog()
	nc, err = nats.Connect(gone.URL(), append(l.ev.Options(), nats.MaxReconnects(1), nats.ReconnectWait(10*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	gone.Stop()
	if closed := l.line(t, "NATS connection closed"); closed["level"] != "ERROR" || closed["err"] != nats.ErrNoServers.Error() {
		t.Errorf("a connection the client gave up logged as %v", closed)
	}
}

// TestConnEventsTokenNotLogged: a server URL holding a token
// (nats://TOKEN@host, nats.go's token authentication) is logged without
// it, as streams.RedactURLs writes it; nats.go's ConnectedUrlRedacted
// hides only a password, and wrote the token into every line naming the
// server.
func TestConnEventsTokenNotLogged(t *testing.T) {
	srv := runServer(t, &server.Options{Authorization: "tok3n-s3cret"})
	l := newConnEventLog()
	port := srv.Addr().(*net.TCPAddr).Port
	nc, err := nats.Connect(fmt.Sprintf("nats://tok3n-s3cret@127.0.0.1:%d", port), l.ev.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	overflow(t, nc, "slow", nil)
	slow := l.line(t, "NATS subscription too slow: messages dropped")
	if want := fmt.Sprintf("nats://xxxxx@127.0.0.1:%d", port); slow["server"] != want {
		t.Errorf("server logged as %v, want %s", slow["server"], want)
	}
	if strings.Contains(l.buf.String(), "tok3n-s3cret") {
		t.Errorf("the token was logged:\n%s", l.buf.String())
	}
}

// permissionServer runs a server whose user stage (password pw) may
// publish only to allowed.>.
func permissionServer(t *testing.T) *server.Server {
	t.Helper()
	return runServer(t, &server.Options{Users: []*server.User{{Username: "stage", Password: "pw", Permissions: &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{"allowed.>"}},
	}}}})
}

// runServer runs a core NATS server (no JetStream) with o on a random
// loopback port, until the test ends.
func runServer(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	o.Host, o.Port, o.NoLog, o.NoSigs = "127.0.0.1", -1, true, true
	srv, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return srv
}

// overflow makes a subscription of nc on subject that holds one message at
// most, its handler blocked until the test ends, and publishes five
// messages of data to it: the client drops some (a slow consumer).
func overflow(t *testing.T, nc *nats.Conn, subject string, data []byte) {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	sub, err := nc.Subscribe(subject, func(*nats.Msg) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(1, -1); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := nc.Publish(subject, data); err != nil {
			t.Fatal(err)
		}
	}
}
