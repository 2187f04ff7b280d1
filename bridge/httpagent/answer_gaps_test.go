package httpagent_test

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// TestMalformedJSONAnswerNotRetriedWhenFramed: a JSON answer that is
// not JSON (`{"reply":`, the agent's own bad answer) is
// upstream_protocol_error, not retryable (doc.go, "Bad answers"; the
// "json garbage" case of TestAnswerForms). Only a body delimited by the
// connection's close may have been cut by a dropped connection
// (httpagent.go, single). A gzip-encoded answer (whose end the gzip
// trailer proves: a cut one fails decompression) and an HTTP/2 answer
// (whose end is the stream's END_STREAM: a cut one is a stream error)
// both have ContentLength -1 and no TransferEncoding, so the bridge calls
// the agent's bad answer a dropped connection: upstream_unavailable,
// retryable, "closed the answer mid-frame", and POSTs it again and again.
func TestMalformedJSONAnswerNotRetriedWhenFramed(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, r *rig, calls *atomic.Int32, id string) {
		t.Helper()
		eb := finalError(t, r.ask(t, `{"request_id":"`+id+`","params":{"text":"hi"}}`))
		if eb.Code != bridge.CodeProtocol || eb.Retryable || calls.Load() != 1 {
			t.Errorf("a whole answer that is not JSON ended %s retryable=%v (%q) after %d calls; want %s, not retryable, after 1 call",
				eb.Code, eb.Retryable, eb.Message, calls.Load(), bridge.CodeProtocol)
		}
	}
	t.Run("gzip", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			_, _ = io.WriteString(gz, `{"reply":`)
			_ = gz.Close()
		}))
		t.Cleanup(srv.Close)
		check(t, newRig(t, srv.URL, rigConfig{}), &calls, "json-gzip")
	})
	t.Run("http2", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"reply":`)
			w.(http.Flusher).Flush() // no Content-Length; the stream ends cleanly
		}))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		check(t, newRig(t, srv.URL, rigConfig{client: []bridge.ClientOption{bridge.WithTransport(srv.Client().Transport)}}),
			&calls, "json-h2")
	})
}

// TestChunkOutsideSpecRefused: spec §12.5: an e2a.chunk's delta_kind is
// one of text / reasoning / tool / custom, its delta a string or a
// structured object. The Go SDK refuses anything else before it is
// published (agent/writer.go checkDelta: "a typo "Text" was published, no
// client read it as text"), and doc.go promises the HTTP agent's frames
// "its kind's body rules" with the agent hearing of its mistake at once.
// The bridge writes the upstream's chunk with Writer.Write and a raw body,
// which is checked by e2a.Response.Validate only (delta_kind not empty):
// a chunk of delta_kind "Text", one whose delta is a number and one
// without a delta are stored and streamed to every client, and the
// request succeeds.
func TestChunkOutsideSpecRefused(t *testing.T) {
	t.Parallel()
	bodies := []string{
		`{"delta_kind":"Text","delta":"hi"}`,
		`{"delta_kind":"text","delta":42}`,
		`{"delta_kind":"text"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env, err := e2a.FromJSON(mustRead(r))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, `{"response_kind":"e2a.chunk","body":`+bodies[env.ParamInt("case", 0)]+"}\n"+complete)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{})
	for i, body := range bodies {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			frames := r.ask(t, fmt.Sprintf(`{"request_id":"bad-chunk-%d","params":{"case":%d}}`, i, i))
			for _, f := range frames {
				if f.ResponseKind == e2a.KindChunk {
					t.Errorf("chunk outside §12.5 published: %s", f.Body)
				}
			}
			last := frames[len(frames)-1]
			if eb, err := last.Error(); err != nil || eb.Code != bridge.CodeProtocol || eb.Retryable {
				t.Errorf("final %s %s; want e2a.error %s, not retryable", last.ResponseKind, last.Body, bridge.CodeProtocol)
			}
		})
	}
}
