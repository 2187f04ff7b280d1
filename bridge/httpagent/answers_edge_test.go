package httpagent_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// Answers an HTTP agent in any language plausibly sends: a BOM, gzip, a
// redirect, sequences of its own, a null result, an error page echoing the
// credential, a cancel mid-answer.

const bom = "\ufeff"

// TestSSEWithBOMKeepsFirstFrame: an SSE answer that starts with a UTF-8
// BOM (the event-stream format strips one: WHATWG HTML §9.2.6; .NET's
// UTF-8 StreamWriter writes one) keeps its first event. It was lost
// silently: the line "\ufeffdata: …" is no data line.
func TestSSEWithBOMKeepsFirstFrame(t *testing.T) {
	t.Parallel()
	body := bom + "data: " + strings.TrimSpace(chunk) + "\n\n" + "data: " + strings.TrimSpace(complete) + "\n\n"
	r := newRig(t, upstream(t, "text/event-stream", body), rigConfig{})
	a := r.ask(t, `{"request_id":"rev-sse-bom","params":{"text":"hi"}}`)
	ans := answerOf(a)
	if code, _ := ans.ErrorCode(); code != "" || ans.Text(e2a.DeltaText) != "one " {
		t.Errorf("SSE answer with a BOM: %d frames, text %q, final %s %s; want the chunk \"one \" then e2a.complete",
			len(a), ans.Text(e2a.DeltaText), ans.Final().ResponseKind, ans.Final().Body)
	}
}

// TestBOMAnswersClearError: an NDJSON or JSON answer that
// starts with a BOM is either read or ends the request with a clear,
// not retryable upstream_protocol_error (never a silent loss).
func TestBOMAnswersClearError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ct, body string }{
		{"application/x-ndjson", bom + chunk + complete},
		{"application/json", bom + `{"reply":"hi"}`},
	} {
		r := newRig(t, upstream(t, c.ct, c.body), rigConfig{})
		ans := answerOf(r.ask(t, `{"request_id":"rev-bom","params":{"text":"hi"}}`))
		code, retryable := ans.ErrorCode()
		t.Logf("%s with a BOM: final code %q", c.ct, code)
		if code != "" && (code != bridge.CodeProtocol || retryable) {
			t.Errorf("%s with a BOM: code %q retryable %v", c.ct, code, retryable)
		}
	}
}

// TestErrorBodyEchoesEscapedCredential: an upstream's JSON error page that
// echoes the bridge's Authorization header, JSON-escaped as PHP's
// json_encode and others write "/" ("\/"), reaches neither the client's
// e2a.error message nor the bridge's log with the credential readable. The
// error body was scrubbed as raw text only (frames are also scrubbed
// decoded). A Basic credential is base64, "/" is one of its characters.
func TestErrorBodyEchoesEscapedCredential(t *testing.T) {
	t.Parallel()
	const cred = "YWxhZGRpbjpvcGVu/c2VzYW1l+Zm9v"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		escaped := strings.ReplaceAll(r.Header.Get("Authorization"), "/", `\/`)
		fmt.Fprintf(w, `{"error":"unauthorized","headers":{"authorization":"%s"}}`, escaped)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{client: []bridge.ClientOption{
		bridge.WithCredentials(bridge.Credentials{Headers: map[string]string{"Authorization": "Basic " + cred}})}})
	eb := finalError(t, r.ask(t, `{"request_id":"rev-esc","params":{"text":"hi"}}`))
	if eb.Code != bridge.CodeAuth {
		t.Fatalf("final error %+v, want %s", eb, bridge.CodeAuth)
	}
	if strings.Contains(strings.ReplaceAll(eb.Message, `\/`, "/"), cred) {
		t.Errorf("the client's e2a.error holds the upstream credential (JSON-escaped): %q", eb.Message)
	}
	if strings.Contains(strings.NewReplacer(`\\/`, "/", `\/`, "/").Replace(r.log.String()), cred) {
		t.Errorf("the bridge's log holds the upstream credential (JSON-escaped)")
	}
}

// TestCancelAbortsUpstream: a cancel of a request whose HTTP
// agent is streaming aborts the POST (the agent's request context ends)
// and ends the request cancelled.
func TestCancelAbortsUpstream(t *testing.T) {
	t.Parallel()
	started, aborted := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, chunk)
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		close(aborted)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{})
	resp, err := r.post(`{"request_id":"rev-cancel","params":{"text":"hi"}}`)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testkit.Eventually(t, 10*time.Second, "the cancel published", func() bool {
		res, err := agent.Cancel(ctx, r.p.JS, "rev-cancel")
		return err == nil && !res.AlreadyFinished
	})
	select {
	case <-aborted:
	case <-ctx.Done():
		t.Fatal("the upstream POST was not aborted by the cancel")
	}
	frames := readFrames(t, resp)
	if code, _ := answerOf(frames).ErrorCode(); code != e2a.ErrCodeCancelled {
		t.Errorf("frames after the cancel: %d, final code %q", len(frames), code)
	}
}

// TestGzipAndRedirect: a gzip-encoded NDJSON answer is read;
// a redirect is not followed (the credentials stay with the configured
// upstream) and ends the request upstream_rejected, not retryable, naming
// the status, after one call.
func TestGzipAndRedirect(t *testing.T) {
	t.Parallel()
	var redirects atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/moved" {
			redirects.Add(1)
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			return
		}
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "want gzip", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		_, _ = io.WriteString(gz, chunk+complete)
		_ = gz.Close()
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL+"/", rigConfig{})
	if ans := answerOf(r.ask(t, `{"request_id":"rev-gzip","params":{"text":"hi"}}`)); ans.Text(e2a.DeltaText) != "one " {
		t.Errorf("gzip answer: %s %s", ans.Final().ResponseKind, ans.Final().Body)
	}
	r.serve(t, "moved", srv.URL+"/moved", rigConfig{})
	resp, err := r.postTo("/pools/moved/v1/requests", `{"request_id":"rev-redirect","params":{"text":"hi"}}`)
	if err != nil {
		t.Fatal(err)
	}
	eb := finalError(t, readFrames(t, resp))
	if eb.Code != bridge.CodeRejected || eb.Retryable || !strings.Contains(eb.Message, "307") || redirects.Load() != 1 {
		t.Errorf("redirect: %+v after %d calls", eb, redirects.Load())
	}
}

// TestSequenceAndNullResult: frames whose sequence is
// missing, repeated or wrong are numbered by the pipeline; a JSON answer
// null is the result.
func TestSequenceAndNullResult(t *testing.T) {
	t.Parallel()
	ndjson := `{"sequence":5,"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"a"}}` + "\n" +
		`{"sequence":5,"response_kind":"e2a.chunk","body":{"delta_kind":"text","delta":"b"}}` + "\n" +
		`{"sequence":0,"response_kind":"e2a.complete","body":{"result":1}}` + "\n"
	r := newRig(t, upstream(t, "application/x-ndjson", ndjson), rigConfig{})
	frames := r.ask(t, `{"request_id":"rev-seq","params":{"text":"hi"}}`)
	if len(frames) != 3 || answerOf(frames).Text(e2a.DeltaText) != "ab" {
		t.Errorf("frames %d, text %q", len(frames), answerOf(frames).Text(e2a.DeltaText))
	}
	r2 := newRig(t, upstream(t, "application/json", "null"), rigConfig{})
	frames = r2.ask(t, `{"request_id":"rev-null","params":{"text":"hi"}}`)
	if f := frames[len(frames)-1]; f.ResponseKind != e2a.KindComplete {
		t.Errorf("JSON null: %s %s", f.ResponseKind, f.Body)
	}
}

func answerOf(frames []*e2a.Response) pipetest.Answer { return pipetest.Answer{Frames: frames} }
