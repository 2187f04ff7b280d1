package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// recording is an http.RoundTripper that sends each request to the real
// endpoint and keeps the last answer's header and body, so that a
// benchmark can read a real answer again without the pipeline's work.
type recording struct {
	mu     sync.Mutex
	header http.Header
	body   []byte
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.header, r.body = resp.Header.Clone(), b
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// replaying answers every request with the recorded answer.
type replaying struct{ rec *recording }

func (r replaying) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: r.rec.header, Body: io.NopCloser(bytes.NewReader(r.rec.body)),
		Request: req}, nil
}

var (
	_ http.RoundTripper = (*recording)(nil)
	_ http.RoundTripper = replaying{}
)

// BenchmarkClientRead measures the load generator's reading of one answer
// (client.read: the frames split, classified and sequence-checked), per
// protocol, on an answer the in-process pipeline wrote (8 frames of 100
// B), recorded once and replayed from memory so that only the client's
// work is counted: its allocations per answer must not grow, since the
// harness shares the machine with the pipeline it measures
// (go test -run '^$' -bench ClientRead -benchmem ./internal/bench).
func BenchmarkClientRead(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pipe, err := StartPipeline(ctx, PipelineOptions{Frames: 8, FrameBytes: 100, AgentConcurrency: 16})
	if err != nil {
		b.Fatal(err)
	}
	defer pipe.Close()
	for _, proto := range Protocols {
		b.Run(proto, func(b *testing.B) {
			rec := &recording{}
			cl := &client{base: pipe.URL, proto: proto, hc: &http.Client{Transport: rec}, sessions: make(chan string, 1),
				params:       map[string]any{"text": "bench", "frames": 8, "frame_bytes": 100},
				expectFrames: 8}
			if res := cl.do(ctx, "bench-read-"+proto, time.Now()); res.err != nil || res.seqErr != nil {
				b.Fatalf("recording a request: %v %v", res.err, res.seqErr)
			}
			cl.hc = &http.Client{Transport: replaying{rec}}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, pipe.URL+PathE2A, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res := cl.read(req, "bench-read-"+proto, time.Now(), proto); res.err != nil || res.seqErr != nil {
					b.Fatalf("read: %v %v", res.err, res.seqErr)
				}
			}
		})
	}
}
