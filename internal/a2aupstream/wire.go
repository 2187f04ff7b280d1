package a2aupstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// Wire is how a Server's answers look on the wire where the A2A SDKs of
// other languages answer otherwise than a2a-go/v2's server, which runs
// the agent either way: the same tasks and events, framed as that SDK
// frames them. Neither the Python nor the Java SDK can run here (no
// package index), so their framing is reproduced from their source, as
// each constant says; what a2a-go frames alike is left as a2a-go's.
type Wire string

const (
	// WireGo is a2a-go/v2's own framing (the default).
	WireGo Wire = ""

	// WirePython is the Python SDK's (a2a-python v1.1.0):
	//   - the card as protobuf's MessageToDict writes it
	//     (server/request_handlers/response_helpers.py): a security
	//     requirement's scopes as a StringList, {"list": [...]}, or {}
	//     when there is none; and its interfaces built as the SDK's 1.0
	//     migration guide and samples build them, without
	//     protocolVersion (docs/migrations/v1_0/README.md).
	//   - a streaming JSON-RPC call (SendStreamingMessage,
	//     SubscribeToTask) answered only once its first event is there,
	//     headers included, and, when the call fails before that event
	//     (a finished or unknown task), answered 200 with the JSON-RPC
	//     error as a plain JSON document (application/json), not as an
	//     event (server/routes/jsonrpc_dispatcher.py).
	WirePython Wire = "python"
)

func (w Wire) valid() bool { return w == WireGo || w == WirePython }

// wire frames next's answers as s's Wire says.
func (s *Server) wire(next http.Handler, card bool) http.Handler {
	if s.opts.Wire != WirePython {
		return next
	}
	if card {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &recorder{header: http.Header{}}
			next.ServeHTTP(rec, r)
			body := rec.buf.Bytes()
			if rec.status == 0 || rec.status == http.StatusOK {
				body = pythonCard(body)
			}
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			if rec.status != 0 {
				w.WriteHeader(rec.status)
			}
			_, _ = w.Write(body)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			next.ServeHTTP(w, r)
			return
		}
		fw := &firstEvent{w: w, header: http.Header{}}
		next.ServeHTTP(fw, r)
		fw.end()
	})
}

// pythonCard is the card body as MessageToDict writes it (Wire).
func pythonCard(body []byte) []byte {
	var card map[string]any
	if json.Unmarshal(body, &card) != nil {
		return body
	}
	scopes := func(o map[string]any) {
		reqs, _ := o["securityRequirements"].([]any)
		for _, r := range reqs {
			req, _ := r.(map[string]any)
			schemes, _ := req["schemes"].(map[string]any)
			for name, v := range schemes {
				if list, _ := v.([]any); len(list) > 0 {
					schemes[name] = map[string]any{"list": list}
				} else {
					schemes[name] = map[string]any{}
				}
			}
		}
	}
	scopes(card)
	skills, _ := card["skills"].([]any)
	for _, sk := range skills {
		if m, ok := sk.(map[string]any); ok {
			scopes(m)
		}
	}
	ifaces, _ := card["supportedInterfaces"].([]any)
	for _, i := range ifaces {
		if m, ok := i.(map[string]any); ok {
			delete(m, "protocolVersion")
		}
	}
	b, err := json.Marshal(card)
	if err != nil {
		return body
	}
	return b
}

// recorder keeps an answer (the card's) whole.
type recorder struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) Write(p []byte) (int, error) { return r.buf.Write(p) }

// firstEvent holds a streaming answer until its first event is whole:
// then an event holding a JSON-RPC error is answered as a plain JSON
// document, anything else as the stream it is, from there on written
// through.
type firstEvent struct {
	w      http.ResponseWriter
	header http.Header
	status int

	mu      sync.Mutex
	buf     bytes.Buffer
	through bool // the first event was an event: written through since
	done    bool // the first event was an error: answered, the rest dropped
}

func (f *firstEvent) Header() http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.through {
		return f.w.Header()
	}
	return f.header
}

func (f *firstEvent) WriteHeader(status int) { f.status = status }

func (f *firstEvent) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.done:
		return len(p), nil
	case f.through:
		return f.w.Write(p)
	}
	f.buf.Write(p)
	f.decide(false)
	return len(p), nil
}

// Flush passes a flush on once the first event was.
func (f *firstEvent) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.through {
		http.NewResponseController(f.w).Flush()
	}
}

// end answers what is held when the handler returned without a whole
// event.
func (f *firstEvent) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decide(true)
}

// decide answers once the first event whose data is there is whole (or,
// with last, with whatever is held).
func (f *firstEvent) decide(last bool) {
	if f.through || f.done {
		return
	}
	held := f.buf.Bytes()
	data, whole := firstData(held)
	if !whole && !last {
		return
	}
	var rpc struct {
		Error json.RawMessage `json:"error"`
	}
	if whole && json.Unmarshal(data, &rpc) == nil && len(rpc.Error) > 0 {
		f.done = true
		f.w.Header().Set("Content-Type", "application/json")
		f.w.WriteHeader(http.StatusOK)
		_, _ = f.w.Write(data)
		return
	}
	f.through = true
	for k, v := range f.header {
		f.w.Header()[k] = v
	}
	if f.status != 0 {
		f.w.WriteHeader(f.status)
	}
	_, _ = f.w.Write(held)
	http.NewResponseController(f.w).Flush()
}

// firstData is the data of the first event of stream that has any, and
// whether that event is whole (its blank line read).
func firstData(stream []byte) ([]byte, bool) {
	var data [][]byte
	for len(stream) > 0 {
		i := bytes.IndexByte(stream, '\n')
		if i < 0 {
			return nil, false
		}
		line := bytes.TrimSuffix(stream[:i], []byte("\r"))
		stream = stream[i+1:]
		switch {
		case len(line) == 0 && len(data) > 0:
			return bytes.Join(data, []byte("\n")), true
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
		}
	}
	return nil, false
}
