package a2abridge

import (
	"io"
	"mime"
	"net/http"
	"strings"
)

// eventStreamOfJSON is the JSON-RPC binding's transport: an answer to a
// streaming call (SendStreamingMessage, SubscribeToTask: the request
// accepts text/event-stream) that comes as one JSON document (200,
// application/json) instead of an event stream is read as a stream of
// that one event. The Python SDK 1.x and the Java SDK 1.x answer so when
// the call fails before its first event (a finished or unknown task, a
// reply to a finished task, an unsupported version: the JSON-RPC error
// in a plain JSON answer, as their own clients expect). a2a-go's client
// reads only the stream's data lines: it saw no event and no error, and
// the bridge took the empty stream for a cut one (retryable, followed by
// subscribing again, three times), so a task that had ended was never
// read and a reply to it was retried instead of refused.
type eventStreamOfJSON struct{ next http.RoundTripper }

func (t eventStreamOfJSON) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusOK || !acceptsEventStream(r) || !jsonAnswer(resp) {
		return resp, err
	}
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(strings.NewReader("data: "), oneLine{resp.Body}, strings.NewReader("\n\n")), resp.Body}
	return resp, nil
}

// acceptsEventStream reports whether r asks for an event stream.
func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if !strings.Contains(v, "event-stream") {
			continue
		}
		for _, part := range strings.Split(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// oneLine reads a JSON document with its line breaks as spaces, so that
// it is one data line of an event: outside its strings a line break is
// whitespace, and inside them JSON has none (it writes \n).
type oneLine struct{ r io.Reader }

func (o oneLine) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	for i, c := range p[:n] {
		if c == '\n' || c == '\r' {
			p[i] = ' '
		}
	}
	return n, err
}
