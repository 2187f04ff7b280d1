package a2av1

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	a2alog "github.com/a2aproject/a2a-go/v2/log"
)

// failingWriter is a ResponseWriter whose writes fail (a client gone).
type failingWriter struct{ *httptest.ResponseRecorder }

func (failingWriter) Write([]byte) (int, error) { return 0, http.ErrHandlerTimeout }

// TestSDKLogDemotesOnlyFailedWrites: what the SDK logs at Error is passed
// on at Debug only once a write of the call to its client failed; an
// Error of a call whose writes succeeded (a fault of the server's) stays
// Error, and a logger at Info drops the demoted record.
func TestSDKLogDemotesOnlyFailedWrites(t *testing.T) {
	for _, c := range []struct {
		name  string
		fail  bool
		level slog.Level
		want  string // the level logged, "" for none
	}{
		{"write failed", true, slog.LevelDebug, "DEBUG"},
		{"write failed, logger at info", true, slog.LevelInfo, ""},
		{"writes fine", false, slog.LevelDebug, "ERROR"},
	} {
		var buf bytes.Buffer
		log := slog.New(clientWriteLog{slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: c.level})})
		var w http.ResponseWriter = httptest.NewRecorder()
		if c.fail {
			w = failingWriter{httptest.NewRecorder()}
		}
		cw, r := withSDKLog(w, httptest.NewRequest(http.MethodPost, "/", nil), log)
		_, _ = cw.Write([]byte("x"))
		a2alog.Error(r.Context(), "failed to write an event", http.ErrHandlerTimeout)
		var got struct{ Level string }
		if buf.Len() > 0 {
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
		}
		if got.Level != c.want {
			t.Errorf("%s: logged %q, want %q", c.name, buf.String(), c.want)
		}
	}
}
