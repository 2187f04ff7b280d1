package httpagent_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/proctest"
)

// TestBOMAnswersRead: an NDJSON, JSON or text answer that starts with a
// UTF-8 byte order mark (.NET's Encoding.UTF8 writes one through a
// StreamWriter on HttpListener's response) is read as the SSE answer
// already was: the mark is no part of it (RFC 8259 §8.1 lets a JSON
// reader ignore it). The text's result began with an invisible U+FEFF,
// and the NDJSON and JSON answers were upstream_protocol_error.
func TestBOMAnswersRead(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ct, body, text, result string }{
		{"application/x-ndjson", bom + chunk + complete, "one ", `{"result":{"ok":true}}`},
		{"application/json", bom + `{"reply":"hi"}` + "\r\n", "", `{"result":{"reply":"hi"}}`},
		{"text/plain; charset=utf-8", bom + "Done ✓\r\n", "", `{"result":"Done ✓"}`},
	} {
		t.Run(c.ct, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, upstream(t, c.ct, c.body), rigConfig{})
			ans := answerOf(r.ask(t, `{"request_id":"bom-read","params":{"text":"hi"}}`))
			f := ans.Final()
			if f.ResponseKind != e2a.KindComplete || string(f.Body) != c.result || ans.Text(e2a.DeltaText) != c.text {
				t.Errorf("%s with a BOM: text %q, final %s %s; want text %q, e2a.complete %s",
					c.ct, ans.Text(e2a.DeltaText), f.ResponseKind, f.Body, c.text, c.result)
			}
		})
	}
}

// TestEmptyCloseDelimitedAnswerRetried: a JSON or text answer whose body,
// delimited by the connection's close (HTTP/1.0, Python's http.server),
// ends before its first byte was cut as surely as an NDJSON or SSE one
// (upstream_unavailable, retryable, and retried before any frame): a
// Python handler that raised after end_headers(), a connection dropped.
// It was upstream_protocol_error ("empty"), not retryable, never retried,
// while the same NDJSON answer was retried.
func TestEmptyCloseDelimitedAnswerRetried(t *testing.T) {
	t.Parallel()
	cases := []struct{ ct, whole, result string }{
		{"application/json", `{"reply":"whole"}`, `{"result":{"reply":"whole"}}`},
		{"text/plain", "whole\n", `{"result":"whole"}`},
	}
	calls := make([]atomic.Int32, len(cases))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env, err := e2a.FromJSON(mustRead(r))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		i := env.ParamInt("case", 0)
		if calls[i].Add(1) == 1 {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			_, _ = io.WriteString(buf, "HTTP/1.1 200 OK\r\nContent-Type: "+cases[i].ct+"\r\nConnection: close\r\n\r\n")
			_ = buf.Flush()
			return
		}
		w.Header().Set("Content-Type", cases[i].ct)
		_, _ = io.WriteString(w, cases[i].whole)
	}))
	t.Cleanup(srv.Close)
	r := newRig(t, srv.URL, rigConfig{})
	for i, c := range cases {
		t.Run(c.ct, func(t *testing.T) {
			t.Parallel()
			frames := r.ask(t, fmt.Sprintf(`{"request_id":"empty-cut-%d","params":{"case":%d}}`, i, i))
			f := frames[len(frames)-1]
			if f.ResponseKind != e2a.KindComplete || string(f.Body) != c.result || calls[i].Load() != 2 {
				t.Errorf("an empty close-delimited %s answer, then a whole one: final %s %s after %d POSTs; want e2a.complete %s after 2",
					c.ct, f.ResponseKind, f.Body, calls[i].Load(), c.result)
			}
		})
	}
}

// TestExamplesPromptNotAList: params.prompt that is a number or a boolean,
// or a text block whose text is null, as the E2A door takes them. The
// Python example iterated `p.get("prompt") or []`: a number raised in its
// handler, the connection closed without an answer, and the request was
// POSTed again (upstream_unavailable, retryable) to fail the same way; a
// null text became "None". Both examples answer as for no text.
func TestExamplesPromptNotAList(t *testing.T) {
	t.Parallel()
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("py")))
	bridgePool(t, p, "py", startExample(t, proctest.Python3(t), "agent.py"))
	bridgePool(t, p, "js", startExample(t, proctest.Node(t), "agent.mjs"))
	for _, c := range []struct{ pool, who string }{{"py", "Python"}, {"js", "Node"}} {
		t.Run(c.pool, func(t *testing.T) {
			t.Parallel()
			for _, params := range []string{`{"prompt":5}`, `{"prompt":true}`, `{"prompt":[{"type":"text","text":null}]}`} {
				a := p.Ask(t, c.pool, `{"params":`+params+`}`)
				f := a.Final()
				if want := c.who + " heard:  "; f == nil || f.ResponseKind != e2a.KindComplete || a.Text(e2a.DeltaText) != want {
					t.Errorf("params %s: text %q, final frame %+v; want text %q and e2a.complete", params, a.Text(e2a.DeltaText), f, want)
				}
			}
		})
	}
}
