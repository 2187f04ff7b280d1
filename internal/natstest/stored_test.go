package natstest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// TestStoredWith: the needle is counted in data and in headers, a
// deleted message is skipped, every stream is read when none is named,
// and a stream with nothing stored fails the test (a zero proves nothing).
func TestStoredWith(t *testing.T) {
	_, nc := RunServer(t)
	js := JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subj, _ := subjects.Request("pool", "r1")
	var seqs []uint64
	for _, m := range []*nats.Msg{
		{Subject: subj, Data: []byte(`{"text":"a needle"}`)},
		{Subject: subj, Data: []byte(`{}`), Header: nats.Header{"X-Secret": []string{"needle"}}},
		{Subject: subj, Data: []byte(`{"text":"a deleted needle"}`)},
		{Subject: subj, Data: []byte(`{"text":"hay"}`)},
	} {
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	st, err := js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, seqs[2]); err != nil {
		t.Fatal(err)
	}
	if n := StoredWith(t, js, "needle", streams.RequestsStream); n != 2 {
		t.Errorf("StoredWith(requests) = %d, want 2", n)
	}
	if n := StoredWith(t, js, "needle"); n != 2 {
		t.Errorf("StoredWith(every stream) = %d, want 2", n)
	}
	var got []string
	if n := EachMessage(t, js, streams.RequestsStream, func(m *jetstream.RawStreamMsg) { got = append(got, string(m.Data)) }); n != 3 {
		t.Errorf("EachMessage read %d, want 3", n)
	}
	if strings.Join(got, " ") != `{"text":"a needle"} {} {"text":"hay"}` {
		t.Errorf("EachMessage gave %q", got)
	}

	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); StoredWith(tb, js, "needle", streams.ResponsesStream) }()
	<-done
	if !strings.Contains(tb.msg, "no stored message read") {
		t.Errorf("StoredWith on an empty stream failed with %q, want no stored message read", tb.msg)
	}
}
