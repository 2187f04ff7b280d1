package a2av1

import (
	"bytes"
	"encoding/json"
)

// methodDeletePushConfig is the JSON-RPC method whose success has an
// empty result (google.protobuf.Empty, a2a.proto), which
// emptyResultWriter writes.
const methodDeletePushConfig = "DeleteTaskPushNotificationConfig"

// emptyResultWriter passes the SDK's JSON-RPC answer to a call through,
// but for a success without a result member, which the SDK writes for a
// method returning nothing ({"jsonrpc":"2.0","id":1}: its response's
// result is omitempty): written with "result":{}, the JSON of
// google.protobuf.Empty, which DeleteTaskPushNotificationConfig returns.
// JSON-RPC 2.0 §5: "result: This member is REQUIRED on success". The SDK
// writes an answer in one Write (its encoder's); the members before are
// kept as written (the id as idWriter replaces it).
type emptyResultWriter struct {
	passThrough
	seen bool
}

func (w *emptyResultWriter) Write(b []byte) (int, error) {
	if w.seen {
		return w.ResponseWriter.Write(b)
	}
	w.seen = true
	body := bytes.TrimRight(b, " \t\r\n")
	var resp map[string]json.RawMessage
	if !bytes.HasPrefix(body, []byte(`{"jsonrpc":`)) || !bytes.HasSuffix(body, []byte("}")) || json.Unmarshal(body, &resp) != nil {
		return w.ResponseWriter.Write(b)
	}
	if _, ok := resp["result"]; ok {
		return w.ResponseWriter.Write(b)
	}
	if _, ok := resp["error"]; ok {
		return w.ResponseWriter.Write(b)
	}
	out := make([]byte, 0, len(b)+len(`,"result":{}`))
	out = append(out, body[:len(body)-1]...)
	out = append(out, `,"result":{}}`...)
	out = append(out, b[len(body):]...)
	if _, err := w.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}
