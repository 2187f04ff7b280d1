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

// The leader's answer from a sequence on: the first message under a
// subject at or after it, as a direct get of one message reads it; none
// is ErrNoMessages.
func TestLeaderNextBySubject(t *testing.T) {
	_, nc, js := startApplied(t)
	for i, pool := range []string{"demo", "other", "demo"} {
		subj, _ := subjects.Request(pool, "req-1")
		if _, err := js.Publish(ctx(t), subj, []byte{'{', '"', 'n', '"', ':', byte('0' + i), '}'}); err != nil {
			t.Fatal(err)
		}
	}
	any, _ := subjects.RequestAnyPool("req-1")
	demo, _ := subjects.Request("demo", "req-1")
	for _, tc := range []struct {
		subject   string
		from, seq uint64
	}{{any, 0, 1}, {any, 2, 2}, {demo, 2, 3}, {demo, 3, 3}} {
		got, err := streams.LeaderNextBySubject(ctx(t), nc, streams.RequestsStream, tc.subject, tc.from)
		if err != nil || got.Seq != tc.seq || got.Time.IsZero() {
			t.Fatalf("%s from %d: %+v (%v), want seq %d", tc.subject, tc.from, got, err, tc.seq)
		}
		direct, _, err := streams.DirectGetBatch(ctx(t), nc, streams.RequestsStream, tc.subject, tc.from, 1)
		if err != nil || direct[0].Seq != got.Seq || string(direct[0].Data) != string(got.Data) || direct[0].Subject != got.Subject {
			t.Fatalf("direct get %+v (%v), leader %+v", direct, err, got)
		}
	}
	if _, err := streams.LeaderNextBySubject(ctx(t), nc, streams.RequestsStream, demo, 4); !errors.Is(err, streams.ErrNoMessages) {
		t.Fatalf("past the last: %v", err)
	}
	if _, err := streams.LeaderNextBySubject(ctx(t), nc, "NO_SUCH_STREAM", demo, 1); !errors.Is(err, streams.ErrDirectGet) {
		t.Fatalf("unknown stream: %v", err)
	}
	if _, err := streams.LeaderNextBySubject(ctx(t), nc, streams.RequestsStream, "", 1); !errors.Is(err, streams.ErrInvalidOptions) {
		t.Fatalf("empty subject: %v", err)
	}
}
