package streams_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
)

// TestPublishAgainstServer: Publish stores and answers as
// jetstream.PublishMsg does: sequences, a duplicate Nats-Msg-Id, a wrong
// expected last subject sequence (the APIError agents fence on), and no
// stream on the subject.
func TestPublishAgainstServer(t *testing.T) {
	_, nc, js := startServer(t)
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PUBTEST", Subjects: []string{"pub.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		m := nats.NewMsg("pub.a")
		m.Data = []byte("x")
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(i-1, 10))
		a, err := streams.Publish(ctx, nc, m)
		if err != nil || a.Seq != i || a.Duplicate {
			t.Fatalf("publish %d: %+v %v", i, a, err)
		}
	}
	m := nats.NewMsg("pub.a")
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "1")
	_, err := streams.Publish(ctx, nc, m)
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("wrong last sequence: %v", err)
	}
	// The same error as the library's.
	_, libErr := js.PublishMsg(ctx, m, jetstream.WithRetryAttempts(0))
	if libErr == nil || err.Error() != libErr.Error() {
		t.Fatalf("error %q, jetstream.PublishMsg %q", err, libErr)
	}
	for i, want := range []bool{false, true} {
		m := nats.NewMsg("pub.b")
		m.Header.Set(jetstream.MsgIDHeader, "once")
		a, err := streams.Publish(ctx, nc, m)
		if err != nil || a.Duplicate != want || a.Seq != 4 {
			t.Fatalf("msg id publish %d: %+v %v", i, a, err)
		}
	}
	if _, err := streams.Publish(ctx, nc, nats.NewMsg("nostream")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("no stream: %v", err)
	}
	// PublishWithin: the same acknowledgements and errors, bounded by a
	// timeout.
	m = nats.NewMsg("pub.a")
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "3")
	if a, err := streams.PublishWithin(nc, m, 5*time.Second); err != nil || a.Seq != 5 {
		t.Fatalf("PublishWithin: %+v %v", a, err)
	}
	if _, err := streams.PublishWithin(nc, m, 5*time.Second); !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("PublishWithin, wrong last sequence: %v", err)
	}
	if _, err := streams.PublishWithin(nc, nats.NewMsg("nostream"), 5*time.Second); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("PublishWithin, no stream: %v", err)
	}
	// A subject someone answers too late: the timeout.
	sub, err := nc.Subscribe("slow.reply", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if _, err := streams.PublishWithin(nc, nats.NewMsg("slow.reply"), 50*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("PublishWithin, no answer: %v", err)
	}
}
