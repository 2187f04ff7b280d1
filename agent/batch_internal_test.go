package agent

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// The reflection-free decode of batch replies reads what encoding/json
// reads, for the reply shapes nats-server sends.
func TestBatchReplyDecode(t *testing.T) {
	for _, data := range []string{
		`{"type":"ack","seq":0,"msgs":32}`,
		`{"type":"ack","seq":3,"msgs":4}`,
		`{"type":"gap","last_seq":2,"seq":4}`,
		`{"type":"err","seq":2,"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 7"}}`,
		`{"stream":"E2A_RESPONSES","seq":1234,"batch":"abc","count":7}`,
		`{"stream":"E2A_RESPONSES","domain":"hub","seq":9,"batch":"x","count":1}`,
		`{"error":{"code":400,"err_code":10205,"description":"batch publish is disabled"},"stream":"E2A_RESPONSES","seq":0}`,
		`{"type":"ack","seq":"3"}`,
		`not json`,
	} {
		var got, want batchReply
		gerr, werr := got.decode([]byte(data)), json.Unmarshal([]byte(data), &want)
		if (gerr == nil) != (werr == nil) {
			t.Errorf("%s: decode error %v, encoding/json %v", data, gerr, werr)
			continue
		}
		if gerr != nil {
			continue
		}
		if got.Type != want.Type || got.Seq != want.Seq || got.Stream != want.Stream || got.Count != want.Count ||
			(got.Error == nil) != (want.Error == nil) || (got.Error != nil && *got.Error != *want.Error) {
			t.Errorf("%s: decode %+v, encoding/json %+v", data, got, want)
		}
	}
	var rep batchReply
	if err := rep.decode([]byte(`{"type":"err","seq":2,"error":{"code":400,"err_code":10071,"description":"x"}}`)); err != nil ||
		rep.Error == nil || rep.Error.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Errorf("error reply: %+v %v", rep, err)
	}
}

// FuzzBatchReplyDecode: whatever the bytes, decode never panics, and what
// it reads without error encoding/json reads the same.
func FuzzBatchReplyDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"ack","seq":0,"msgs":32}`,
		`{"type":"err","seq":2,"error":{"code":400,"err_code":10071,"description":"d"}}`,
		`{"stream":"E2A_RESPONSES","seq":1234,"batch":"abc","count":7}`,
		`{"stream":"E\u0032","seq":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want batchReply
		if got.decode(data) != nil || json.Unmarshal(data, &want) != nil {
			return
		}
		if got.Type != want.Type || got.Seq != want.Seq || got.Stream != want.Stream || got.Count != want.Count {
			t.Fatalf("%q: decode %+v, encoding/json %+v", data, got, want)
		}
	})
}
