package a2e

import (
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestLineWriterFlushFails: an A2E body's writer passes a flush's error on
// through http.ResponseController, the deadline of a client that stopped
// reading among them: with Flush alone it was lost, and a stream cut off
// during a flush was counted a client gone (ingress TestSlowReaderCut's
// trickle).
func TestLineWriterFlushFails(t *testing.T) {
	testkit.FlushFails(t, func(w http.ResponseWriter) http.ResponseWriter { return &lineWriter{ResponseWriter: w} })
}
