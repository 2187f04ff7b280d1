package streams

import (
	"github.com/nats-io/nats.go"
)

// MessageSize returns the size a server counts against its max_payload for
// m (nc.MaxPayload() of a connection to it): the encoded headers plus the
// data; the subject does not count. JetStream publish options (message id,
// expected sequences) add headers when published: set them on m before
// measuring. The copy a sourcing stream (E2A_AUDIT) makes gains a
// Nats-Stream-Source header but is not held to max_payload (measured on
// nats-server 2.15: a request of exactly max_payload is copied).
func MessageSize(m *nats.Msg) int64 {
	return int64(m.Size() - len(m.Subject) - len(m.Reply))
}
