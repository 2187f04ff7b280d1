package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
)

// chatCompletions is a stand-in for vLLM, Ollama or OpenAI: it answers
// POST /v1/chat/completions with a chat completions stream, in the wire
// format the official client reads (TestExampleStreamIsTheWireFormat).
func chatCompletions(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(choices, usage string) {
		fmt.Fprintf(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4.1-mini","choices":[%s],"usage":%s}`+"\n\n", choices, usage)
		w.(http.Flusher).Flush()
	}
	chunk(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}`, "null")
	for _, piece := range []string{"Paris", " is the capital", " of France."} {
		chunk(`{"index":0,"delta":{"content":"`+piece+`"},"finish_reason":null}`, "null")
	}
	chunk(`{"index":0,"delta":{},"finish_reason":"stop"}`, "null")
	chunk("", `{"prompt_tokens":14,"completion_tokens":7,"total_tokens":21}`)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// A model server behind the pool "chat", as `e2a agent --pool chat
// --openai URL --model M` serves it: each request becomes one streamed
// POST {URL}/chat/completions, whose content deltas are written as
// e2a.chunk text frames and whose end as the final e2a.complete frame
// (the full text, the finish reason, the model and its usage). Here the
// model server is an httptest.Server answering a canned stream.
func Example() {
	model := httptest.NewServer(http.HandlerFunc(chatCompletions))
	defer model.Close()

	// An embedded JetStream server with the pipeline's streams.
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()

	// The bridge: a client of the model server's API base, the model, the
	// conversations store (earlier turns of a session are sent along), and
	// bridge.New around it (retries, a bound on calls in flight).
	client, err := bridge.NewClient(model.URL + "/v1")
	if err != nil {
		panic(err)
	}
	convs, err := bridge.OpenConversations(context.Background(), mem.JetStream, mem.Config)
	if err != nil {
		panic(err)
	}
	up, err := openai.New(client, "gpt-4.1-mini", openai.WithHistory("chat", convs))
	if err != nil {
		panic(err)
	}
	h, err := bridge.New("chat", up)
	if err != nil {
		panic(err)
	}

	// Serve the pool until ctx is done.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- agent.Run(ctx, mem.Conn, "chat", h) }()

	// Send a request, then read its frames in order: egress.Replay waits
	// for those not written yet and returns after the final one.
	env := &e2a.Envelope{RequestID: "req-1", IsStream: true, Params: map[string]any{"text": "What is the capital of France?"}}
	if _, err := ingress.NewPublisher(mem.JetStream, 10*time.Second).Publish(ctx, "chat", env); err != nil {
		panic(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var text strings.Builder
	err = egress.Replay(rctx, mem.Conn, "req-1", 0, func(fr render.Frame) error {
		f := fr.Response
		if c, err := f.Chunk(); err == nil && c.DeltaKind == e2a.DeltaText {
			text.WriteString(c.Delta.(string))
		}
		if f.IsFinal {
			fmt.Printf("streamed: %s\nfinal: %s %s %s\n", text.String(), f.ResponseKind, f.Status, f.Body)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	stop()
	fmt.Println("Run:", <-done)
	// Output:
	// streamed: Paris is the capital of France.
	// final: e2a.complete succeeded {"result":{"content":"Paris is the capital of France.","finish_reason":"stop","model":"gpt-4.1-mini","usage":{"prompt_tokens":14,"completion_tokens":7,"total_tokens":21}}}
	// Run: <nil>
}
