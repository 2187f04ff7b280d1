package subjects

import (
	"fmt"
	"strconv"
	"strings"
)

// Headers set by the pipeline on every message it publishes.
const (
	// HeaderMsgID is the JetStream deduplication id: the request id on
	// requests published with ingress.Publisher.Publish (or by a direct
	// publisher). A front door's requests carry none (the publish's
	// expected last subject sequence keeps a client's id to one request),
	// nor do the agent runtime's frames (the expected last subject
	// sequence orders and fences them); a frame written by other means may
	// carry FrameMsgID(requestID, sequence).
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderRequestID carries the raw request id. Every id accepted by
	// ValidateRequestID round-trips exactly; header values cannot carry
	// other strings exactly (leading and trailing blanks are dropped, line
	// breaks are rewritten), so the subject token stays authoritative.
	HeaderRequestID = "E2A-Request-Id"
	// HeaderSequence carries the frame sequence (0, 1, 2, …) on frames: on
	// a burst (HeaderFrames), the sequence of its first frame.
	HeaderSequence = "E2A-Sequence"
	// HeaderFrames is the number of frames a response message holds, when
	// more than one (a burst): decimal, 2 to e2a.MaxBurstFrames. The payload
	// is then the frames in order, each compact JSON (no raw line break),
	// joined by single line feeds; their sequences follow each other from
	// HeaderSequence's. A message without it holds one frame. See
	// e2a.SplitBurst.
	HeaderFrames = "E2A-Frames"
	// HeaderAfterRequest, on a request, names the request it must wait
	// for: the previous turn of the same task or session (ingress sets it
	// when it appends the request to a task record that already has one).
	// The agent runtime runs the request only once that one's final frame
	// is stored. Its value is the raw request id.
	HeaderAfterRequest = "E2A-After-Request"
	// HeaderEarlierRequests, on a request that carries HeaderAfterRequest,
	// lists the turns recorded before that one, newest first, at most
	// MaxEarlierRequests of them: a JSON array of raw request ids. The
	// agent runtime waits for the nearest turn of HeaderAfterRequest and
	// this list that is stored: a turn recorded but never published (its
	// publish failed, and so did its removal from the record) does not let
	// the turns after it run while the turn before it still runs. A request
	// without it waits for HeaderAfterRequest's alone.
	HeaderEarlierRequests = "E2A-Earlier-Requests"
	// HeaderTraceparent is the W3C trace context header, when present.
	HeaderTraceparent = "traceparent"
	// HeaderTracestate is the W3C trace state header, when present.
	HeaderTracestate = "tracestate"
)

// MaxEarlierRequests bounds the list HeaderEarlierRequests carries (the
// agent runtime ignores the ids past it): a longer run of turns never
// published is not waited across.
const MaxEarlierRequests = 8

// Headers set by the server on republished messages, direct get replies
// and sourced messages.
const (
	// HeaderStream names the stream a message was stored in.
	HeaderStream = "Nats-Stream"
	// HeaderSubject is the subject a message was stored under.
	HeaderSubject = "Nats-Subject"
	// HeaderStreamSequence is the stream sequence of a message.
	HeaderStreamSequence = "Nats-Sequence"
	// HeaderLastSequence is, on a republished message, the stream sequence of
	// the previous message on the same subject (0 for the first one); on a
	// batched direct get reply, the sequence of the previous reply.
	HeaderLastSequence = "Nats-Last-Sequence"
	// HeaderTimeStamp is the time a message was stored (RFC 3339, UTC).
	HeaderTimeStamp = "Nats-Time-Stamp"
	// HeaderNumPending is the number of messages left after a batched direct
	// get reply.
	HeaderNumPending = "Nats-Num-Pending"
	// HeaderKVOperation marks a key-value entry that deletes ("DEL") or
	// purges ("PURGE") its key (nats.go's KeyValue writes it).
	HeaderKVOperation = "KV-Operation"
	// HeaderStreamSource describes the origin of a sourced message:
	// "<stream> <seq> <filter> <transform> <original subject>".
	HeaderStreamSource = "Nats-Stream-Source"

	// HeaderArchiveFirst and HeaderArchiveLast are the E2A_AUDIT sequences
	// of the first and the last message an archive batch holds.
	HeaderArchiveFirst = "E2A-Archive-First"
	HeaderArchiveLast  = "E2A-Archive-Last"
	// HeaderArchiveFrom and HeaderArchiveUntil are their store times in
	// E2A_AUDIT (RFC 3339, nanoseconds).
	HeaderArchiveFrom  = "E2A-Archive-From"
	HeaderArchiveUntil = "E2A-Archive-Until"
	// HeaderArchiveCount is how many messages the batch holds.
	HeaderArchiveCount = "E2A-Archive-Count"
	// HeaderArchiveEpoch names the E2A_AUDIT the batch's sequences are of:
	// its creation time (RFC 3339, nanoseconds). A new E2A_AUDIT (deleted
	// and applied again) starts its sequences again, in a new epoch.
	HeaderArchiveEpoch = "E2A-Archive-Epoch"
)

// FrameMsgID returns the deduplication id of frame seq of a request:
// "<request_id>:<seq>", for frames written outside the agent runtime (which
// publishes frames without one); the audit checker verifies it when present.
//
// It returns "" (publish without a deduplication id) when requestID is
// refused by ValidateRequestID: such an id cannot travel in a header value
// exactly (its blanks would be trimmed, its line breaks rewritten), so two
// different ids could share a message id and one request's frame would be
// dropped as a duplicate of the other's. Only a request an integrator
// published directly on e2a.req.<pool>.<token> can have such an id; the
// agent runtime answers it with a single final error frame, fenced by the
// expected last sequence of its subject like every frame.
func FrameMsgID(requestID string, seq int64) string {
	if ValidateRequestID(requestID) != nil {
		return ""
	}
	return requestID + ":" + strconv.FormatInt(seq, 10)
}

// ParseFrameMsgID splits a frame deduplication id made by FrameMsgID.
//
// It returns ErrInvalidMsgID when msgID has no ':' or what follows the last
// ':' is not a decimal integer in the int64 range.
func ParseFrameMsgID(msgID string) (requestID string, seq int64, err error) {
	i := strings.LastIndexByte(msgID, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("%w: %.120q", ErrInvalidMsgID, msgID)
	}
	digits := msgID[i+1:]
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' {
			return "", 0, fmt.Errorf("%w: %.120q", ErrInvalidMsgID, msgID)
		}
	}
	seq, err = strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %.120q", ErrInvalidMsgID, msgID)
	}
	return msgID[:i], seq, nil
}
