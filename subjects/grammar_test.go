package subjects_test

import (
	"context"
	"errors"
	"net/textproto"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/internal/idgen"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// idSeed seeds the generated ids of the grammar tests; a failure prints it.
const idSeed = 20260513

func TestValidateRequestIDCases(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"req-1", true}, {"a b", true}, {"dup", true}, {"a:0", true}, {"=YWJj", true}, {".", true}, {"*", true},
		{"日本", true}, {"🚀", true}, {"e\u0301", true}, {"a\u00a0b", true}, {"a\u3000b", true}, {"\ue000", true},
		{"\ufffd", false}, {"a\ufffdb", false}, {"\U0010ffff", true}, {strings.Repeat("x", subjects.MaxIDLength), true},
		{"x" + strings.Repeat(" ", subjects.MaxIDLength-2) + "x", true},
		{"", false}, {"\t", false}, {"\n", false}, {"\r\r", false}, {"dup ", false}, {" dup", false},
		{"a\tb", false}, {"a\r\nb", false}, {"a\x00b", false}, {"a\x7fb", false}, {"a\u0085b", false},
		{"\u00a0a", false}, {"a\u3000", false}, {"a\u200bb", false}, {"\ufeffa", false}, {"a\u202eb", false},
		{"a\u2028b", false}, {"a\u2029b", false}, {"a\u00adb", false}, {"\xff", false}, {"a\xed\xa0\x80", false},
		{"a\xe6\x97", false}, {strings.Repeat("x", subjects.MaxIDLength+1), false},
	} {
		err := subjects.ValidateRequestID(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateRequestID(%+q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && !errors.Is(err, subjects.ErrInvalidID) {
			t.Errorf("ValidateRequestID(%+q) = %v, does not wrap ErrInvalidID", tc.id, err)
		}
	}
	err := subjects.ValidateRequestID(strings.Repeat("x", subjects.MaxIDLength+1))
	if !errors.Is(err, subjects.ErrIDTooLong) || !errors.Is(err, subjects.ErrInvalidID) {
		t.Errorf("over-long id: %v, want ErrIDTooLong and ErrInvalidID", err)
	}
}

// TestValidateRequestIDEveryCodePoint checks the grammar on every code point,
// alone and between two letters, against its definition.
func TestValidateRequestIDEveryCodePoint(t *testing.T) {
	anywhere := func(c rune) bool {
		return unicode.In(c, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) || c == '\ufffd'
	}
	for c := rune(0); c <= unicode.MaxRune; c++ {
		if c >= 0xd800 && c <= 0xdfff {
			continue // not encodable: covered as invalid UTF-8
		}
		s := string(c)
		if got, want := subjects.ValidateRequestID("a"+s+"b") == nil, !anywhere(c); got != want {
			t.Fatalf("inner %U: accepted=%v, want %v", c, got, want)
		}
		if got, want := subjects.ValidateRequestID(s) == nil, !anywhere(c) && !unicode.IsSpace(c); got != want {
			t.Fatalf("alone %U: accepted=%v, want %v", c, got, want)
		}
	}
}

// headerRoundTrip returns what a NATS reader gets for a header value v
// written by nats.go: the writer trims ASCII blanks and rewrites CR and LF,
// the reader drops leading blanks.
func headerRoundTrip(t *testing.T, v string) string {
	t.Helper()
	written := strings.NewReplacer("\r", " ", "\n", " ").Replace(textproto.TrimString(v))
	h, err := nats.DecodeHeadersMsg([]byte("NATS/1.0\r\nNats-Msg-Id: " + written + "\r\n\r\n"))
	if err != nil {
		t.Fatalf("decode header %+q: %v", v, err)
	}
	return h.Get(subjects.HeaderMsgID)
}

// checkAccepted asserts what the grammar promises for an accepted id, and
// checkRefused for a refused one.
func checkID(t *testing.T, id string) (accepted bool) {
	t.Helper()
	err := subjects.ValidateRequestID(id)
	if err != nil {
		if !errors.Is(err, subjects.ErrInvalidID) {
			t.Fatalf("ValidateRequestID(%+q) = %v, not ErrInvalidID", id, err)
		}
		if got := subjects.FrameMsgID(id, 3); got != "" {
			t.Fatalf("FrameMsgID of refused %+q = %+q, want none", id, got)
		}
		return false
	}
	if id == "" || len(id) > subjects.MaxIDLength || !utf8.ValidString(id) || strings.TrimSpace(id) != id ||
		strings.ContainsAny(id, "\r\n\x00") {
		t.Fatalf("ValidateRequestID accepted %+q", id)
	}
	if got := headerRoundTrip(t, id); got != id {
		t.Fatalf("header value %+q reads back as %+q", id, got)
	}
	mid := subjects.FrameMsgID(id, 7)
	if got := headerRoundTrip(t, mid); got != mid {
		t.Fatalf("frame message id %+q reads back as %+q", mid, got)
	}
	if rid, seq, err := subjects.ParseFrameMsgID(mid); err != nil || rid != id || seq != 7 {
		t.Fatalf("ParseFrameMsgID(%+q) = %+q, %d, %v", mid, rid, seq, err)
	}
	return true
}

func TestValidateRequestIDGenerated(t *testing.T) {
	ids := append(idgen.EdgeCases(), idgen.Generate(idSeed, 5000)...)
	accepted := 0
	for _, id := range ids {
		if checkID(t, id) {
			accepted++
		}
	}
	t.Logf("seed %d: %d ids, %d accepted, %d refused", idSeed, len(ids), accepted, len(ids)-accepted)
	if accepted < len(ids)/4 || accepted > len(ids)*3/4 {
		t.Errorf("seed %d: %d of %d accepted: the generator no longer mixes accepted and refused ids", idSeed, accepted, len(ids))
	}
}

// TestRequestIDHeadersOnJetStream publishes accepted ids on real JetStream
// as the pipeline does (requests: Nats-Msg-Id and E2A-Request-Id = id;
// frames: Nats-Msg-Id = id:seq), twice each, and reads every header back
// byte for byte: the second publish is a duplicate of the first and of
// nothing else, so distinct ids never deduplicate each other.
func TestRequestIDHeadersOnJetStream(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var ids []string
	seen := map[string]bool{}
	add := func(id string) {
		if subjects.ValidateRequestID(id) == nil && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, id := range append(idgen.EdgeCases(), idgen.Generate(idSeed+1, 600)...) {
		add(id)
	}
	// Inner spaces of every kind, and ids that differ only by them.
	add("spx")
	for _, w := range idgen.WhiteSpace {
		add("sp" + string(w) + "x")
		add("sp" + string(w) + string(w) + "x")
	}

	publish := func(stream, subj, msgID, id string) *jetstream.PubAck {
		t.Helper()
		m := nats.NewMsg(subj)
		m.Data = []byte("{}")
		m.Header.Set(subjects.HeaderMsgID, msgID)
		m.Header.Set(subjects.HeaderRequestID, id)
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatalf("publish %+q on %s: %v", id, stream, err)
		}
		return ack
	}
	reqs, err := js.Stream(ctx, streams.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	resps, err := js.Stream(ctx, streams.ResponsesStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		rs, err := subjects.Request("pool", id)
		if err != nil {
			t.Fatalf("Request(%+q): %v", id, err)
		}
		fs, _ := subjects.Response(id)
		for round := 0; round < 2; round++ {
			if ack := publish(streams.RequestsStream, rs, id, id); ack.Duplicate != (round == 1) {
				t.Fatalf("request %+q round %d: duplicate=%v", id, round, ack.Duplicate)
			}
			for seq := int64(0); seq < 2; seq++ {
				if ack := publish(streams.ResponsesStream, fs, subjects.FrameMsgID(id, seq), id); ack.Duplicate != (round == 1) {
					t.Fatalf("frame %+q:%d round %d: duplicate=%v", id, seq, round, ack.Duplicate)
				}
			}
		}
		got, err := reqs.GetLastMsgForSubject(ctx, rs)
		if err != nil {
			t.Fatalf("get request %+q: %v", id, err)
		}
		if g := got.Header.Get(subjects.HeaderMsgID); g != id {
			t.Fatalf("request %+q: Nats-Msg-Id reads %+q", id, g)
		}
		if g := got.Header.Get(subjects.HeaderRequestID); g != id {
			t.Fatalf("request %+q: E2A-Request-Id reads %+q", id, g)
		}
		if p, err := subjects.Parse(got.Subject); err != nil || p.RequestID != id {
			t.Fatalf("request subject %q parses as %+q, %v", got.Subject, p.RequestID, err)
		}
		last, err := resps.GetLastMsgForSubject(ctx, fs)
		if err != nil {
			t.Fatalf("get frame %+q: %v", id, err)
		}
		if g, want := last.Header.Get(subjects.HeaderMsgID), subjects.FrameMsgID(id, 1); g != want {
			t.Fatalf("frame of %+q: Nats-Msg-Id reads %+q, want %+q", id, g, want)
		}
	}
	info, err := reqs.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Msgs; got != uint64(len(ids)) {
		t.Fatalf("E2A_REQUESTS holds %d messages for %d distinct ids", got, len(ids))
	}
	t.Logf("seed %d: %d accepted ids round-tripped on JetStream", idSeed+1, len(ids))
}
