package natstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
)

// CreatePushConsumer asks, as nc's user, for a push consumer named name on
// stream, over the messages of filter, delivering them to deliver: on the
// create subject that names the filter
// ($JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>), the one a user who
// may create consumers of its own keys is allowed. The server then
// publishes those messages to deliver itself, whatever nc's user may
// publish; each delivery has a reply subject ($JS.ACK…), which the
// server's own publishes (a stream's RePublish, an advisory) never have.
func CreatePushConsumer(ctx context.Context, nc *nats.Conn, stream, name, filter, deliver string) error {
	body, err := json.Marshal(map[string]any{"stream_name": stream, "config": map[string]any{
		"name": name, "deliver_subject": deliver, "filter_subject": filter,
		"deliver_policy": "all", "ack_policy": "none",
	}})
	if err != nil {
		return err
	}
	subj := fmt.Sprintf("$JS.API.CONSUMER.CREATE.%s.%s.%s", stream, name, filter)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, subj, body)
	if err != nil {
		return fmt.Errorf("%s: %w (refused: no answer)", subj, err)
	}
	var resp struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return errors.New(resp.Error.Description)
	}
	return nil
}

var forged atomic.Int64

// DeliverByConsumer has the server publish m's data and headers on
// subject as a push consumer's delivery (CreatePushConsumer): m is stored
// in a stream of its own, which a push consumer delivers to subject. It
// returns once the delivery reached a subscription of nc's on subject, so
// that every other subscriber of subject has been sent it too.
func DeliverByConsumer(t testing.TB, nc *nats.Conn, subject string, m *nats.Msg) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	n := strconv.FormatInt(forged.Add(1), 10)
	stream, src := "FORGED_"+n, "forged."+n
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{src}}); err != nil {
		t.Fatal(err)
	}
	got, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = got.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	m.Subject = src
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := CreatePushConsumer(ctx, nc, stream, "forger", src, subject); err != nil {
		t.Fatal(err)
	}
	d, err := got.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatalf("the push consumer's delivery on %s: %v", subject, err)
	}
	if d.Reply == "" {
		t.Fatalf("a push consumer's delivery on %s has no reply subject", subject)
	}
}

// WaitInterest waits until the server of e has at least n subscriptions
// that a message published on subject reaches (a client that subscribes
// asynchronously has registered): a push consumer's delivery, sent once,
// reaches only the subscriptions there when it is sent.
func WaitInterest(t testing.TB, e *streams.Embedded, subject string, n int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, strconv.Itoa(n)+" subscription(s) of "+subject, func() bool {
		sz, err := e.Server().Subsz(&server.SubszOptions{Subscriptions: true, Test: subject})
		return err == nil && sz.Total >= n
	})
}
