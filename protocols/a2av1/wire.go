package a2av1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/errordetails"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// Where the SDK's transports and A2A v1.0 (§5.4, §9, §11) part, the
// bindings answer as the specification says: a request body that is not
// JSON by its Content-Type is ContentTypeNotSupportedError on both HTTP
// bindings, and the HTTP+JSON binding's error statuses are §5.4's
// (TaskNotCancelableError 409, ContentTypeNotSupportedError 415,
// InvalidAgentResponseError 502, where the SDK writes 400, 400 and 500),
// a path or method none of its routes take is answered in its error
// shape (404 NOT_FOUND, 405 with Allow), where the SDK's router writes text,
// and a DELETE's success has the body {} (google.protobuf.Empty), where
// the SDK writes none.

// ReplayExtension is the URI of the pipeline's A2A extension that replays
// a finished task: SubscribeToTask on a task in a terminal state answers
// UnsupportedOperationError (A2A v1.0 §3.1.6) unless the call activates
// this extension (the A2A-Extensions service parameter: HTTP header or gRPC
// metadata), when it answers the task rebuilt from the durable streams and
// ends. The card declares it (capabilities.extensions).
const ReplayExtension = "https://e2a-pipeline.dev/extensions/task-replay/v1"

// ReplayRequested reports whether header (HTTP headers, or gRPC metadata
// read as headers) activates ReplayExtension: A2A-Extensions lists
// URIs, comma-separated, in one or more values.
func ReplayRequested(header http.Header) bool {
	for _, v := range header.Values(a2a.SvcParamExtensions) {
		for u := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(u) == ReplayExtension {
				return true
			}
		}
	}
	return false
}

// jsonBody reports whether a request's Content-Type names JSON: absent,
// application/json, application/a2a+json or any other +json type, or
// application/x-www-form-urlencoded (what curl -d sends when told
// nothing; the README's examples rely on it). Anything else (text/plain,
// multipart/form-data…) is ContentTypeNotSupportedError.
func jsonBody(contentType string) bool {
	if strings.TrimSpace(contentType) == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) ||
		mt == "application/x-www-form-urlencoded"
}

// refuseContentType answers a request whose body is not JSON by its
// Content-Type with ContentTypeNotSupportedError: HTTP 415 and the
// binding's error body (a JSON-RPC error -32005 answering the call's id
// when the body, within limit, is one call with a valid one, else null;
// the HTTP+JSON binding's google.rpc.Status).
func refuseContentType(w http.ResponseWriter, r *http.Request, rest bool, limit int64) {
	msg := "Content-Type " + jsonrpc.QuoteForMessage(r.Header.Get("Content-Type")) +
		" is not supported: send the request as application/json"
	var id json.RawMessage
	if !rest {
		id = peekRPCID(r, limit) // before the answer: HTTP/1.x may read no body after
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnsupportedMediaType)
	info := []*errordetails.Typed{errordetails.NewErrorInfo(a2a.ErrorReason(a2a.ErrUnsupportedContentType), a2a.ProtocolDomain,
		map[string]string{"timestamp": now().UTC().Format(time.RFC3339)})}
	if rest {
		var out restStatus
		out.Error.Code, out.Error.Status, out.Error.Message, out.Error.Details = http.StatusUnsupportedMediaType, "INVALID_ARGUMENT", msg, info
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	_, _ = w.Write(append(rpcErrorJSON(id, &jsonrpc.Error{Code: -32005, Message: msg, Data: info}), '\n'))
}

// specHTTPStatus is the HTTP status of an A2A error by its ErrorInfo
// reason where §5.4 and the SDK's HTTP+JSON transport differ.
var specHTTPStatus = map[string]int{
	a2a.ErrorReason(a2a.ErrTaskNotCancelable):      http.StatusConflict,
	a2a.ErrorReason(a2a.ErrUnsupportedContentType): http.StatusUnsupportedMediaType,
	a2a.ErrorReason(a2a.ErrInvalidAgentResponse):   http.StatusBadGateway,
}

// specREST serves next (the SDK's HTTP+JSON handler) with its error
// answers given §5.4's HTTP status (specHTTPStatus): the status line and
// the body's code. Everything else passes through as written.
func specREST(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &specStatusWriter{ResponseWriter: w, r: r}
		next.ServeHTTP(sw, r)
		sw.finish()
	})
}

var _ interface {
	http.ResponseWriter
	http.Flusher
} = (*specStatusWriter)(nil)

// specStatusWriter holds back a JSON error answer (status >= 400,
// Content-Type application/json) until the handler returns, to rewrite
// its status by the reason its body names, and the router's text 404 and
// 405, to write them in the binding's shape.
type specStatusWriter struct {
	http.ResponseWriter
	r     *http.Request
	wrote bool
	held  int // the status held back, 0 for none
	body  bytes.Buffer
}

func (s *specStatusWriter) WriteHeader(code int) {
	if s.wrote {
		return
	}
	s.wrote = true
	if code >= http.StatusBadRequest && strings.HasPrefix(s.Header().Get("Content-Type"), "application/json") ||
		code == http.StatusMethodNotAllowed || code == http.StatusNotFound {
		// A 405, or a 404 not in JSON, is the SDK's router's, in text:
		// finish writes it in the binding's shape.
		s.held = code
		return
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *specStatusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	if s.held != 0 {
		return s.body.Write(b)
	}
	return s.ResponseWriter.Write(b)
}

// Flush flushes a stream; a held error answer is written by finish.
func (s *specStatusWriter) Flush() {
	if s.held != 0 {
		return
	}
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// FlushError is Flush with the flush's error (http.ResponseController
// takes Flush alone for one that cannot fail).
func (s *specStatusWriter) FlushError() error {
	if s.held != 0 {
		return nil
	}
	return http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *specStatusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// noRouteMessage is the message of the binding's 404 for a path none of
// its routes takes.
const noRouteMessage = "no route of the A2A v1.0 HTTP+JSON binding here"

// NoRoute answers a path that none of the HTTP+JSON binding's routes
// takes as the binding does: 404 NOT_FOUND in its error shape
// (google.rpc.Status).
func NoRoute(w http.ResponseWriter) {
	restRefuse(w, host.Refusal{Status: http.StatusNotFound, Message: noRouteMessage})
}

// finish writes a held error answer with §5.4's status for its reason,
// and the body of a DELETE the handler answered without one.
func (s *specStatusWriter) finish() {
	if !s.wrote && s.r != nil && s.r.Method == http.MethodDelete {
		// DeleteTaskPushNotificationConfig's success: the SDK writes no
		// body (200, Content-Type application/json, nothing), where the
		// method returns google.protobuf.Empty, whose JSON is {} (a2a.proto's
		// HTTP annotation: the response body is the returned message), as
		// the JSON-RPC binding answers it (emptyResultWriter). a2a-python's
		// HTTP+JSON client decodes the body of every answer: it raised a
		// JSON decode error for a delete that had succeeded.
		s.Header().Set("Content-Type", "application/json")
		s.ResponseWriter.WriteHeader(http.StatusOK)
		_, _ = s.ResponseWriter.Write([]byte("{}\n"))
		return
	}
	if s.held == 0 {
		return
	}
	code, body := s.held, s.body.Bytes()
	if (code == http.StatusMethodNotAllowed || code == http.StatusNotFound) && !json.Valid(body) {
		// The router's text "Method Not Allowed" or "404 page not found"
		// (a path that is none of the binding's routes): the binding
		// answers every error as google.rpc.Status, Allow kept.
		msg := noRouteMessage
		if code == http.StatusMethodNotAllowed {
			msg = "method not allowed here; use " + s.Header().Get("Allow")
		}
		restRefuse(s.ResponseWriter, host.Refusal{Status: code, Message: msg})
		return
	}
	var st restStatus
	if json.Unmarshal(body, &st) == nil {
		rewrite := false
		if e := s.bodyError(st); e != nil {
			st, rewrite = restError(e), true
		}
		if c, name := specAnswer(st); rewrite || c != code || name != st.Error.Status {
			code, st.Error.Code, st.Error.Status = c, c, name
			if b, err := json.Marshal(st); err == nil {
				body = append(b, '\n')
			}
		}
		if ra := retryAfter(st.Error.Details); ra != "" {
			s.Header().Set("Retry-After", ra)
		}
	}
	s.ResponseWriter.WriteHeader(code)
	_, _ = s.ResponseWriter.Write(body)
}

// bodyError is the answer to an HTTP+JSON POST whose body the SDK could
// not decode, which it answered PARSE_ERROR with no detail: the body is
// valid JSON (checkRESTBody), of the wrong shape, which is InvalidParams
// (A2A v1.0 §3.3.2: a validation error, HTTP 400; -32700 is invalid JSON)
// in JSON's words (decodeError), on message:send and message:stream alike.
// nil for any other answer (an empty body stays a parse error).
func (s *specStatusWriter) bodyError(st restStatus) error {
	if s.r == nil || st.reason() != a2a.ErrorReason(a2a.ErrParseError) {
		return nil
	}
	c, ok := callFrom(s.r.Context())
	if !ok || len(bytes.TrimSpace(c.body)) == 0 {
		return nil
	}
	if err := decodeAgain(c.body, bodyTarget(s.r.URL.Path)); err != nil {
		return decodeError("the body", err)
	}
	return nil
}

// reason is the reason of st's A2A ErrorInfo, "" for none.
func (st restStatus) reason() string {
	for _, d := range st.Error.Details {
		if d != nil && d.TypeURL == errordetails.ErrorInfoType && d.Value["domain"] == a2a.ProtocolDomain {
			r, _ := d.Value["reason"].(string)
			return r
		}
	}
	return ""
}

// specAnswer is the HTTP status and google.rpc status name of st, an error
// answer of the SDK's HTTP+JSON transport, by the reason of its A2A
// ErrorInfo: §5.4's status (restCode), and a ServerError that carries a
// google.rpc.RetryInfo is a temporary failure (errUnavailable; the SDK
// answers every ServerError 500 INTERNAL): 503 UNAVAILABLE. An answer
// without an A2A ErrorInfo keeps its own.
func specAnswer(st restStatus) (code int, name string) {
	code, name = st.Error.Code, st.Error.Status
	reason := st.reason()
	if reason == a2a.ErrorReason(a2a.ErrServerError) && retryAfter(st.Error.Details) != "" {
		c, n, _ := restCode(errTemporary)
		return c, n
	}
	if c, ok := specHTTPStatus[reason]; ok {
		code = c
	}
	return code, name
}

// protoJSON is req, a request of method in ProtoJSON (a JSON-RPC call's
// params, an HTTP+JSON body: one path for both bindings), as the SDK's
// transports read it. The proto field names a ProtoJSON parser accepts
// beside the JSON names (history_length for historyLength, message_id,
// task_id…: A2A's JSON is ProtoJSON, and the TCK's JSON-RPC client sends
// them) are written as JSON names, which is all the SDK's transports
// read, but for the members of the free-form fields (metadata, a data
// part's data: google.protobuf.Struct and Value in a2a.proto); and
// method's integers and enums in the SDK's forms (protoFields: an integer
// sent as a string or with an exponent, an enum by number). A member sent
// by both its names (message_id and messageId in one object) is
// InvalidParams naming it, as ProtoJSON refuses it ("duplicate field");
// the SDK read one and dropped the other; so is a member sent twice by
// one name (duplicateMember: ProtoJSON's "duplicate field", in metadata
// and data its "duplicate map key"; encoding/json kept the last) or by
// two that differ in case alone (one field to encoding/json), and
// what ProtoJSON refuses of the integers and enums. A request none of
// whose member names holds an underscore or an escape (memberNames:
// every v1.0 message's "ROLE_USER" is a value) is decoded only if its
// integers or enums need it (protoJSONNumbers); one with such a name is
// decoded once for both (jsonNames); one that is not JSON is returned as
// it is.
func protoJSON(method string, req json.RawMessage) (json.RawMessage, error) {
	underscore, escaped, unsure := memberNames(req)
	if unsure {
		if err := duplicateMember(req); err != nil {
			return nil, err
		}
	}
	fields := protoFields[method]
	if !underscore && !escaped {
		return numbersAsSDK(fields, req, false)
	}
	out, changed, err := jsonNames(req, "", 0, fields)
	if err != nil {
		return nil, err
	}
	if !changed {
		return req, nil
	}
	return out, nil
}

// Bounds of memberNames' tracking of the names of the objects open at a
// point of its scan, to tell a name sent twice in one object without a
// map: the names held at once (nameScanNames) and the nesting followed
// (nameScanDepth). Beyond either the text is reported unsure.
const (
	nameScanNames = 128
	nameScanDepth = 32
)

// memberNames reports whether a member name of the JSON text b (a string
// followed by a colon, at any depth) holds an underscore, and whether one
// holds an escape (a name the decoder reads otherwise than its bytes:
// message\u005fid), and whether b may send a member twice in one object
// (unsure: a name seen twice there, or one like another there but for
// case or underscores outside metadata and data (foldSimilar), a name
// with an escape anywhere, more names or nesting than it holds), which
// duplicateMember then reads. A scan of the bytes, no decoding, no
// allocation: the strings that are values (an enum's "ROLE_USER", a text)
// are skipped, and the names inside the values of the free-form members
// jsonNames leaves as they are (metadata, data: their names are the
// sender's) count for unsure alone.
// A text that is not JSON may report all three (the decoder then judges
// it).
func memberNames(b []byte) (underscore, escaped, unsure bool) {
	var s nameScan
	s.free = -1
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			s.enter(b[i] == '[')
			continue
		case '}', ']':
			s.leave()
			continue
		case '"':
		default:
			continue
		}
		end := stringEnd(b, i)
		if end >= len(b) {
			return true, true, true
		}
		k := end + 1
		for k < len(b) && isJSONSpace(b[k]) {
			k++
		}
		if k < len(b) && b[k] == ':' {
			s.name(b[i+1 : end])
		}
		i = end
	}
	return s.underscore, s.escaped, s.unsure
}

// nameScan is memberNames' state: its findings and the names of the
// objects open at a point of its scan.
type nameScan struct {
	underscore, escaped, unsure bool
	names                       [nameScanNames][]byte // the names of the open objects, in order
	open                        [nameScanDepth]int    // where each open container's names start in names; -1 for an array
	depth, held                 int                   // the containers open; the names held
	free                        int                   // the depth of the member metadata or data whose value the scan is in, -1 for none
}

// enter opens an object, or an array when array.
func (s *nameScan) enter(array bool) {
	if s.depth < nameScanDepth {
		s.open[s.depth] = s.held
		if array {
			s.open[s.depth] = -1
		}
	} else {
		s.unsure = true
	}
	s.depth++
}

// leave closes the innermost container, dropping its names.
func (s *nameScan) leave() {
	if s.depth > 0 {
		s.depth--
		if s.depth < nameScanDepth && s.open[s.depth] >= 0 {
			s.held = s.open[s.depth]
		}
	}
	if s.depth < s.free {
		s.free = -1
	}
}

// name takes a member name as sent (its bytes between the quotes).
func (s *nameScan) name(name []byte) {
	esc := bytes.IndexByte(name, '\\') >= 0
	if s.free < 0 || s.depth <= s.free {
		s.underscore, s.escaped = s.underscore || bytes.IndexByte(name, '_') >= 0, s.escaped || esc
		s.free = -1
		if !esc && (string(name) == "metadata" || string(name) == "data") {
			s.free = s.depth
		}
	}
	s.unsure = s.unsure || esc
	if s.unsure || s.depth == 0 || s.depth > nameScanDepth || s.open[s.depth-1] < 0 {
		return
	}
	free := s.free >= 0 && s.depth > s.free // a key of metadata or data: a map's, case-sensitive
	for _, n := range s.names[s.open[s.depth-1]:s.held] {
		if bytes.Equal(n, name) || !free && foldSimilar(n, name) {
			s.unsure = true
		}
	}
	if s.held == len(s.names) {
		s.unsure = true
		return
	}
	s.names[s.held] = name
	s.held++
}

// foldSimilar reports whether encoding/json may read the member names a
// and b (as sent, no escape) as one field's once jsonNames has rewritten
// them: equal but for ASCII case and underscores. A name with a byte
// beyond ASCII where the two differ is taken as similar: Unicode's case
// folding (the Kelvin sign's K for k) is left to duplicateMember's
// decoding. No allocation.
func foldSimilar(a, b []byte) bool {
	i, j := 0, 0
	for {
		for i < len(a) && a[i] == '_' {
			i++
		}
		for j < len(b) && b[j] == '_' {
			j++
		}
		if i == len(a) || j == len(b) {
			return i == len(a) && j == len(b)
		}
		x, y := a[i], b[j]
		switch {
		case x == y:
		case x >= utf8.RuneSelf || y >= utf8.RuneSelf:
			return true // Unicode's folding: duplicateMember's to tell
		case x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z':
			return false // not one letter in two cases
		}
		i, j = i+1, j+1
	}
}

// duplicateMember is the InvalidParams of the first member of the JSON
// text b sent twice in one object (by the name it decodes to, at any
// depth), named by its place in the request: ProtoJSON refuses a field
// sent twice ("duplicate field"), and a key sent twice in a map or a
// google.protobuf.Struct (metadata, data: "duplicate map key"), where
// encoding/json keeps the last. So is a member whose name matches an
// earlier one's but for its letters' case (message and Message; Message
// and message_id's messageId once rewritten), outside metadata and data:
// encoding/json, the SDK's decoder, matches names case-insensitively and
// reads both into one field, keeping the last, where ProtoJSON, whose
// names are case-sensitive, reads at most one of them as a field and
// refuses the other ("unknown field"). nil when there is none, or b is
// no JSON (its decoding answers it).
func duplicateMember(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dup, err := firstDuplicate(dec, "", false)
	if err != nil {
		return nil
	}
	return dup
}

// firstDuplicate reads one value from dec and returns the InvalidParams of
// the first member it sends twice in one object (sentTwice; nil for
// none); path is the value's place ("" at the top, "message." …), free
// whether it is in metadata or data.
func firstDuplicate(dec *json.Decoder, path string, free bool) (dup, err error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		var seen []string
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := t.(string)
			if dup := sentTwice(seen, k, path, free); dup != nil {
				return dup, nil
			}
			seen = append(seen, k)
			if dup, err := firstDuplicate(dec, path+k+".", free || k == "metadata" || k == "data"); dup != nil || err != nil {
				return dup, err
			}
		}
	case json.Delim('['):
		elem := strings.TrimSuffix(path, ".")
		for i := 0; dec.More(); i++ {
			if dup, err := firstDuplicate(dec, elem+"["+strconv.Itoa(i)+"].", free); dup != nil || err != nil {
				return dup, err
			}
		}
	default:
		return nil, nil
	}
	_, err = dec.Token() // the closing bracket
	return nil, err
}

// sentTwice is the InvalidParams of k, a member name of the object at path
// (free: in metadata or data) after the names seen, when it is one of
// them, or, outside metadata and data, matches one but for its letters'
// case once both are JSON names (lowerCamel: message_id and messageId,
// one field by its two names, are jsonNames' to refuse); nil otherwise.
func sentTwice(seen []string, k, path string, free bool) error {
	ck := lowerCamel(k)
	for _, s := range seen {
		if s == k {
			return fmt.Errorf("%w: duplicate field %s%s: sent twice (a field once, as ProtoJSON reads it)", a2a.ErrInvalidParams, path, k)
		}
		if cs := lowerCamel(s); !free && cs != ck && strings.EqualFold(cs, ck) {
			return fmt.Errorf("%w: duplicate field %s%s: sent as %s and as %s (names are case-sensitive: ProtoJSON reads one of them as no field)",
				a2a.ErrInvalidParams, path, cs, s, k)
		}
	}
	return nil
}

// stringEnd is the index of the quote that ends the JSON string opening
// at b[i], len(b) when none does.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(b)
}

// skipValue is the index just past the JSON value that starts at b[i]
// (after any white space): past its closing bracket or quote, or at the
// comma or bracket that ends a scalar; len(b) when it does not end.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			if i = stringEnd(b, i); depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return len(b)
}

// isJSONSpace reports whether c is JSON's white space.
func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// jsonNamesDepth bounds the nesting jsonNames descends into: A2A's
// request messages nest a few levels outside their free-form fields, and
// each level decodes its subtree again.
const jsonNamesDepth = 16

// jsonNames rewrites the snake_case member names of v (recursively, not
// inside metadata or data, to depth jsonNamesDepth) to lowerCamelCase,
// and the values of fields' members as the SDK reads them
// (protoField.value); changed reports whether any was. path is v's place
// in the request ("message.", "message.parts[1]."; "" at its top), for
// the error naming a member sent by both names (duplicateField), the
// first in the order of the names at the shallowest level that has one,
// or a value that is none of its field's.
func jsonNames(v json.RawMessage, path string, depth int, fields []protoField) (out json.RawMessage, changed bool, err error) {
	t := bytes.TrimLeft(v, " \t\r\n")
	switch {
	case depth >= jsonNamesDepth:
		return v, false, nil
	case len(t) > 0 && t[0] == '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(v, &m) != nil {
			return v, false, nil
		}
		keys := slices.Sorted(maps.Keys(m))
		for _, k := range keys {
			if ck := lowerCamel(k); ck != k {
				if _, dup := m[ck]; dup {
					return v, false, duplicateField(path, k, ck)
				}
			}
		}
		n := make(map[string]json.RawMessage, len(m))
		for _, k := range keys {
			x, ck := m[k], lowerCamel(k)
			if k != "metadata" && k != "data" {
				var c bool
				if x, c, err = jsonNames(x, path+ck+".", depth+1, fields); err != nil {
					return v, false, err
				}
				changed = changed || c
			}
			if i := slices.IndexFunc(fields, func(f protoField) bool { return f.at(path, ck) }); i >= 0 {
				nv, err := fields[i].value(bytes.TrimSpace(x))
				if err != nil {
					return v, false, err
				}
				if nv != nil {
					x, changed = nv, true
				}
			}
			changed = changed || ck != k
			n[ck] = x
		}
		out, changed = remarshal(v, n, changed)
		return out, changed, nil
	case len(t) > 0 && t[0] == '[':
		var a []json.RawMessage
		if json.Unmarshal(v, &a) != nil {
			return v, false, nil
		}
		elem := strings.TrimSuffix(path, ".")
		for i := range a {
			var c bool
			if a[i], c, err = jsonNames(a[i], elem+"["+strconv.Itoa(i)+"].", depth+1, fields); err != nil {
				return v, false, err
			}
			changed = changed || c
		}
		out, changed = remarshal(v, a, changed)
		return out, changed, nil
	}
	return v, false, nil
}

// duplicateField is the InvalidParams of a member sent by its proto name
// and its JSON name in one object (at path), which ProtoJSON refuses.
func duplicateField(path, protoName, jsonName string) error {
	return fmt.Errorf("%w: duplicate field %s%s: sent as %s and as %s (a field by its proto name or its JSON name, not both)",
		a2a.ErrInvalidParams, path, jsonName, protoName, jsonName)
}

// remarshal is x encoded, in place of v, when changed; v itself (and
// false) when nothing changed or x does not encode.
func remarshal(v json.RawMessage, x any, changed bool) (json.RawMessage, bool) {
	if !changed {
		return v, false
	}
	b, err := json.Marshal(x)
	if err != nil {
		return v, false
	}
	return b, true
}

// lowerCamel is a proto field name's JSON name (history_length:
// historyLength); a name that is not lower snake_case is returned as it
// is.
func lowerCamel(k string) string {
	if !strings.Contains(k, "_") || strings.HasPrefix(k, "_") || strings.HasSuffix(k, "_") || strings.Contains(k, "__") {
		return k
	}
	var b strings.Builder
	up := false
	for _, r := range k {
		switch {
		case r == '_':
			up = true
		case r >= 'a' && r <= 'z':
			if up {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			up = false
		case r >= '0' && r <= '9':
			b.WriteRune(r)
			up = false
		default:
			return k
		}
	}
	return b.String()
}
