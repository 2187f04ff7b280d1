// Package subjects owns every NATS subject string of the E2A pipeline.
//
// No other package formats or parses a subject: ingress, agent workers and
// egress call the builders and parsers here, so that the escaping rule for
// request ids is applied in exactly one place.
//
// # Subjects
//
//	e2a.req.<agent>.<id>  a request for agent pool <agent>   (stream E2A_REQUESTS)
//	e2a.resp.<id>         the response frames of a request   (stream E2A_RESPONSES)
//	e2a.live.<id>         frames republished by the server   (core NATS only)
//	e2a.ctl.<id>          control messages, e.g. cancel      (stream E2A_CONTROL)
//
// <agent> is a pool name matching [A-Za-z0-9_-]{1,64}; anything else is
// rejected with [ErrInvalidPool]. <id> is the token computed by [EncodeID]
// from the request id.
//
// # Request id tokens
//
// A request id matching [A-Za-z0-9_-]{1,64} is used as is. Any other id
// (empty, containing '.', '*', '>', whitespace, non-ASCII, or longer than 64
// bytes) becomes the marker [IDMarker] ('=') followed by the unpadded
// base64url encoding (RFC 4648 §5) of its bytes. '=' is a legal NATS token
// character and a legal JetStream KV key character, and it is neither in the
// plain alphabet nor in the base64url alphabet, so an encoded token can never
// be mistaken for a plain id and every token is also usable as a KV key.
// The mapping is a bijection: [DecodeID] rejects non-canonical tokens (for
// example "=" followed by the encoding of a plain id).
//
// Ids longer than [MaxIDLength] bytes are rejected with [ErrIDTooLong]: the
// subject travels in the protocol line of a publish, which servers bound
// (4 KiB by default), and exceeding it closes the connection.
//
// The raw id also travels in the [HeaderRequestID] header, but a header value
// cannot represent every string exactly (leading blanks are dropped, line
// breaks are not allowed): the subject token is the authoritative form.
//
// # Request-id grammar
//
// Encoding accepts any id up to [MaxIDLength] bytes; accepting a new request
// is stricter. [ValidateRequestID] admits only ids that every header
// derived from them carries byte for byte: 1 to MaxIDLength bytes of valid
// UTF-8, no leading or trailing white space, no control, format, line or
// paragraph separator character. Refusals wrap [ErrInvalidID]. Every entry
// point applies it before publishing; [FrameMsgID] gives no deduplication
// id to an id outside it.
//
// # JetStream API and audit subjects
//
// The package also formats the JetStream API subjects the pipeline calls
// without a client library helper ([DirectGet], [DirectGetLast]), the
// advisory the worker SDK listens to ([MaxDeliveriesAdvisory]) and the
// bounded audit partitions ([AuditRequest], [AuditResponse], [AuditPartition]).
package subjects
