package streams

import "github.com/nats-io/nats.go"

// ServerPublished reports whether m, received on a subject the server
// itself publishes to (a stream's RePublish subject, a JetStream
// advisory), was published by the server: it has no reply subject. A
// message with one is a push consumer's delivery: a NATS user who may
// create consumers (of any stream it may read, with any deliver subject)
// can point one at such a subject, and the server delivers it there
// whatever that user's publish permissions, so it must not be taken for
// the server's (a forged live frame would start a waiting turn or end a
// replay; a forged max deliveries advisory would end another principal's
// running request). The agent's live-final wait and advisory subscriber
// and egress's live frames all check it.
func ServerPublished(m *nats.Msg) bool { return m.Reply == "" }
