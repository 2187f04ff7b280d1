package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/jsonstr"
)

// frameEncoder writes the JSON of the frames of one request. The part of a
// frame that is the same for every frame of the request (protocol_version,
// request_id, provenance, the echoed ids, channel, user_id, method…) is
// encoded once, with encoding/json, into three fixed pieces; each frame then
// appends its variable fields (response_id, sequence, is_final, status,
// response_kind, timestamp, body) between them. The result is byte for byte
// what json.Marshal of the e2a.Response would produce: same fields, same
// order, same escaping.
//
// When the template cannot be split (it does not encode, or a sentinel is
// not found exactly once), ok is false and frames are encoded with
// json.Marshal of the whole response.
type frameEncoder struct {
	ok bool
	// head ends with `"response_id":`; mid runs from `,"request_id":` up to
	// `,"sequence":` excluded; tail runs from `,"provenance":` up to
	// `"body":` included; end is everything after the body, `}` included.
	head, mid, tail, end []byte
}

// sentinel is a random token of this process, used to find where the
// variable fields sit in the encoded template.
var sentinel = func() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "e2aSentinel" + hex.EncodeToString(b[:])
}()

// The sentinel values of the variable fields, and the pieces of the encoded
// template they make.
var (
	sentinelBytes  = []byte(sentinel)
	sentinelBody   = json.RawMessage(`"` + sentinel + `b"`)
	sentinelRespID = []byte(`"` + sentinel + `r"`)
	// sentinelMiddle is the encoding from after response_id's value to
	// after timestamp's value, less request_id.
	sentinelMiddle = []byte(`,"sequence":0,"is_final":false,"status":"` + sentinel + `s","response_kind":"` +
		sentinel + `k","timestamp":"` + sentinel + `t"`)
	// The sentinel values of the template's string fields, made once (a
	// concatenation per request was 4 allocations).
	sentinelR, sentinelS, sentinelK, sentinelT = sentinel + "r", sentinel + "s", sentinel + "k", sentinel + "t"
	// Where sentinelMiddle's three sentinels start in it.
	sentinelStatus = bytes.Index(sentinelMiddle, sentinelBytes)
	sentinelKind   = sentinelStatus + len(sentinelS) + len(`","response_kind":"`)
	sentinelTime   = sentinelKind + len(sentinelK) + len(`","timestamp":"`)
)

// sentinelSkip is the length of the sentinel's prefix ("e2a") newFrameEncoder
// does not search by.
const sentinelSkip = len("e2a")

func newFrameEncoder(tmpl *e2a.Response) frameEncoder {
	r := *tmpl
	r.ResponseID = sentinelR
	r.Sequence = 0
	r.IsFinal = false
	r.Status = sentinelS
	r.ResponseKind = sentinelK
	r.Timestamp = sentinelT
	r.Body = sentinelBody
	out, err := e2a.MarshalResponse(&r)
	if err != nil {
		return frameEncoder{}
	}
	// The template splits when its five sentinels are the five values set
	// above, in their order: found in one pass (a count and three
	// searches of the whole JSON were half of this function's time, twice
	// per bridged request), by the sentinel's rarer part ("Sentinel…": an
	// upper-case S is rare in JSON, its "e" is not).
	var at [5]int
	n := 0
	for off := 0; ; {
		p := bytes.Index(out[off:], sentinelBytes[sentinelSkip:])
		if p < 0 {
			break
		}
		p += off
		off = p + len(sentinelBytes) - sentinelSkip
		if p < sentinelSkip || !bytes.Equal(out[p-sentinelSkip:p], sentinelBytes[:sentinelSkip]) {
			continue // not the sentinel: its rarer part only
		}
		if n == len(at) {
			return frameEncoder{}
		}
		at[n] = p - sentinelSkip
		n++
	}
	i, j, k := at[0]-1, at[1]-sentinelStatus, at[4]-1
	if n != len(at) || i < 0 || j < 0 || !bytes.HasPrefix(out[i:], sentinelRespID) || !bytes.HasPrefix(out[j:], sentinelMiddle) ||
		at[2] != j+sentinelKind || at[3] != j+sentinelTime || !bytes.HasPrefix(out[k:], sentinelBody) ||
		j < i+len(sentinelRespID) || k < j+len(sentinelMiddle) {
		return frameEncoder{}
	}
	return frameEncoder{
		ok:   true,
		head: out[:i:i],
		mid:  out[i+len(sentinelRespID) : j : j],
		tail: out[j+len(sentinelMiddle) : k : k],
		end:  out[k+len(sentinelBody):],
	}
}

// appendFrame appends the JSON of the response of tmpl with the variable
// fields given; body is compact JSON as json.Marshal writes it.
func (e *frameEncoder) appendFrame(dst []byte, responseID uuid.UUID, seq int64, final bool, status, kind string, timestamp time.Time, body []byte) []byte {
	dst = e.appendHead(dst, responseID, seq, final, status, kind, timestamp)
	dst = append(dst, body...)
	return append(dst, e.end...)
}

// appendHead appends the frame up to its body (appendFrame without body and
// end).
func (e *frameEncoder) appendHead(dst []byte, responseID uuid.UUID, seq int64, final bool, status, kind string, timestamp time.Time) []byte {
	dst = append(dst, e.head...)
	dst = append(dst, '"')
	dst = appendUUID(dst, responseID)
	dst = append(dst, '"')
	dst = append(dst, e.mid...)
	dst = append(dst, `,"sequence":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"is_final":`...)
	dst = strconv.AppendBool(dst, final)
	dst = append(dst, `,"status":`...)
	dst = jsonstr.Append(dst, status)
	dst = append(dst, `,"response_kind":`...)
	dst = jsonstr.Append(dst, kind)
	dst = append(dst, `,"timestamp":"`...)
	dst = e2a.AppendTime(dst, timestamp)
	dst = append(dst, '"')
	return append(dst, e.tail...)
}

// size is the length of a frame without its variable strings and body.
func (e *frameEncoder) size() int {
	return len(e.head) + len(e.mid) + len(e.tail) + len(e.end) + 160
}

// appendChunkBody appends the JSON of a ChunkBody whose delta is a string,
// as json.Marshal writes it.
func appendChunkBody(dst []byte, b *e2a.ChunkBody, delta string) []byte {
	dst = append(dst, `{"delta_kind":`...)
	dst = jsonstr.Append(dst, b.DeltaKind)
	dst = append(dst, `,"delta":`...)
	dst = jsonstr.Append(dst, delta)
	if b.MimeType != "" {
		dst = append(dst, `,"mime_type":`...)
		dst = jsonstr.Append(dst, b.MimeType)
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendUUID appends id in its canonical 36-character form, as id.String().
func appendUUID(dst []byte, id uuid.UUID) []byte {
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[c>>4], hexDigits[c&0xF])
	}
	return dst
}
