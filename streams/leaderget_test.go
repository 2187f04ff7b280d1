package streams_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// The leader's answer: the last message under a subject (a wildcard pool
// included) with its subject and headers; none is ErrNoMessages.
func TestLeaderLastBySubject(t *testing.T) {
	_, nc, js := startApplied(t)
	for i, pool := range []string{"demo", "other", "demo"} {
		subj, _ := subjects.Request(pool, "req-1")
		m := nats.NewMsg(subj)
		m.Header.Set(subjects.HeaderRequestID, "req-1")
		m.Data = []byte{'{', '"', 'n', '"', ':', byte('0' + i), '}'}
		if _, err := js.PublishMsg(ctx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	any, _ := subjects.RequestAnyPool("req-1")
	got, err := streams.LeaderLastBySubject(ctx(t), nc, streams.RequestsStream, any)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := subjects.Request("demo", "req-1")
	if got.Subject != want || got.Seq != 3 || string(got.Data) != `{"n":2}` || got.Header.Get(subjects.HeaderRequestID) != "req-1" || got.Time.IsZero() {
		t.Fatalf("%+v", got)
	}
	// It agrees with a direct get of the same subject.
	direct, err := streams.LastBySubject(ctx(t), nc, streams.RequestsStream, any)
	if err != nil || direct.Seq != got.Seq || !direct.Time.Equal(got.Time) || string(direct.Data) != string(got.Data) || direct.Subject != got.Subject {
		t.Fatalf("direct get %+v (%v), leader %+v", direct, err, got)
	}

	none, _ := subjects.RequestAnyPool("req-2")
	if _, err := streams.LeaderLastBySubject(ctx(t), nc, streams.RequestsStream, none); !errors.Is(err, streams.ErrNoMessages) {
		t.Fatalf("unknown subject: %v", err)
	}
	if _, err := streams.LeaderLastBySubject(ctx(t), nc, "NO_SUCH_STREAM", none); !errors.Is(err, streams.ErrDirectGet) {
		t.Fatalf("unknown stream: %v", err)
	}
	for _, tc := range [][2]string{{"", none}, {"A.B", none}, {streams.RequestsStream, ""}} {
		if _, err := streams.LeaderLastBySubject(ctx(t), nc, tc[0], tc[1]); !errors.Is(err, streams.ErrInvalidOptions) {
			t.Errorf("%q: %v", tc, err)
		}
	}
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := streams.LeaderLastBySubject(c, nc, streams.RequestsStream, any); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
