package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestChatUpstreamIsTheWireFormat: the bench's model server, read by the
// official openai-go client (its stream and ChatCompletionAccumulator),
// answers the content of its chunks, finish_reason stop and its usage; a
// request that asks no stream gets the API's error. The harness's own
// reader counts its content chunks and [DONE] as the frames.
func TestChatUpstreamIsTheWireFormat(t *testing.T) {
	up, err := StartChatUpstream(5, 30, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	oc := openai.NewClient(option.WithBaseURL(up.URL), option.WithAPIKey("sk-bench"), option.WithMaxRetries(0))
	stream := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "bench-model",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("the accumulator refused chunk %s", stream.Current().RawJSON())
		}
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if chunks != 5+3 || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != up.Content() || len(up.Content()) != 5*30 ||
		acc.Choices[0].FinishReason != "stop" || acc.Usage.CompletionTokens != 5 || acc.Model != "bench-model" {
		t.Fatalf("%d chunks, accumulated %+v", chunks, acc.ChatCompletion)
	}
	_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "bench-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type != "invalid_request_error" {
		t.Fatalf("a request without stream: %v", err)
	}

	cl := &client{base: strings.TrimSuffix(up.URL, "/v1"), proto: ProtoOpenAIChat, hc: newHTTPClient(4), expectFrames: 6}
	if res := cl.do(ctx, "r1", time.Now()); res.err != nil || res.frames != 6 || res.ttff <= 0 || res.e2e < res.ttff {
		t.Fatalf("harness read: %+v", res)
	}
}

// TestClassifyChatFixtures: on the OpenAI bridge's fixtures (the real wire
// format, checked there with openai-go) the harness counts the chunks with
// text and [DONE], the last, and fails on the stream's error event.
func TestClassifyChatFixtures(t *testing.T) {
	for name, want := range map[string]int{"text": 6, "usage": 4} {
		b, err := os.ReadFile(filepath.Join("..", "..", "bridge", "openai", "testdata", name+".sse"))
		if err != nil {
			t.Fatal(err)
		}
		frames, final := 0, false
		for _, ev := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
			isFrame, isFinal, _, err := classifyChat([]byte(strings.TrimPrefix(ev, "data: ")))
			if err != nil || final {
				t.Fatalf("%s: %v after final %v", name, err, final)
			}
			if isFrame {
				frames++
			}
			final = isFinal
		}
		if frames != want || !final {
			t.Errorf("%s: %d frames (final %v), want %d", name, frames, final, want)
		}
	}
	if _, _, _, err := classifyChat([]byte(`{"error":{"message":"overloaded","type":"server_error"}}`)); err == nil {
		t.Error("an error event read as a chunk")
	}
}

// TestRunBridgeSmall runs the bridge mode of each upstream with tiny
// counts, coalescing on (as e2a agent runs a bridge) and off: every system
// answers every request of every round with its frames checked (E2A SSE:
// the harness's SequenceChecker on the event ids, and the final frame; the
// direct OpenAI stream: its content chunks and [DONE]; the direct A2A
// stream: its Task, chunks and terminal status), the report holds every
// figure, and the CPU profiles asked for are written. Timings are not
// checked.
func TestRunBridgeSmall(t *testing.T) {
	for _, tc := range []struct {
		upstream     string
		noCoalesce   bool
		directFrames float64
	}{
		{BridgeOpenAI, false, 5}, {BridgeOpenAI, true, 5},
		{BridgeA2A, false, 6}, {BridgeA2A, true, 6}, // the Task, 4 chunks, completed
	} {
		noCoalesce := tc.noCoalesce
		t.Run(tc.upstream+"/"+map[bool]string{false: "coalesce", true: "no-coalesce"}[noCoalesce], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg := DefaultConfig()
			cfg.Requests, cfg.Concurrency, cfg.Warmup, cfg.Frames, cfg.FrameBytes = 80, 4, 10, 5, 40
			cfg.TCP = true
			cfg.CPUProfile = filepath.Join(t.TempDir(), "bridged.prof")
			const rounds = 2
			rep, err := RunBridge(ctx, BridgeConfig{Bench: cfg, Upstream: tc.upstream, Rounds: rounds, NoCoalesce: noCoalesce})
			if err != nil {
				t.Fatalf("RunBridge: %v", err)
			}
			for _, s := range []BridgeSide{rep.Direct, rep.Bridged, rep.Native} {
				if s.OK != rounds*cfg.Requests || s.Failed != 0 || s.SequenceErrors != 0 || len(s.RPS) != rounds || s.MedianRPS <= 0 ||
					s.TTFF50 <= 0 || s.TTFF99 < s.TTFF50 || s.E2E50 < s.TTFF50 || s.CPUPerRequest <= 0 || s.AllocsPerRequest <= 0 || s.BytesPerRequest <= 0 {
					t.Errorf("%s: %+v", s.Name, s)
				}
			}
			// Without coalescing every upstream chunk is a frame; with it,
			// chunks that arrive while a frame is stored join the next.
			if rep.Direct.FramesPerRequest != tc.directFrames || rep.Native.FramesPerRequest != 5 ||
				(noCoalesce && rep.Bridged.FramesPerRequest != 5) || rep.Bridged.FramesPerRequest < 2 || rep.Bridged.FramesPerRequest > 5 {
				t.Errorf("frames per request: direct %v, bridged %v, native %v", rep.Direct.FramesPerRequest, rep.Bridged.FramesPerRequest, rep.Native.FramesPerRequest)
			}
			if len(rep.AddedCPUByRound) != rounds || len(rep.AddedTTFF50ByRound) != rounds || len(rep.Targets) != 2 || rep.Coalesce == noCoalesce {
				t.Errorf("report %+v", rep)
			}
			for _, suffix := range []string{"", ".direct", ".native"} {
				b, err := os.ReadFile(cfg.CPUProfile + suffix)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := profile.Parse(bytes.NewReader(b)); err != nil {
					t.Errorf("profile %s: %v", suffix, err)
				}
			}
			var out bytes.Buffer
			if err := rep.WriteText(&out); err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"e2a bench --bridge " + tc.upstream, "upstream called directly", "through the pipeline and the bridge",
				"pipeline, its own agent", "bridged − direct", "bridged − native", "added TTFF p50 (bridged − direct)"} {
				if !strings.Contains(out.String(), s) {
					t.Errorf("text report lacks %q:\n%s", s, out.String())
				}
			}
			out.Reset()
			var back BridgeReport
			if err := rep.WriteJSON(&out); err != nil || json.Unmarshal(out.Bytes(), &back) != nil || back.Bridged.OK != rep.Bridged.OK {
				t.Errorf("JSON report %v: %s", err, out.String())
			}
		})
	}
}

// TestRunBridgeRefuses: an unknown upstream, no rounds, or a request of
// one frame (no content chunk) are refused before anything starts.
func TestRunBridgeRefuses(t *testing.T) {
	cfg := DefaultConfig()
	for _, bc := range []BridgeConfig{
		{Bench: cfg, Upstream: "grpc", Rounds: 1},
		{Bench: cfg, Upstream: BridgeOpenAI, Rounds: 0},
		{Bench: func() Config { c := cfg; c.Frames = 1; return c }(), Upstream: BridgeOpenAI, Rounds: 1},
	} {
		if rep, err := RunBridge(context.Background(), bc); err == nil || rep != nil {
			t.Errorf("%+v: %v", bc, err)
		}
	}
}

// TestBridgeCPUComponent: the labelled goroutines are the upstream's and
// the load generator's; the bridge's packages and its HTTP client are the
// bridge's; its writes through the agent runtime are the agent's.
func TestBridgeCPUComponent(t *testing.T) {
	const p = "github.com/e2a-pipeline/pipeline/"
	for _, tc := range []struct {
		stack []string
		label string
		want  string
	}{
		{[]string{"syscall.write", "net/http.(*response).Flush", p + "internal/bench.(*ChatUpstream).serve"}, labelUpstream, CompUpstream},
		{[]string{"syscall.read", "net/http.(*persistConn).readLoop"}, labelLoadGen, CompLoadGen},
		{[]string{"syscall.read", "net/http.(*persistConn).readLoop"}, "", CompBridge},
		{[]string{"encoding/json.Unmarshal", p + "bridge/openai.(*turn).chunk", p + "bridge.(*Handler).Serve", p + "agent.(*worker).serve"}, "", CompBridge},
		{[]string{p + "e2a.(*Envelope).ParamString", p + "bridge/openai.UserText", p + "agent.(*worker).serve"}, "", CompBridge},
		{[]string{p + "agent.(*writer).Chunk", p + "bridge.(*countingWriter).Chunk", p + "bridge.(*Handler).Serve"}, "", CompAgent},
		{[]string{"github.com/nats-io/nats-server/v2/server.(*stream).processJetStreamMsg"}, "", CompServer},
		{[]string{"runtime.gcDrain", "runtime.gcBgMarkWorker"}, "", CompGC},
		{[]string{p + "egress.(*Service).stream"}, "", CompEgress},
	} {
		if got := bridgeCPUComponent(tc.stack, tc.label); got != tc.want {
			t.Errorf("%v (label %q): %s, want %s", tc.stack, tc.label, got, tc.want)
		}
	}
}
