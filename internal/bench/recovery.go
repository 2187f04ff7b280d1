package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
)

// RecoveryTarget is issue 41's bound on the time from a worker's death to
// the first frame of each of its requests from another worker, at p99.
const RecoveryTarget = 5 * time.Second

// RecoveryConfig configures RunRecovery (e2a bench --recovery). Zero
// numbers and durations take the defaults of DefaultRecoveryConfig.
type RecoveryConfig struct {
	// Workers of the bench pool, each on a NATS connection of its own
	// (at least 2: one is killed, the others take its requests over).
	Workers int `json:"workers"`
	// Requests streaming when the worker is killed.
	Requests int `json:"requests"`
	// Frames per request, the final one included (at least 5: the kill
	// comes after each request's third frame), FrameBytes of text in each
	// chunk, Delay between frames.
	Frames     int           `json:"frames"`
	FrameBytes int           `json:"frame_bytes"`
	Delay      time.Duration `json:"delay_ns"`
	// AckWait of the pool (0: agent.DefaultAckWait): how long a dead
	// worker's request waits for its redelivery.
	AckWait time.Duration `json:"ack_wait_ns"`
	// TCP connects the stages and workers over loopback TCP (as in a
	// deployment) instead of in-process pipes. DefaultRecoveryConfig sets
	// it; a zero RecoveryConfig does not.
	TCP bool `json:"tcp"`
	// Timeout bounds the whole run (default 2 minutes).
	Timeout time.Duration `json:"-"`
	// Progress, when set, receives a line per phase.
	Progress func(string) `json:"-"`
}

// DefaultRecoveryConfig is the scenario of docs/recovery.md's worker
// kill: 3 workers, 30 requests of 44 frames 100 ms apart.
func DefaultRecoveryConfig() RecoveryConfig {
	return RecoveryConfig{Workers: 3, Requests: 30, Frames: 44, FrameBytes: 100, Delay: 100 * time.Millisecond,
		AckWait: agent.DefaultAckWait, TCP: true, Timeout: 2 * time.Minute}
}

func (c *RecoveryConfig) defaults() error {
	d := DefaultRecoveryConfig()
	for _, f := range []struct {
		v   *int
		def int
	}{{&c.Workers, d.Workers}, {&c.Requests, d.Requests}, {&c.Frames, d.Frames}, {&c.FrameBytes, d.FrameBytes}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.Delay, d.Delay}, {&c.AckWait, d.AckWait}, {&c.Timeout, d.Timeout}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case c.Workers < 2:
		return fmt.Errorf("bench: recovery needs at least 2 workers (one is killed), got %d", c.Workers)
	case c.Requests < 1 || c.Requests > 10000:
		return fmt.Errorf("bench: recovery requests %d (want 1..10000)", c.Requests)
	case c.Frames < 5 || c.Frames > 10000:
		return fmt.Errorf("bench: recovery frames %d (want 5..10000: the kill comes after each request's third frame)", c.Frames)
	case c.Delay < 10*time.Millisecond || c.Delay > time.Minute:
		return fmt.Errorf("bench: recovery delay %v (want 10ms..1m: the requests must still stream when the worker dies)", c.Delay)
	case c.AckWait < time.Second:
		return fmt.Errorf("bench: recovery ack wait %v (want at least 1s, as agent.WithAckWait)", c.AckWait)
	}
	return nil
}

// RecoveryReport is what RunRecovery measured. Durations are in
// milliseconds in its JSON.
type RecoveryReport struct {
	Config RecoveryConfig `json:"config"`
	// Killed is the id of the worker killed (the one holding the most
	// requests), Held the requests it held then.
	Killed string `json:"killed"`
	Held   int    `json:"held"`
	// Resumed counts the held requests whose stream got a frame from
	// another worker after the kill; Delays (sorted) are, for each, the
	// time from the kill to that first frame as the client received it.
	Resumed int             `json:"resumed"`
	Delays  []time.Duration `json:"-"`
	// Complete counts the streams that delivered every frame once, in
	// order, ending with the final one.
	Complete int `json:"complete"`
	// TakenOver counts the live workers' requests that another worker
	// wrote to after the kill (none: only a dead worker's requests move).
	TakenOver int            `json:"taken_over"`
	Errors    map[string]int `json:"errors,omitempty"`
}

// Percentile returns the q-quantile (0..1) of the resume delays, 0 when
// there are none.
func (r *RecoveryReport) Percentile(q float64) time.Duration {
	if len(r.Delays) == 0 {
		return 0
	}
	return r.Delays[min(len(r.Delays)-1, int(q*float64(len(r.Delays))))]
}

// OK reports whether every request completed exactly once, every held
// request resumed, no live worker's request moved, and the p99 resume
// delay is within RecoveryTarget.
func (r *RecoveryReport) OK() bool {
	return r.Complete == r.Config.Requests && r.Resumed == r.Held && r.Held > 0 && r.TakenOver == 0 &&
		len(r.Errors) == 0 && r.Percentile(0.99) <= RecoveryTarget
}

// MarshalJSON adds the percentiles, in milliseconds.
func (r *RecoveryReport) MarshalJSON() ([]byte, error) {
	type plain RecoveryReport
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return json.Marshal(struct {
		*plain
		MinMs    float64 `json:"resume_min_ms"`
		P50Ms    float64 `json:"resume_p50_ms"`
		P99Ms    float64 `json:"resume_p99_ms"`
		MaxMs    float64 `json:"resume_max_ms"`
		TargetMs float64 `json:"target_p99_ms"`
		OK       bool    `json:"ok"`
	}{(*plain)(r), ms(r.Percentile(0)), ms(r.Percentile(0.5)), ms(r.Percentile(0.99)), ms(r.Percentile(1)),
		ms(RecoveryTarget), r.OK()})
}

// Text is the report for a terminal.
func (r *RecoveryReport) Text() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "e2a bench --recovery — in process (embedded JetStream, every stage, HTTP on loopback)\n")
	fmt.Fprintf(&b, "%d workers of one pool, each on its own NATS connection; %d E2A SSE requests of %d frames %v apart; AckWait %v\n",
		c.Workers, c.Requests, c.Frames, c.Delay, c.AckWait)
	fmt.Fprintf(&b, "killed %s (its connection closed: no drain, no last frame) holding %d of %d requests, each at its third frame or later\n",
		r.Killed, r.Held, c.Requests)
	if len(r.Delays) > 0 {
		fmt.Fprintf(&b, "kill → first frame from another worker, as the clients received it, %d requests: min %v, p50 %v, p99 %v, max %v\n",
			len(r.Delays), r.Percentile(0).Round(time.Millisecond), r.Percentile(0.5).Round(time.Millisecond),
			r.Percentile(0.99).Round(time.Millisecond), r.Percentile(1).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "resumed %d of %d held; complete %d of %d streams (every frame once, in order, one final frame); live workers' requests taken over: %d\n",
		r.Resumed, r.Held, r.Complete, c.Requests, r.TakenOver)
	for e, n := range r.Errors {
		fmt.Fprintf(&b, "  error ×%d: %s\n", n, e)
	}
	verdict := "OK"
	if !r.OK() {
		verdict = "SHORT"
	}
	fmt.Fprintf(&b, "target (issue 41): every in-flight request resumed within %v at p99, exactly once: %s\n", RecoveryTarget, verdict)
	return b.String()
}

// recoveryFrame is one frame as a client received it.
type recoveryFrame struct {
	seq    int64
	final  bool
	worker string
	at     time.Time
}

// recoveryStream reads one request's E2A SSE stream.
type recoveryStream struct {
	id string
	mu sync.Mutex
	fr []recoveryFrame
	// third is closed when the stream has received its third frame or
	// ended.
	third     chan struct{}
	thirdOnce sync.Once
	err       error
	complete  bool
}

func (s *recoveryStream) frames() []recoveryFrame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fr)
}

// RunRecovery starts the in-process pipeline with cfg.Workers workers of
// the bench pool, streams cfg.Requests requests, kills the worker that
// holds the most of them once every request has received three frames,
// and measures, from the clients, how soon each of its requests goes on
// with another worker, and that every stream is still whole and exactly
// once.
func RunRecovery(ctx context.Context, cfg RecoveryConfig) (*RecoveryReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	progress("starting the in-process pipeline")
	p, err := StartPipeline(ctx, PipelineOptions{Frames: cfg.Frames, FrameBytes: cfg.FrameBytes, Delay: cfg.Delay,
		Workers: cfg.Workers, AckWait: cfg.AckWait, TCP: cfg.TCP, AgentConcurrency: max(256, cfg.Requests)})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	hc := newHTTPClient(cfg.Requests)
	defer hc.CloseIdleConnections()

	progress(fmt.Sprintf("streaming %d requests", cfg.Requests))
	ss := make([]*recoveryStream, cfg.Requests)
	var wg sync.WaitGroup
	for i := range ss {
		s := &recoveryStream{id: fmt.Sprintf("recovery-%04d", i), third: make(chan struct{})}
		ss[i] = s
		wg.Go(func() { s.run(ctx, hc, p.URL, cfg) })
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	for _, s := range ss {
		select {
		case <-s.third:
		case <-ctx.Done():
			cancel()
			<-ended
			return nil, fmt.Errorf("bench: recovery: the requests did not all start streaming: %w", ctx.Err())
		}
	}

	rep := &RecoveryReport{Config: cfg, Errors: map[string]int{}}
	held := map[string][]*recoveryStream{}
	for _, s := range ss {
		if fr := s.frames(); len(fr) > 0 && !fr[len(fr)-1].final {
			w := fr[len(fr)-1].worker
			held[w] = append(held[w], s)
		}
	}
	victim := 0
	for i := range p.Workers {
		if len(held[workerID(i)]) > len(held[workerID(victim)]) {
			victim = i
		}
	}
	rep.Killed, rep.Held = workerID(victim), len(held[workerID(victim)])
	progress(fmt.Sprintf("killing %s, which holds %d requests", rep.Killed, rep.Held))
	killed := time.Now()
	p.Workers[victim].Close()
	<-ended

	for _, s := range ss {
		if s.err != nil {
			rep.Errors[s.err.Error()]++
		}
		if s.complete {
			rep.Complete++
		}
	}
	for w, list := range held {
		for _, s := range list {
			for _, f := range s.frames() {
				if !f.at.After(killed) {
					continue
				}
				if w == rep.Killed && f.worker != w {
					rep.Resumed++
					rep.Delays = append(rep.Delays, f.at.Sub(killed))
					break
				}
				if w != rep.Killed && f.worker != w {
					rep.TakenOver++
					break
				}
			}
		}
	}
	slices.Sort(rep.Delays)
	if len(rep.Errors) == 0 {
		rep.Errors = nil
	}
	return rep, nil
}

func workerID(i int) string { return fmt.Sprintf("w%d", i) }

// run posts the request and reads its E2A SSE stream to the end.
func (s *recoveryStream) run(ctx context.Context, hc *http.Client, base string, cfg RecoveryConfig) {
	defer s.thirdOnce.Do(func() { close(s.third) })
	err := s.read(ctx, hc, base, cfg)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	if err == nil {
		s.complete = true
	}
}

func (s *recoveryStream) read(ctx context.Context, hc *http.Client, base string, cfg RecoveryConfig) error {
	body, err := json.Marshal(map[string]any{"request_id": s.id, "method": "chat.send",
		"params": map[string]any{"text": "recovery", "frames": cfg.Frames, "frame_bytes": cfg.FrameBytes, "delay_ms": cfg.Delay.Milliseconds()}})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+PathE2A, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return refusal(resp, s.id).err
	}
	var (
		chk  e2a.SequenceChecker
		ev   sseEvent
		rd   = bufio.NewReader(resp.Body)
		done bool
	)
	for !done {
		line, rerr := readLine(rd)
		if ev.line(line) {
			if len(ev.data) > 0 || ev.event != "" {
				final, err := s.frame(&chk, ev)
				if err != nil {
					return err
				}
				done = final
			}
			ev.reset()
		}
		if rerr != nil {
			break
		}
	}
	switch fr := s.frames(); {
	case !done:
		return errNoFinal
	case len(fr) != cfg.Frames:
		return fmt.Errorf("%d frames, expected %d", len(fr), cfg.Frames)
	}
	return nil
}

// frame records one SSE event of the stream, a frame, and reports whether
// it is the final one.
func (s *recoveryStream) frame(chk *e2a.SequenceChecker, ev sseEvent) (final bool, err error) {
	if ev.event == "error" {
		return false, fmt.Errorf("error event: %s", ev.data)
	}
	var f struct {
		Sequence   int64 `json:"sequence"`
		IsFinal    bool  `json:"is_final"`
		Provenance struct {
			Details struct {
				Worker string `json:"worker"`
			} `json:"details"`
		} `json:"provenance"`
	}
	if err := json.Unmarshal(ev.data, &f); err != nil {
		return false, fmt.Errorf("frame: %w", err)
	}
	if err := chk.Add(&e2a.Response{RequestID: s.id, Sequence: f.Sequence, IsFinal: f.IsFinal}); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.fr = append(s.fr, recoveryFrame{seq: f.Sequence, final: f.IsFinal, worker: f.Provenance.Details.Worker, at: time.Now()})
	n := len(s.fr)
	s.mu.Unlock()
	if n == 3 {
		s.thirdOnce.Do(func() { close(s.third) })
	}
	return f.IsFinal, nil
}

var _ json.Marshaler = (*RecoveryReport)(nil)
