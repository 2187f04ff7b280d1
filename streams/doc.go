// Package streams owns the JetStream layout of the E2A pipeline as Go
// values, and the few operations on it that the client library lacks.
//
//   - Config, DefaultConfig and Config.Validate: replicas, storage, max ages and
//     sizes of every stream and key-value bucket.
//   - The stream definitions (E2A_REQUESTS, E2A_RESPONSES, E2A_CONTROL,
//     E2A_AUDIT), the key-value buckets (E2A_TASKS, E2A_RATELIMIT) and the
//     agent pool consumer, as jetstream.StreamConfig,
//     jetstream.KeyValueConfig and jetstream.ConsumerConfig values.
//   - Apply: idempotent create-or-update of all streams and buckets, with a
//     Report of what was created, updated or left unchanged and of the drift
//     found. It touches only what it defines: a stream or bucket it does not
//     know, such as E2A_IDEMPOTENCY (provisioned by earlier versions, never
//     read or written), is left as it is. A create or update the server
//     refuses to the connection's user (a stage's user may only read the
//     streams) ends its sending of them: ErrNotPermitted, with the drift.
//   - StartEmbedded: an in-process JetStream server (single node or a node of
//     an in-process cluster) that always listens on a loopback TCP port.
//   - StartInMemory: such a server with the streams and buckets applied in
//     memory storage, and a connection to it, in one call: what a test or
//     an example of an agent of one's own runs on.
//   - Connect: a connection to an external NATS cluster from ConnConfig.
//   - ConnEvents: a connection's events (lost, restored, a subscription
//     dropping messages, a permissions violation) logged as structured lines
//     and counted, in place of nats.go's bare stderr text.
//   - DirectGetBatch, DirectGetAll, DirectGetSeq and LastBySubject: batched
//     direct gets, which read a stream without creating a consumer; PageSeq,
//     the loop over pages of DirectGetSeq for a caller's own batch reads.
//
// The package knows no E2A protocol: it never looks at a payload. Every
// subject string comes from package subjects.
package streams
