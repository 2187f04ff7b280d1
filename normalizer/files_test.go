package normalizer_test

import (
	"errors"
	"strings"
	"testing"

	a2av2 "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// a2aSendBody is a message/send of one part (a JSON object).
func a2aSendBody(part string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"messageId":"m1","role":"user","parts":[` + part + `]}}}`)
}

// avSendBody is an AgentVault tasks/send of one part.
func avSendBody(part string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":7,"method":"tasks/send","params":{"message":{"role":"user","parts":[` + part + `]}}}`)
}

// TestFileBytesNotBase64Refused: a file part's bytes are "the base64-encoded
// content of the file" (A2A v0.3 FileWithBytes). Bytes that are not base64
// were accepted and written into params.files as a data: URI that nothing
// can decode: the readers of params.files (a2amap.ParamParts: the task
// history's user message, the A2A bridge's message upstream) then took the
// file for a URL "data:…", so the agent got a link, not the file, and the
// client's task history showed one. They are invalid params (-32602), as a
// part without its content is.
func TestFileBytesNotBase64Refused(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for name, body := range map[string][]byte{
		"a2a":        a2aSendBody(`{"kind":"file","file":{"bytes":"not base64!!","mimeType":"image/png"}}`),
		"a2a url":    a2aSendBody(`{"kind":"file","file":{"bytes":"aGk_","mimeType":"image/png"}}`),
		"agentvault": avSendBody(`{"type":"file","content":"%%%","media_type":"image/png"}`),
	} {
		protocol := normalizer.ProtocolA2A
		if name == "agentvault" {
			protocol = normalizer.ProtocolAgentVault
		}
		adapter, _ := n.Adapter(protocol)
		res, err := adapter(normalizer.Input{Body: body})
		if err == nil {
			t.Errorf("%s: accepted, params.files %v; want invalid params", name, res.Envelope.Params["files"])
			continue
		}
		if !errors.Is(err, normalizer.ErrInvalidParams) || string(normalizer.ErrorJSONRPCID(err)) != "7" {
			t.Errorf("%s: %v (id %s), want ErrInvalidParams echoing id 7", name, err, normalizer.ErrorJSONRPCID(err))
		}
	}
}

// TestFileBytesReadBack: the bytes of a file part, base64 as A2A sends
// them (padded, or wrapped in lines as MIME encoders write them), reach
// the readers of params.files as those bytes, with the part's media type,
// whatever that media type holds: a "," in it (a quoted parameter) cut the
// data: URI there, and the file was read as a URL.
func TestFileBytesReadBack(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for name, c := range map[string]struct{ b64, mime, want, wantMime string }{
		"plain":          {"aGVsbG8=", "text/plain", "hello", "text/plain"},
		"lines":          {`aGVs\r\nbG8=`, "text/plain", "hello", "text/plain"},
		"comma in param": {"aGVsbG8=", `text/plain; x="a,b"`, "hello", `text/plain; x="a,b"`},
		"no media type":  {"aGVsbG8=", "", "hello", "application/octet-stream"},
	} {
		for _, protocol := range []string{normalizer.ProtocolA2A, normalizer.ProtocolAgentVault} {
			body := a2aSendBody(`{"kind":"file","file":{"bytes":"` + c.b64 + `","mimeType":` + jsonString(c.mime) + `,"name":"f.txt"}}`)
			if protocol == normalizer.ProtocolAgentVault {
				body = avSendBody(`{"type":"file","content":"` + c.b64 + `","media_type":` + jsonString(c.mime) + `,"filename":"f.txt"}`)
			}
			adapter, _ := n.Adapter(protocol)
			res, err := adapter(normalizer.Input{Body: body})
			if err != nil {
				t.Errorf("%s %s: %v", protocol, name, err)
				continue
			}
			parts := a2amap.ParamParts(res.Envelope)
			if len(parts) != 1 {
				t.Fatalf("%s %s: %d parts", protocol, name, len(parts))
			}
			raw, ok := parts[0].Content.(a2av2.Raw)
			if !ok || string(raw) != c.want || parts[0].MediaType != c.wantMime || parts[0].Filename != "f.txt" {
				t.Errorf("%s %s: read back %#v (media type %q, name %q), want bytes %q, %q, f.txt; params.files %v",
					protocol, name, parts[0].Content, parts[0].MediaType, parts[0].Filename, c.want, c.wantMime, res.Envelope.Params["files"])
			}
		}
	}
}

// TestResourceLinkNameFromPath: a file part given by URI without a name
// is named, in its ACP resource_link block, by the last segment of the
// URI's path. The name was the URI's text after its last "/": a presigned
// URL's query (its signature) became part of the name
// ("report.pdf?X-Amz-Signature=…"), an escaped name stayed escaped, and a
// data: URI was named by its content.
func TestResourceLinkNameFromPath(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for uri, want := range map[string]string{
		"https://s3.example/b/report.pdf?X-Amz-Signature=abc&X-Amz-Credential=k": "report.pdf",
		"https://h.example/docs/my%20file.pdf#page=2":                            "my file.pdf",
		"https://h.example/dir/":                                                 "dir",
		"https://h.example":                                                      "file",
		"https://h.example/?q=1":                                                 "file",
		"data:text/plain;base64,aGk=":                                            "file",
		"gs://bucket/a/b.csv":                                                    "b.csv",
	} {
		res, err := n.FromA2A(normalizer.Input{Body: a2aSendBody(`{"kind":"file","file":{"uri":` + jsonString(uri) + `}}`)})
		if err != nil {
			t.Errorf("%s: %v", uri, err)
			continue
		}
		blocks, _ := res.Envelope.Params["content_blocks"].([]any)
		if len(blocks) != 1 {
			t.Fatalf("%s: content_blocks %v", uri, res.Envelope.Params["content_blocks"])
		}
		b := blocks[0].(map[string]any)
		if b["name"] != want || b["uri"] != uri {
			t.Errorf("%s: resource_link name %q (uri %v), want %q", uri, b["name"], b["uri"], want)
		}
	}
}

// TestE2AContextIDOutsideGrammarRefused: a raw E2A envelope's context_id
// goes, with its task_id, into the task's record (ingress TaskRecord
// ContextID), and the record's writes keep the context's claim under
// ingress taskKey(KindContext, context_id) (keepContext), which refuses an
// id outside subjects.ValidateRequestID: a later turn of such a task would
// fail there, as a task-index error, not as the client's bad id. It is
// refused up front, as the task_id is and as A2A refuses a contextId.
func TestE2AContextIDOutsideGrammarRefused(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for name, lit := range map[string]string{
		"newline":   `"ctx\n1"`,
		"too long":  `"` + strings.Repeat("c", subjects.MaxIDLength+1) + `"`,
		"trailing ": `"ctx "`,
	} {
		body := `{"request_id":"r-1","method":"chat.send","task_id":"t-1","context_id":` + lit + `,"params":{"text":"hi"}}`
		_, err := n.FromE2A(normalizer.Input{Body: []byte(body)})
		if !errors.Is(err, subjects.ErrInvalidID) || normalizer.HTTPStatus(err) != 400 {
			t.Errorf("%s: err = %v (HTTP %d), want a refused id (400)", name, err, normalizer.HTTPStatus(err))
		}
	}
	if _, err := n.FromE2A(normalizer.Input{Body: []byte(`{"method":"chat.send","context_id":"ctx-1","params":{"text":"hi"}}`)}); err != nil {
		t.Errorf("valid context_id refused: %v", err)
	}
}

// TestScalarParamsInvalidRequest: JSON-RPC 2.0 params "MUST be a
// Structured value" (an object or an array) when present: a request whose
// params are a string, a number or a boolean is no Request object,
// -32600, as the door's decoder (package jsonrpc) answers it. The
// normalizer reading a body (EnvelopeFromACPJSONRPC, Input.Body) answered
// -32602, so the same request got two codes; an array stays -32602 (a
// structured value the method does not take).
func TestScalarParamsInvalidRequest(t *testing.T) {
	n := normalizer.New(normalizer.Config{})
	for _, c := range []struct{ protocol, method, params string }{
		{normalizer.ProtocolACP, "session/prompt", `"x"`},
		{normalizer.ProtocolACP, "initialize", `1`},
		{normalizer.ProtocolA2A, "message/send", `true`},
		{normalizer.ProtocolA2A, "tasks/get", `"t-1"`},
		{normalizer.ProtocolAgentVault, "tasks/send", `0`},
	} {
		adapter, _ := n.Adapter(c.protocol)
		body := `{"jsonrpc":"2.0","id":3,"method":"` + c.method + `","params":` + c.params + `}`
		_, err := adapter(normalizer.Input{Body: []byte(body)})
		if normalizer.JSONRPCCode(err) != -32600 || string(normalizer.ErrorJSONRPCID(err)) != "3" {
			t.Errorf("%s %s params %s: %v (code %d), want -32600 echoing id 3", c.protocol, c.method, c.params, err, normalizer.JSONRPCCode(err))
		}
	}
	_, err := n.FromACP(normalizer.Input{Body: []byte(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":[1]}`)})
	if !errors.Is(err, normalizer.ErrInvalidParams) {
		t.Errorf("array params: %v, want invalid params", err)
	}
}
