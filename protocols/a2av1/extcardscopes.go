package a2av1

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/e2a-pipeline/pipeline/internal/obs"
)

// methodGetExtendedCard is the JSON-RPC method of the extended card.
const methodGetExtendedCard = "GetExtendedAgentCard"

// extendedCardCall reports whether r (its JSON-RPC head when rpc) asks
// the extended card: GetExtendedAgentCard over JSON-RPC, GET
// …/extendedAgentCard over HTTP+JSON (a tenant's too; not the task of
// that id).
func extendedCardCall(r *http.Request, head rpcHead, rpc bool) bool {
	if rpc {
		return head.Method == methodGetExtendedCard
	}
	p := r.URL.Path
	return r.Method == http.MethodGet && strings.HasSuffix(p, "/extendedAgentCard") && !strings.HasSuffix(p, "/tasks/extendedAgentCard")
}

// protoScopesWriter passes the SDK's answer to an extended card call
// through with the card's security requirements in the specification's
// form ([ProtoScopes]), as the public card is served to every client but
// Go's (CardView): the SDK writes the Go SDK's bare lists, which the
// Java SDK's client refuses and @a2a-js/sdk reads as no scopes. Only a
// success is rewritten (status 200; for JSON-RPC an answer with a result
// and no error), the JSON-RPC members before the result kept as written
// (idWriter reads them); the SDK writes an answer in one Write (its
// encoder's). Anything it cannot read goes through untouched.
type protoScopesWriter struct {
	obs.StatusWriter // the status written
	rpc              bool
	seen             bool
}

// newProtoScopesWriter is a protoScopesWriter over w (rpc: the answer is
// a JSON-RPC response).
func newProtoScopesWriter(w http.ResponseWriter, rpc bool) *protoScopesWriter {
	return &protoScopesWriter{StatusWriter: obs.StatusWriter{ResponseWriter: w}, rpc: rpc}
}

func (w *protoScopesWriter) Write(b []byte) (int, error) {
	if w.seen || (w.Code != 0 && w.Code != http.StatusOK) {
		return w.StatusWriter.Write(b)
	}
	w.seen = true
	out, ok := protoScopesAnswer(b, w.rpc)
	if !ok {
		return w.StatusWriter.Write(b)
	}
	if _, err := w.StatusWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// resultKey opens a JSON-RPC answer's result member. In the SDK's answer
// ({"jsonrpc":"2.0","id":…,"result":…}) its first occurrence is the
// member's: a string id cannot hold it unescaped.
var resultKey = []byte(`"result":`)

// protoScopesAnswer is the answer b (a JSON-RPC response when rpc, else
// the card alone) with the card in the specification's scopes form, and
// whether b was one it could read.
func protoScopesAnswer(b []byte, rpc bool) ([]byte, bool) {
	body := bytes.TrimRight(b, " \t\r\n")
	head, card, tail := []byte(nil), body, []byte(nil)
	if rpc {
		var resp struct {
			Result, Error json.RawMessage
		}
		i := bytes.Index(body, resultKey)
		if i < 0 || !bytes.HasSuffix(body, []byte("}")) || json.Unmarshal(body, &resp) != nil || resp.Result == nil || resp.Error != nil {
			return nil, false
		}
		head, card, tail = body[:i+len(resultKey)], body[i+len(resultKey):len(body)-1], []byte("}")
	}
	if !json.Valid(card) || bytes.TrimSpace(card)[0] != '{' {
		return nil, false
	}
	m, err := ProtoScopes(json.RawMessage(card))
	if err != nil {
		return nil, false
	}
	nb, err := json.Marshal(m)
	if err != nil {
		return nil, false
	}
	out := make([]byte, 0, len(b)+len(nb)-len(card))
	out = append(append(append(append(out, head...), nb...), tail...), b[len(body):]...)
	return out, true
}
