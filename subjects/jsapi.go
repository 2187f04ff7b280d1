package subjects

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// DirectGet returns $JS.API.DIRECT.GET.<stream>, the subject of direct get
// requests (with a JSON body) on stream.
func DirectGet(stream string) string { return "$JS.API.DIRECT.GET." + stream }

// DirectGetLast returns $JS.API.DIRECT.GET.<stream>.<subject>, the subject
// of a direct get of the last message stored under subject.
func DirectGetLast(stream, subject string) string {
	return "$JS.API.DIRECT.GET." + stream + "." + subject
}

// ConsumerNext returns $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>, the
// subject a pull consumer's clients request messages on (one pull request
// per fetch).
func ConsumerNext(stream, consumer string) string {
	return "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + consumer
}

// MaxDeliveriesAdvisory returns the subject of the advisory the server
// publishes when a message of consumer on stream exhausted MaxDeliver.
func MaxDeliveriesAdvisory(stream, consumer string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + consumer
}

// Audit subjects. Stream E2A_AUDIT sources requests and responses and maps
// them into a bounded set of partitions, so that it holds at most
// 2 × partitions distinct subjects however many requests it keeps.
// The original subject and ids stay in the message headers (see
// HeaderStreamSource, HeaderRequestID).
const (
	// AllAudit matches every audit subject.
	AllAudit = "e2a.audit.>"

	prefixAuditReq  = "e2a.audit.req."
	prefixAuditResp = "e2a.audit.resp."
)

// ArchiveBatches is the one subject of stream E2A_ARCHIVE: each message a
// compressed batch of consecutive E2A_AUDIT messages (package archive),
// described by the headers HeaderArchiveFirst, HeaderArchiveLast,
// HeaderArchiveFrom, HeaderArchiveUntil, HeaderArchiveCount and
// HeaderArchiveEpoch. One
// subject for the whole history: the archive adds no subject per request.
const ArchiveBatches = "e2a.archive.batches"

// AuditRequestMapping returns the source filter and the destination of the
// subject transform that maps e2a.req.<agent>.<token> into
// e2a.audit.req.<p>, p in [0, partitions).
func AuditRequestMapping(partitions int) (src, dest string) {
	return RequestSubjects, prefixAuditReq + "{{partition(" + strconv.Itoa(partitions) + ",2)}}"
}

// AuditResponseMapping returns the source filter and the destination of the
// subject transform that maps e2a.resp.<token> into e2a.audit.resp.<p>,
// p in [0, partitions).
func AuditResponseMapping(partitions int) (src, dest string) {
	return "e2a.resp.*", prefixAuditResp + "{{partition(" + strconv.Itoa(partitions) + ",1)}}"
}

// AuditPartition returns the partition the server's mappings put the
// request and the responses of requestID in: FNV-1a (32 bit) of the id
// token modulo partitions, as the server computes it. A request and its
// responses land in the same partition number.
//
// It returns ErrIDTooLong when requestID is too long.
func AuditPartition(requestID string, partitions int) (int, error) {
	tok, err := EncodeID(requestID)
	if err != nil {
		return 0, err
	}
	if partitions <= 0 {
		return 0, nil
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(tok))
	return int(h.Sum32() % uint32(partitions)), nil
}

// AuditRequest returns e2a.audit.req.<partition>.
func AuditRequest(partition int) string { return prefixAuditReq + strconv.Itoa(partition) }

// AuditResponse returns e2a.audit.resp.<partition>.
func AuditResponse(partition int) string { return prefixAuditResp + strconv.Itoa(partition) }

// KV returns $KV.<bucket>.<key>, the subject a JetStream key-value entry is
// stored under (key must already be a valid KV key: tokens of
// [-/_=.a-zA-Z0-9]).
func KV(bucket, key string) string { return "$KV." + bucket + "." + key }

// KVKey returns the key of a $KV.<bucket>.<key> subject, and false when
// subject is not in bucket.
func KVKey(bucket, subject string) (string, bool) {
	return strings.CutPrefix(subject, "$KV."+bucket+".")
}

// MsgGet returns $JS.API.STREAM.MSG.GET.<stream>, the subject of the
// message get that the stream's leader answers (a direct get may be
// answered by any replica).
func MsgGet(stream string) string { return "$JS.API.STREAM.MSG.GET." + stream }
