package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// upstreamKey is the bridge's key to the model server.
const upstreamKey = "sk-upstream-6f1d2c9a8b7e4f30a1b2c3d4e5f60718"

// pool is the bridge's pool in every test.
const pool = "p"

// setup configures a bridge pipeline.
type setup struct {
	ingress []ingress.Option
	client  []bridge.ClientOption
	up      []openai.Option
	handler []bridge.Option // after the fast retries and the metrics
	base    string          // the upstream's base URL (default: the model server's)
	conn    *nats.Conn
	log     *testkit.Buffer
	// inputModes, when set, are published as the pool's (PoolInfo), as
	// `e2a agent --input-modes` does: the A2A and ACP doors take file
	// parts and blocks of those types only.
	inputModes []string
}

// startBridge starts a pipeline whose default pool p is the OpenAI bridge
// to srv (or s.base), with history, the key upstreamKey, fast retries and
// every log (the bridge's, the upstream's) in s.log when set.
func startBridge(t *testing.T, srv *modelServer, s setup) *pipetest.Pipeline {
	t.Helper()
	opts := []pipetest.Option{pipetest.WithIngress(append([]ingress.Option{ingress.WithDefaultPool(pool)}, s.ingress...)...)}
	if s.conn != nil {
		opts = append(opts, pipetest.WithConn(s.conn))
	}
	p := pipetest.Start(t, opts...)
	ctx := context.Background()
	convs, err := bridge.OpenConversations(ctx, p.JS, natstest.Config())
	if err != nil {
		t.Fatal(err)
	}
	base := s.base
	if base == "" {
		base = srv.base()
	}
	copts := []bridge.ClientOption{bridge.WithCredentials(bridge.Credentials{APIKey: upstreamKey})}
	if s.base == "" {
		copts = append(copts, bridge.WithTransport(srv.transport())) // the calls counted
	}
	client, err := bridge.NewClient(base, append(copts, s.client...)...)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.Default()
	if s.log != nil {
		log = slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	up, err := openai.New(client, "test-model", append([]openai.Option{openai.WithHistory(pool, convs),
		openai.WithLogger(log)}, s.up...)...)
	if err != nil {
		t.Fatal(err)
	}
	h, err := bridge.New(pool, up, append([]bridge.Option{bridge.WithRetry(3, time.Millisecond, 5*time.Millisecond),
		bridge.WithMetrics(p.Registry), bridge.WithLogger(log)}, s.handler...)...)
	if err != nil {
		t.Fatal(err)
	}
	if s.inputModes != nil {
		if err := convs.PublishPool(ctx, bridge.PoolInfo{Pool: pool, Kind: "openai", Streaming: true, InputModes: s.inputModes}); err != nil {
			t.Fatal(err)
		}
	}
	p.Pool(pool, h)
	return p
}

// post sends an E2A request (with the API key when key is set) and fails
// the test unless it is accepted.
func post(t *testing.T, p *pipetest.Pipeline, key string, body map[string]any, headers ...string) {
	t.Helper()
	b, _ := json.Marshal(body)
	headers = append([]string{"Content-Type", "application/json"}, headers...)
	if key != "" {
		headers = append(headers, "X-API-Key", key)
	}
	if resp, rb := testkit.Do(t, http.MethodPost, p.URL+"/v1/requests", string(b), headers...); resp.StatusCode/100 != 2 {
		t.Fatalf("POST /v1/requests: %d %s", resp.StatusCode, rb)
	}
}

// frames reads request id's frames from its E2A SSE stream, to its final
// frame.
func frames(t *testing.T, p *pipetest.Pipeline, key, id string) []*e2a.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/v1/requests/"+id+"/stream", nil)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream of %s: %d %s", id, resp.StatusCode, b)
	}
	var out []*e2a.Response
	for _, ev := range testkit.Events(testkit.MustReadSSE(t, resp.Body)) {
		if ev.Event == "error" {
			t.Fatalf("stream of %s: error event %s", id, ev.Data)
		}
		f, err := e2a.ResponseFromJSON([]byte(ev.Data))
		if err != nil {
			t.Fatalf("frame %s: %v", ev.Data, err)
		}
		out = append(out, f)
	}
	if len(out) == 0 || !out[len(out)-1].IsFinal {
		t.Fatalf("stream of %s ended without a final frame (%d frames)", id, len(out))
	}
	return out
}

// ask posts a request with text in params.content (and the given extra
// fields) and returns its frames.
func ask(t *testing.T, p *pipetest.Pipeline, key, id, text string, extra map[string]any) []*e2a.Response {
	t.Helper()
	return askWith(t, p, key, id, map[string]any{"content": text}, extra)
}

// askWith posts a request with params (and the given extra fields, and
// headers) and returns its frames.
func askWith(t *testing.T, p *pipetest.Pipeline, key, id string, params, extra map[string]any, headers ...string) []*e2a.Response {
	t.Helper()
	body := map[string]any{"request_id": id, "method": "chat.send", "is_stream": true, "params": params}
	for k, v := range extra {
		body[k] = v
	}
	post(t, p, key, body, headers...)
	return frames(t, p, key, id)
}

// answer is what a request's frames say.
type answer struct {
	text, reasoning string
	calls           []call
	final           *e2a.Response
	result          map[string]any // the e2a.complete result
	errBody         e2a.ErrorBody  // the e2a.error body
	responseIDs     map[string]int // llm_response_id → frames carrying it ("" none)
}

func read(t *testing.T, fs []*e2a.Response) answer {
	t.Helper()
	a := answer{responseIDs: map[string]int{}, final: fs[len(fs)-1]}
	for _, f := range fs {
		id, _ := f.Metadata["llm_response_id"].(string)
		a.responseIDs[id]++
		switch f.ResponseKind {
		case e2a.KindChunk:
			c, err := f.Chunk()
			if err != nil {
				t.Fatal(err)
			}
			switch c.DeltaKind {
			case e2a.DeltaText:
				a.text += c.Delta.(string)
			case e2a.DeltaReasoning:
				a.reasoning += c.Delta.(string)
			case e2a.DeltaTool:
				d := c.Delta.(map[string]any)
				if d["type"] != e2a.ToolFunctionCall {
					t.Fatalf("tool delta %v", d)
				}
				args, ok := d["args"].(string)
				if !ok {
					t.Fatalf("tool delta args %T, want the JSON string", d["args"])
				}
				a.calls = append(a.calls, call{d["id"].(string), d["name"].(string), args})
			}
		case e2a.KindComplete:
			c, err := f.Complete()
			if err != nil {
				t.Fatal(err)
			}
			a.result, _ = c.Result.(map[string]any)
		case e2a.KindError:
			b, err := f.Error()
			if err != nil {
				t.Fatal(err)
			}
			a.errBody = b
		}
	}
	return a
}

// chunkEvent is an event of a streamed completion (id c1, model m): one
// choice with delta (a JSON object) and finish (JSON: null, "stop").
func chunkEvent(delta, finish string) string {
	return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta +
		`,"finish_reason":` + finish + `}]}` + "\n\n"
}

// contains reports whether any of ss holds sub.
func contains(sub string, ss ...string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
