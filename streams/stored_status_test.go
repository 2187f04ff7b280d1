package streams_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// publishFrames stores three frames of request id on E2A_RESPONSES, the
// middle one carrying hdr (a publisher's own header), and returns the
// subject and the sequences.
func publishFrames(t *testing.T, js jetstream.JetStream, id string, hdr nats.Header, middleData string) (string, []uint64) {
	t.Helper()
	subj, err := subjects.Response(id)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for i := range 3 {
		m := nats.NewMsg(subj)
		m.Header.Set(subjects.HeaderRequestID, id)
		m.Data = fmt.Appendf(nil, `{"seq":%d}`, i)
		if i == 1 {
			for k, v := range hdr {
				m.Header[k] = v
			}
			m.Data = []byte(middleData)
		}
		ack, err := js.PublishMsg(ctx(t), m)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	return subj, seqs
}

// TestDirectGetBatchStoredStatusHeader: a stored message whose publisher
// set a header named "Status" (an HTTP-minded agent copying its upstream's
// status, say) is a message like any other. nats-server strips only a status
// in the NATS/1.0 line of what it stores, so the header reaches the direct
// get reply, where nats.go puts it under the same key as the reply's own
// status. DirectGetBatch read every reply's "Status" header as a status although a
// stored message always carries Nats-Stream: the batch failed or ended
// early. ReplyStatus tells them apart.
func TestDirectGetBatchStoredStatusHeader(t *testing.T) {
	_, nc, js := startApplied(t)
	for _, st := range []string{"200", "204", "404"} {
		t.Run(st, func(t *testing.T) {
			subj, seqs := publishFrames(t, js, "status-"+st, nats.Header{"Status": {st}}, `{"seq":1}`)
			msgs, more, err := streams.DirectGetBatch(ctx(t), nc, streams.ResponsesStream, subj, 0, 10)
			if err != nil {
				t.Fatalf("DirectGetBatch over a message with header Status: %s: %v", st, err)
			}
			var got []uint64
			for _, m := range msgs {
				got = append(got, m.Seq)
			}
			if len(got) != 3 || more {
				t.Fatalf("DirectGetBatch with header Status: %s in the 2nd message: seqs %v more %v, want %v more false", st, got, more, seqs)
			}
		})
	}
}

// TestLastBySubjectStoredStatusHeader: the same for LastBySubject, the
// existence check of the hot streams (directget.go, LastBySubject: any
// "Status" header is a status).
func TestLastBySubjectStoredStatusHeader(t *testing.T) {
	_, nc, js := startApplied(t)
	subj, err := subjects.Response("last-status")
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(subj)
	m.Header.Set("Status", "404")
	m.Data = []byte(`{"done":true}`)
	ack, err := js.PublishMsg(ctx(t), m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := streams.LastBySubject(ctx(t), nc, streams.ResponsesStream, subj)
	if err != nil || got.Seq != ack.Sequence {
		t.Fatalf("LastBySubject of a stored message with header Status: 404: %+v %v (errors.Is ErrNoMessages: %v), want seq %d",
			got, err, errors.Is(err, streams.ErrNoMessages), ack.Sequence)
	}
}

// TestDirectGetterEmptyMessageWithStatusHeader: DirectGetter.GetBatch
// took an empty-bodied reply with a "Status" header for a status
// (directgetter.go, GetBatch: len(msg.Data) == 0 && Status != ""), but an
// empty stored message with such a header is a message: with "404" the
// batch ended as if nothing matched and the messages after it were never
// delivered, with "204" as the end of the batch.
func TestDirectGetterEmptyMessageWithStatusHeader(t *testing.T) {
	_, nc, js := startApplied(t)
	g, err := streams.NewDirectGetter(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, st := range []string{"404", "204"} {
		t.Run(st, func(t *testing.T) {
			subj, seqs := publishFrames(t, js, "getter-"+st, nats.Header{"Status": {st}}, "")
			var got []uint64
			pending, err := g.GetBatch(ctx(t), streams.ResponsesStream, subj, 0, 10, 0, func(seq uint64, _ nats.Header, _ []byte) error {
				got = append(got, seq)
				return nil
			})
			if err != nil || len(got) != 3 || pending != 0 {
				t.Fatalf("GetBatch with an empty message carrying Status: %s: seqs %v pending %d err %v, want %v", st, got, pending, err, seqs)
			}
		})
	}
}

// TestRedactURLsWithoutScheme: nats.go takes a server URL without a
// scheme (it prepends nats://, nats.go addURLToPool), user information
// included, and Connect connects with it; RedactURLs (connect.go) parses
// it with url.Parse, which read "u:pass@h:4222" as scheme "u" with an
// opaque part (no User) or failed on "token@h:4222", and returned the
// password or token as it was: ConnConfig.String and LogValue printed it.
func TestRedactURLsWithoutScheme(t *testing.T) {
	e, _, _ := startServer(t)
	host, port, err := net.SplitHostPort(strings.TrimPrefix(e.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"u:s3cret@" + net.JoinHostPort(host, port),
		"s3cret@" + net.JoinHostPort(host, port),
	} {
		cfg := streams.ConnConfig{NatsURL: u}
		// The URL is one the client library takes: it connects.
		nc, err := streams.Connect(ctx(t), cfg)
		if err != nil {
			t.Fatalf("Connect(%q): %v", u, err)
		}
		nc.Close()
		if s := cfg.String(); strings.Contains(s, "s3cret") {
			t.Errorf("ConnConfig.String shows the secret of %q: %s", u, s)
		}
		if s := cfg.LogValue().String(); strings.Contains(s, "s3cret") {
			t.Errorf("ConnConfig.LogValue shows the secret of %q: %s", u, s)
		}
	}
}

// TestMalformedURLSecretHidden: a password with a character the user did
// not percent-encode ("50%off") or a URL with a typo in its port cannot be
// parsed. RedactURLs (connect.go) returned the URL as it was, so
// ConnConfig.String and LogValue printed the password, and Connect returned
// nats.go's url.Parse error, which quotes the whole URL, password included,
// and the commands logged it. Validate refuses it now, the URL redacted.
func TestMalformedURLSecretHidden(t *testing.T) {
	for _, u := range []string{"nats://u:50%off@127.0.0.1:4222", "nats://u:s3cret@127.0.0.1:42x2"} {
		secret := "50%off"
		if strings.Contains(u, "s3cret") {
			secret = "s3cret"
		}
		cfg := streams.ConnConfig{NatsURL: u}
		if s := cfg.String(); strings.Contains(s, secret) {
			t.Errorf("ConnConfig.String shows the password of %q: %s", u, s)
		}
		if s := cfg.LogValue().String(); strings.Contains(s, secret) {
			t.Errorf("ConnConfig.LogValue shows the password of %q: %s", u, s)
		}
		nc, err := streams.Connect(ctx(t), cfg)
		if err == nil {
			nc.Close()
			t.Fatalf("connected to %q", u)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Connect(%q) error shows the password: %v", u, err)
		}
	}
}
