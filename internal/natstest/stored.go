package natstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// EachMessage calls fn with every message stored in stream, in sequence
// order, skipping the ones deleted or expired meanwhile, and returns how
// many it read. It fails t when the stream cannot be read.
func EachMessage(t testing.TB, js jetstream.JetStream, stream string, fn func(*jetstream.RawStreamMsg)) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	read := 0
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted or expired
		}
		if err != nil {
			t.Fatalf("stream %s, message %d: %v", stream, seq, err)
		}
		read++
		fn(m)
	}
	return read
}

// StoredWith counts the stored messages whose data or headers hold s, in
// the named streams, or in every stream (KV buckets included) when none is
// named. It fails t when a stream cannot be read or when no message was
// read at all: a count of zero then proves nothing.
func StoredWith(t testing.TB, js jetstream.JetStream, s string, streams ...string) int {
	t.Helper()
	if len(streams) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		names := js.StreamNames(ctx)
		for name := range names.Name() {
			streams = append(streams, name)
		}
		if err := names.Err(); err != nil {
			t.Fatalf("stream names: %v", err)
		}
	}
	n, read := 0, 0
	for _, name := range streams {
		read += EachMessage(t, js, name, func(m *jetstream.RawStreamMsg) {
			if bytes.Contains(m.Data, []byte(s)) || strings.Contains(fmt.Sprint(m.Header), s) {
				n++
			}
		})
	}
	if read == 0 {
		t.Fatalf("no stored message read in %v", streams)
	}
	return n
}

// PublishRequest stores env on pool's request subject as ingress does
// (E2A-Request-Id, and the request id as Nats-Msg-Id), with the extra
// headers given as name, value pairs, failing t when the server refuses
// it.
func PublishRequest(t testing.TB, js jetstream.JetStream, pool string, env *e2a.Envelope, headers ...string) {
	t.Helper()
	subj, err := subjects.Request(pool, env.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subj)
	m.Data = data
	m.Header.Set(subjects.HeaderMsgID, env.RequestID)
	m.Header.Set(subjects.HeaderRequestID, env.RequestID)
	for i := 0; i+1 < len(headers); i += 2 {
		m.Header.Set(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("publish request %q: %v", env.RequestID, err)
	}
}

// Purge empties the named streams, as their max age would once every
// message is older: a test's way to age the hot streams out.
func Purge(t testing.TB, js jetstream.JetStream, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range names {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if err := st.Purge(ctx); err != nil {
			t.Fatalf("purge %s: %v", name, err)
		}
	}
}
