package a2av1

import (
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestWritersFlushFails: the writers wrapped around a call's answer pass a
// flush's error on through http.ResponseController, the deadline of a
// client that stopped reading among them: with Flush alone it was lost,
// and a SendStreamingMessage on JSON-RPC cut off during a flush was
// counted a client gone (TestSlowReaderCut's trickle).
func TestWritersFlushFails(t *testing.T) {
	for name, wrap := range map[string]func(http.ResponseWriter) http.ResponseWriter{
		"JSON-RPC call": func(w http.ResponseWriter) http.ResponseWriter {
			return rpcWriter(w, rpcHead{Method: "SendStreamingMessage"})
		},
		"id":        func(w http.ResponseWriter) http.ResponseWriter { return newIDWriter(w, []byte("1")) },
		"HTTP+JSON": func(w http.ResponseWriter) http.ResponseWriter { return &specStatusWriter{ResponseWriter: w} },
	} {
		t.Run(name, func(t *testing.T) { testkit.FlushFails(t, wrap) })
	}
}
