package normalizer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// FuzzIdempotencyKey feeds any Idempotency-Key header value (the
// normalizer's Input.RequestID: the front doors pass the header as it
// came) with each protocol's conformance request. Properties: no panic; a
// key subjects.ValidateRequestID takes is never refused, and is the
// request id unless the body names its own; a key it refuses is an
// invalid request of a *normalizer.Error whose message is bounded and
// escapes the key; an accepted request's id is always one
// ValidateRequestID takes.
func FuzzIdempotencyKey(f *testing.F) {
	n := testNormalizer(f)
	for i := range confCases {
		for _, k := range []string{"", "k-1", "a b", "x.y", "*", ">", "\x00", "é", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"} {
			f.Add(uint8(i), k)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, key string) {
		c := confCases[int(which)%len(confCases)]
		adapter, _ := n.Adapter(c.protocol)
		body := c.body(`1`, `"x"`, `{"a":1}`, false)
		in := func(key string) normalizer.Input {
			return normalizer.Input{Body: body, Header: confHeaders(), Now: func() time.Time { return fixedNow }, NewID: counter(), RequestID: key}
		}
		base, err := adapter(in(""))
		if err != nil {
			t.Fatalf("%s: the conformance request is refused: %v", c.protocol, err)
		}
		res, err := adapter(in(key))
		valid := subjects.ValidateRequestID(key) == nil
		if err != nil {
			var ne *normalizer.Error
			if !errors.As(err, &ne) || ne.Kind != normalizer.ErrInvalidRequest && ne.Kind != normalizer.ErrInvalidParams {
				t.Fatalf("%s, key %q: error %#v", c.protocol, key, err)
			}
			if valid {
				t.Fatalf("%s: valid key %q refused: %v", c.protocol, key, err)
			}
			checkBoundedMessage(t, err.Error())
			return
		}
		id := res.Envelope.RequestID
		if subjects.ValidateRequestID(id) != nil {
			t.Fatalf("%s, key %q: request id %q is not valid", c.protocol, key, id)
		}
		if key != "" && id != key && id != base.Envelope.RequestID {
			t.Fatalf("%s, key %q: request id %q (without a key %q)", c.protocol, key, id, base.Envelope.RequestID)
		}
		if key != "" && valid && base.Envelope.RequestID == "id-0001" && id != key {
			t.Fatalf("%s, key %q: request id %q, not the key", c.protocol, key, id)
		}
	})
}
