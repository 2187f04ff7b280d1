package streams

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestPublishAgainstServer: Publish stores and answers as
// jetstream.PublishMsg does: sequences, a duplicate Nats-Msg-Id, a wrong
// expected last subject sequence (the APIError agents fence on), and no
// stream on the subject.
func TestPublishAgainstServer(t *testing.T) {
	e, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := e.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PUBTEST", Subjects: []string{"pub.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		m := nats.NewMsg("pub.a")
		m.Data = []byte("x")
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(i-1, 10))
		a, err := Publish(ctx, nc, m)
		if err != nil || a.Seq != i || a.Duplicate {
			t.Fatalf("publish %d: %+v %v", i, a, err)
		}
	}
	m := nats.NewMsg("pub.a")
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "1")
	_, err = Publish(ctx, nc, m)
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
		a, err := Publish(ctx, nc, m)
		if err != nil || a.Duplicate != want || a.Seq != 4 {
			t.Fatalf("msg id publish %d: %+v %v", i, a, err)
		}
	}
	if _, err := Publish(ctx, nc, nats.NewMsg("nostream")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("no stream: %v", err)
	}
}

// TestReadPubAck: the scanned forms and everything else read as
// encoding/json reads them.
func TestReadPubAck(t *testing.T) {
	for in, want := range map[string]PubAck{
		`{"stream":"S","seq":1}`:                                    {Seq: 1},
		`{"stream":"E2A_RESPONSES","seq":18446744073709551615}`:     {Seq: 1<<64 - 1},
		`{"stream":"S","seq":7,"duplicate":true}`:                   {Seq: 7, Duplicate: true},
		`{"stream":"S","seq":7,"domain":"hub","duplicate":true}`:    {Seq: 7, Duplicate: true},
		`{"stream":"S","seq":7,"domain":"hub"}`:                     {Seq: 7},
		`{"seq":9,"stream":"S"}`:                                    {Seq: 9}, // another order: encoding/json
		`{"stream":"S","seq":9,"val":"3"}`:                          {Seq: 9},
		`{"stream":"S\u0041","seq":2}`:                              {Seq: 2},
		` {"stream":"S","seq":3} `:                                  {Seq: 3},
		`{"stream":"S","seq":3,"duplicate":false}`:                  {Seq: 3},
		`{"stream":"S","seq":5,"domain":"d\"x","duplicate":true}`:   {Seq: 5, Duplicate: true},
		`{"stream":"S","seq":18446744073709551616}`:                 {}, // overflow: invalid
		`{"stream":"","seq":1}`:                                     {},
		`{"error":{"code":400,"err_code":10071,"description":"x"}}`: {},
		`not json`: {},
	} {
		got, err := readPubAck([]byte(in))
		if want == (PubAck{}) {
			if err == nil {
				t.Errorf("%s: %+v, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", in, got, err, want)
		}
	}
	_, err := readPubAck([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 1"}}`))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10071 || apiErr.Description != "wrong last sequence: 1" {
		t.Fatalf("error reply: %v", err)
	}
}

// FuzzScanPubAck: whatever scanPubAck accepts, encoding/json reads the
// same acknowledgement from.
func FuzzScanPubAck(f *testing.F) {
	for _, s := range []string{`{"stream":"S","seq":1}`, `{"stream":"S","seq":7,"domain":"hub","duplicate":true}`,
		`{"stream":"S","seq":01}`, `{"stream":"S","seq":18446744073709551615}`, `{"stream":"S\"","seq":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := scanPubAck(b)
		if !ok {
			return
		}
		var r struct {
			Error     *jetstream.APIError `json:"error"`
			Stream    string              `json:"stream"`
			Seq       uint64              `json:"seq"`
			Duplicate bool                `json:"duplicate"`
		}
		if err := json.Unmarshal(b, &r); err != nil || r.Error != nil || r.Stream == "" || r.Seq != a.Seq || r.Duplicate != a.Duplicate {
			t.Fatalf("%q scanned as %+v; encoding/json: %+v %v", b, a, r, err)
		}
	})
}
