package obs

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

func TestStatusWriter(t *testing.T) {
	t.Run("body without header", func(t *testing.T) {
		rr := httptest.NewRecorder()
		w := &StatusWriter{ResponseWriter: rr}
		if w.Code != 0 {
			t.Fatalf("Code before any write = %d", w.Code)
		}
		if _, err := w.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		w.WriteHeader(http.StatusTeapot) // superfluous: the answer is 200
		if w.Code != http.StatusOK || rr.Code != http.StatusOK || rr.Body.String() != "x" {
			t.Fatalf("Code %d, recorded %d %q", w.Code, rr.Code, rr.Body.String())
		}
	})
	t.Run("header first", func(t *testing.T) {
		rr := httptest.NewRecorder()
		w := &StatusWriter{ResponseWriter: rr}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("gone"))
		if w.Code != http.StatusNotFound || rr.Code != http.StatusNotFound {
			t.Fatalf("Code %d, recorded %d", w.Code, rr.Code)
		}
	})
	t.Run("flush and unwrap", func(t *testing.T) {
		rr := httptest.NewRecorder()
		w := &StatusWriter{ResponseWriter: rr}
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Fatal(err)
		}
		if !rr.Flushed || w.Code != 0 {
			t.Fatalf("flushed %v, Code %d", rr.Flushed, w.Code)
		}
		if w.Unwrap() != http.ResponseWriter(rr) {
			t.Fatal("Unwrap is not the writer under it")
		}
	})
}

// TestStatusWriterFlushError: a flush whose write fails (here a write
// deadline passed: the client stopped reading) returns the error through
// http.ResponseController, as the writer under it does; egress tells a
// slow client by it (render.Output.SlowClient). StatusWriter had Flush
// only, which ResponseController prefers to Unwrap: the error was lost,
// and a slow client cut off during a flush was counted a client gone, its
// e2a_egress_slow_client_disconnects_total and warning missing.
func TestStatusWriterFlushError(t *testing.T) {
	testkit.FlushFails(t, func(w http.ResponseWriter) http.ResponseWriter { return &StatusWriter{ResponseWriter: w} })
}
