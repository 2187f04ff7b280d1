package streams

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

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
