// Package audit holds the logic of the operator commands `e2a replay`,
// `e2a tail` and `e2a publish`: it reads the durable streams without
// consumers (batched direct gets, package streams), checks the frame
// invariants of every request it reads (e2a.SequenceChecker and
// Response.Validate), follows live traffic, and publishes envelopes
// straight onto the request subjects with the headers ingress sets.
//
// Where a request is found:
//
//   - E2A_REQUESTS (its envelope, kept RequestsMaxAge, 24 h by default) and
//     E2A_RESPONSES (its frames, kept ResponsesMaxAge, 24 h by default);
//   - E2A_AUDIT, which sources both into bounded partitions and keeps them
//     AuditMaxAge (90 days by default), append-only (DenyDelete,
//     DenyPurge). A request's envelope and frames share one partition
//     (subjects.AuditPartition), so finding one request there scans one
//     partition, not the whole stream.
//
// A stored response message holds one frame, or a burst of consecutive
// frames (header E2A-Frames, e2a.SplitBurst): each frame of a burst is
// checked as a frame stored alone, and the headers of the message
// (E2A-Sequence, Nats-Msg-Id) against its first frame; a burst whose
// payload does not hold the frames its header counts is a violation.
//
// [Auditor.Request] is the E2A read API's history (egress.History): one
// request by its UUIDv7 id, found as Replay finds it in E2A_AUDIT and the
// archive, with every search kept within windows of the id's time (no scan
// on a miss), returned as its envelope and frames for egress to answer
// GET /v1/requests/{id}[/stream] with once the hot streams dropped it.
//
// Every result is a stream of [Record] values (the commands print them as
// NDJSON): for each request, its envelope, its frames in stream order (one
// record per frame, the frames of a burst sharing the stream sequence of
// their message, [Record.Burst] placing them in it), then a summary with
// the invariant violations found. The package never modifies a stream; a
// read-only NATS user can run replay and tail.
package audit
