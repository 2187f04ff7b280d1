package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// Issue 41's bounds, at p99: from a worker's (or e2a dev's) death to the
// first frame of each of its requests from another worker
// (RecoveryTarget), and from a serve process's death to the first frame a
// reconnected client reads from another (ServeRecoveryTarget).
const (
	RecoveryTarget      = 5 * time.Second
	ServeRecoveryTarget = time.Second
)

// Target is the p99 bound of the report's kill.
func (r *RecoveryReport) Target() time.Duration {
	if r.Config.Kill == KillServe {
		return ServeRecoveryTarget
	}
	return RecoveryTarget
}

// What RunRecovery kills (RecoveryConfig.Kill).
const (
	// KillWorker closes the NATS connection of one agent worker of several
	// in this process (the bench agent): no drain, no last frame.
	KillWorker = "worker"
	// KillAgent sends SIGKILL to one of several `e2a agent --pool demo`
	// processes.
	KillAgent = "agent"
	// KillServe sends SIGKILL to the `e2a serve` process the clients
	// stream from; each client reconnects at once to a second one with
	// Last-Event-ID.
	KillServe = "serve"
	// KillDev sends SIGKILL to `e2a dev` (its embedded server, stages and
	// demo pool) and starts it again on the same store; each client
	// reconnects to it with Last-Event-ID.
	KillDev = "dev"
)

// RecoveryKills lists the values of RecoveryConfig.Kill.
var RecoveryKills = []string{KillWorker, KillAgent, KillServe, KillDev}

// RecoveryConfig configures RunRecovery (e2a bench --recovery). Zero
// values take the defaults of DefaultRecoveryConfig.
type RecoveryConfig struct {
	// Kill is what dies: KillWorker (default), KillAgent, KillServe or
	// KillDev.
	Kill string `json:"kill"`
	// Bin is the e2a binary the process modes run (default: this
	// process's executable); Env is added to their environment (which is
	// this process's), Header to every request (e.g. E2A_API_KEYS and
	// the X-Api-Key of one of its keys).
	Bin    string      `json:"-"`
	Env    []string    `json:"-"`
	Header http.Header `json:"-"`
	// Workers of the pool, each on a NATS connection of its own (at least
	// 2 when a worker or agent process is killed: the others take its
	// requests over; KillServe runs them beside 2 serve processes; KillDev
	// runs e2a dev's own).
	Workers int `json:"workers"`
	// Requests streaming when the worker is killed.
	Requests int `json:"requests"`
	// Frames per request, the final one included (at least 5: the kill
	// comes after each request's third frame), FrameBytes of text in each
	// chunk (KillWorker's bench agent; the processes run the demo agent,
	// whose text is its own), Delay between frames.
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
	return RecoveryConfig{Kill: KillWorker, Workers: 3, Requests: 30, Frames: 44, FrameBytes: 100, Delay: 100 * time.Millisecond,
		AckWait: agent.DefaultAckWait, TCP: true, Timeout: 2 * time.Minute}
}

func (c *RecoveryConfig) defaults() error {
	d := DefaultRecoveryConfig()
	if c.Kill == "" {
		c.Kill = d.Kill
	}
	if !slices.Contains(RecoveryKills, c.Kill) {
		return fmt.Errorf("bench: recovery kill %q (want one of %s)", c.Kill, strings.Join(RecoveryKills, ", "))
	}
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
	case c.Workers < 2 && (c.Kill == KillWorker || c.Kill == KillAgent), c.Workers < 1:
		return fmt.Errorf("bench: recovery needs at least 2 workers when one is killed (1 with serve or dev), got %d", c.Workers)
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

// RecoveryReport is what RunRecovery measured. In its JSON the resume
// delays are in milliseconds (resume_*_ms), the config's durations in
// nanoseconds.
type RecoveryReport struct {
	Config RecoveryConfig `json:"config"`
	// Killed is the id of the worker killed (the one holding the most
	// requests), or "serve" or "dev"; Held the requests it held then (with
	// those, every unfinished one).
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
	// Restart is how long e2a dev took to start again (KillDev).
	Restart time.Duration `json:"restart_ns,omitempty"`
}

// Percentile returns the q-quantile (0..1) of the resume delays, by
// nearest rank as the load phases' percentiles, 0 when there are none.
func (r *RecoveryReport) Percentile(q float64) time.Duration {
	if len(r.Delays) == 0 {
		return 0
	}
	return r.Delays[rank(q, len(r.Delays))]
}

// OK reports whether every request completed exactly once, every held
// request resumed, no live worker's request moved, and the p99 resume
// delay is within Target.
func (r *RecoveryReport) OK() bool {
	return r.Complete == r.Config.Requests && r.Resumed == r.Held && r.Held > 0 && r.TakenOver == 0 &&
		len(r.Errors) == 0 && r.Percentile(0.99) <= r.Target()
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
		ms(r.Target()), r.OK()})
}

// Text is the report for a terminal.
func (r *RecoveryReport) Text() string {
	var b strings.Builder
	c := r.Config
	what, from := "another worker", "killed "+r.Killed+" (its connection closed: no drain, no last frame)"
	switch c.Kill {
	case KillWorker:
		fmt.Fprintf(&b, "e2a bench --recovery — in process (embedded JetStream, every stage, HTTP on loopback)\n")
		fmt.Fprintf(&b, "%d workers of one pool, each on its own NATS connection; ", c.Workers)
	case KillAgent:
		fmt.Fprintf(&b, "e2a bench --recovery --kill agent — e2a processes on a JetStream server in the bench's process\n")
		fmt.Fprintf(&b, "1 e2a serve, %d e2a agent --pool demo; ", c.Workers)
		from = "killed the agent process of " + r.Killed + " (SIGKILL)"
	case KillServe:
		fmt.Fprintf(&b, "e2a bench --recovery --kill serve — e2a processes on a JetStream server in the bench's process\n")
		fmt.Fprintf(&b, "2 e2a serve, %d e2a agent --pool demo; ", c.Workers)
		what, from = "the second serve process (reconnected with Last-Event-ID)", "killed the serve process the clients streamed from (SIGKILL)"
	case KillDev:
		fmt.Fprintf(&b, "e2a bench --recovery --kill dev — e2a dev (embedded JetStream, every stage, the demo pool) in its own process\n")
		what, from = "the restarted e2a dev's worker (reconnected with Last-Event-ID)", fmt.Sprintf("killed e2a dev (SIGKILL), restarted on its store in %v,", r.Restart.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "%d E2A SSE requests of %d frames %v apart; AckWait %v\n", c.Requests, c.Frames, c.Delay, c.AckWait)
	fmt.Fprintf(&b, "%s holding %d of %d requests, each at its third frame or later\n", from, r.Held, c.Requests)
	if len(r.Delays) > 0 {
		fmt.Fprintf(&b, "kill → first frame from %s, as the clients received it, %d requests: min %v, p50 %v, p99 %v, max %v\n",
			what, len(r.Delays), r.Percentile(0).Round(time.Millisecond), r.Percentile(0.5).Round(time.Millisecond),
			r.Percentile(0.99).Round(time.Millisecond), r.Percentile(1).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "resumed %d of %d held; complete %d of %d streams (every frame once, in order, one final frame)", r.Resumed, r.Held, r.Complete, c.Requests)
	if c.Kill == KillWorker || c.Kill == KillAgent {
		fmt.Fprintf(&b, "; live workers' requests taken over: %d", r.TakenOver)
	}
	b.WriteString("\n")
	for e, n := range r.Errors {
		fmt.Fprintf(&b, "  error ×%d: %s\n", n, e)
	}
	verdict := "OK"
	if !r.OK() {
		verdict = "SHORT"
	}
	fmt.Fprintf(&b, "target (issue 41): every in-flight request resumed within %v at p99, exactly once: %s\n", r.Target(), verdict)
	return b.String()
}

// recoveryFrame is one frame as a client received it.
type recoveryFrame struct {
	f *e2a.Response
	// worker wrote it (provenance.details.worker); resumed: read on a
	// connection opened after the kill.
	worker  string
	resumed bool
	at      time.Time
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
	// before is the worker of the latest frame before the kill.
	before string
}

func (s *recoveryStream) frames() []recoveryFrame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fr)
}

// recoveryRig is what RunRecovery runs the requests on and kills a part
// of.
type recoveryRig interface {
	// post is the URL requests are posted to.
	post() string
	// resume is the base URL a client whose stream broke reconnects to
	// (waiting for a restart), "" when streams are not resumed (a worker
	// kill breaks no stream), or an error for a stream that broke before
	// the kill.
	resume(ctx context.Context) (string, error)
	// params are the agent's request parameters for cfg's frames; text
	// tells whether the final frame's content is the streamed text (the
	// demo agent's).
	params(cfg RecoveryConfig) map[string]any
	text() bool
	// kill kills the worker (agent process) of that id, or the serve or
	// dev process, and starts what replaces it.
	kill(id string) error
	close()
}

// RunRecovery runs the pipeline with cfg.Workers workers of one pool (in
// this process, or as e2a processes: cfg.Kill), streams cfg.Requests
// requests, and once every request has received three frames kills what
// cfg.Kill names: the worker holding the most requests, the serve process
// they stream from, or e2a dev (started again on its store). It measures,
// from the clients, how soon each stream goes on (a frame from another
// worker, or from the other serve process after reconnecting with
// Last-Event-ID), and that every stream is still whole and exactly once.
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
	var (
		rig recoveryRig
		err error
	)
	if cfg.Kill == KillWorker {
		progress("starting the in-process pipeline")
		rig, err = startPipelineRig(ctx, cfg)
	} else {
		progress("starting the e2a processes")
		rig, err = startProcessRig(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	defer rig.close()
	hc := newHTTPClient(cfg.Requests)
	defer hc.CloseIdleConnections()

	progress(fmt.Sprintf("streaming %d requests", cfg.Requests))
	ss := make([]*recoveryStream, cfg.Requests)
	var wg sync.WaitGroup
	for i := range ss {
		s := &recoveryStream{id: fmt.Sprintf("recovery-%04d-%d", i, time.Now().UnixNano()), third: make(chan struct{})}
		ss[i] = s
		wg.Go(func() { s.run(ctx, hc, rig, cfg) })
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
	held := heldBy(ss, cfg.Kill)
	rep.Killed = victim(held, cfg)
	rep.Held = len(held[rep.Killed])
	progress(fmt.Sprintf("killing %s, which holds %d requests", rep.Killed, rep.Held))
	killed := time.Now()
	if err := rig.kill(rep.Killed); err != nil {
		cancel()
		<-ended
		return nil, err
	}
	rep.Restart = time.Since(killed)
	<-ended
	if cfg.Kill != KillDev {
		rep.Restart = 0
	}
	rep.measure(ss, held, killed)
	return rep, nil
}

// heldBy groups the unfinished streams by the worker that wrote their
// latest frame (each stream's before), or all under the kill's name for a
// serve or dev kill.
func heldBy(ss []*recoveryStream, kill string) map[string][]*recoveryStream {
	held := map[string][]*recoveryStream{}
	for _, s := range ss {
		fr := s.frames()
		if len(fr) == 0 || fr[len(fr)-1].f.IsFinal {
			continue
		}
		s.before = fr[len(fr)-1].worker
		w := s.before
		if kill == KillServe || kill == KillDev {
			w = kill
		}
		held[w] = append(held[w], s)
	}
	return held
}

// victim is the worker holding the most requests (the lowest id of
// those), or the serve or dev process.
func victim(held map[string][]*recoveryStream, cfg RecoveryConfig) string {
	if cfg.Kill == KillServe || cfg.Kill == KillDev {
		return cfg.Kill
	}
	v := workerID(0)
	for i := range cfg.Workers {
		if len(held[workerID(i)]) > len(held[v]) {
			v = workerID(i)
		}
	}
	return v
}

// measure fills the report from the streams: errors, complete streams,
// each held stream's first frame from elsewhere after the kill (another
// worker; with a serve kill, the other serve process), and the live
// workers' streams that moved.
func (r *RecoveryReport) measure(ss []*recoveryStream, held map[string][]*recoveryStream, killed time.Time) {
	for _, s := range ss {
		if s.err != nil {
			r.Errors[s.err.Error()]++
		}
		if s.complete {
			r.Complete++
		}
	}
	for w, list := range held {
		for _, s := range list {
			for _, f := range s.frames() {
				moved := f.worker != s.before
				if w == KillServe {
					moved = f.resumed
				}
				if !f.at.After(killed) || !moved {
					continue
				}
				if w == r.Killed {
					r.Resumed++
					r.Delays = append(r.Delays, f.at.Sub(killed))
				} else {
					r.TakenOver++
				}
				break
			}
		}
	}
	slices.Sort(r.Delays)
	if len(r.Errors) == 0 {
		r.Errors = nil
	}
}

func workerID(i int) string { return fmt.Sprintf("w%d", i) }

// pipelineRig is the in-process pipeline with its workers on their own
// connections (KillWorker).
type pipelineRig struct{ p *Pipeline }

func startPipelineRig(ctx context.Context, cfg RecoveryConfig) (*pipelineRig, error) {
	p, err := StartPipeline(ctx, PipelineOptions{Frames: cfg.Frames, FrameBytes: cfg.FrameBytes, Delay: cfg.Delay,
		Workers: cfg.Workers, AckWait: cfg.AckWait, TCP: cfg.TCP, AgentConcurrency: max(256, cfg.Requests)})
	if err != nil {
		return nil, err
	}
	return &pipelineRig{p}, nil
}

func (r *pipelineRig) post() string                           { return r.p.URL + PathE2A }
func (r *pipelineRig) resume(context.Context) (string, error) { return "", nil }
func (r *pipelineRig) text() bool                             { return false }
func (r *pipelineRig) close()                                 { r.p.Close() }

func (r *pipelineRig) params(cfg RecoveryConfig) map[string]any {
	return map[string]any{"frames": cfg.Frames, "frame_bytes": cfg.FrameBytes, "delay_ms": cfg.Delay.Milliseconds()}
}

func (r *pipelineRig) kill(id string) error {
	for i, nc := range r.p.Workers {
		if workerID(i) == id {
			nc.Close()
			return nil
		}
	}
	return fmt.Errorf("bench: recovery: no worker %s", id)
}

// run posts the request and reads its E2A SSE stream to the end, across
// connections when the rig resumes broken streams.
func (s *recoveryStream) run(ctx context.Context, hc *http.Client, rig recoveryRig, cfg RecoveryConfig) {
	defer s.thirdOnce.Do(func() { close(s.third) })
	err := s.read(ctx, hc, rig, cfg)
	if err == nil {
		err = s.check(cfg, rig.text())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	s.complete = err == nil
}

// read posts the request and follows its stream; when the stream breaks
// before its final frame, it reconnects where the rig says (GET
// /v1/requests/{id}/stream with Last-Event-ID), again after a short pause
// while that server does not answer yet (a restarting e2a dev).
func (s *recoveryStream) read(ctx context.Context, hc *http.Client, rig recoveryRig, cfg RecoveryConfig) error {
	body, err := json.Marshal(map[string]any{"request_id": s.id, "method": "chat.send", "params": rig.params(cfg)})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rig.post(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	var chk e2a.SequenceChecker
	done, err := s.stream(hc, req, cfg.Header, &chk, false)
	for !done && err == nil {
		base, rerr := rig.resume(ctx)
		if rerr != nil || base == "" {
			return cmp.Or(rerr, errNoFinal)
		}
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+PathE2A+"/"+s.id+"/stream", nil); err != nil {
			return err
		}
		if fr := s.frames(); len(fr) > 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatInt(fr[len(fr)-1].f.Sequence, 10))
		}
		if done, err = s.stream(hc, req, cfg.Header, &chk, true); errors.Is(err, errNotServing) {
			if err = sleepctx.Sleep(ctx, 20*time.Millisecond); err != nil {
				return fmt.Errorf("%w (resuming: %v)", err, errNotServing)
			}
		}
	}
	return err
}

// errNotServing: the server to resume on did not answer the stream (not
// up, or not ready yet).
var errNotServing = errors.New("no answer to the resumed stream")

// stream sends req and records the frames of its SSE answer until the
// final one (done) or the end of the body. A body that breaks off is not
// an error: the caller decides whether to resume. A resumed request that
// gets no answer or a 5xx is errNotServing.
func (s *recoveryStream) stream(hc *http.Client, req *http.Request, h http.Header, chk *e2a.SequenceChecker, resumed bool) (done bool, err error) {
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		if resumed && req.Context().Err() == nil {
			return false, errNotServing
		}
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 500 && resumed:
		return false, errNotServing
	case resp.StatusCode != http.StatusOK:
		return false, refusal(resp, s.id).err
	}
	var (
		ev sseEvent
		rd = bufio.NewReader(resp.Body)
	)
	for !done {
		line, rerr := readLine(rd)
		if ev.line(line) {
			if len(ev.data) > 0 || ev.event != "" {
				if done, err = s.frame(chk, ev, resumed); err != nil {
					return false, err
				}
			}
			ev.reset()
		}
		if rerr != nil {
			break
		}
	}
	return done, nil
}

// frame records one SSE event of the stream, a frame, and reports whether
// it is the final one.
func (s *recoveryStream) frame(chk *e2a.SequenceChecker, ev sseEvent, resumed bool) (final bool, err error) {
	if ev.event == "error" {
		return false, fmt.Errorf("error event: %s", ev.data)
	}
	f, err := e2a.ResponseFromJSON(ev.data)
	if err != nil {
		return false, fmt.Errorf("frame: %w", err)
	}
	if err := chk.Add(f); err != nil {
		return false, err
	}
	w, _ := f.Provenance.Details["worker"].(string)
	s.mu.Lock()
	s.fr = append(s.fr, recoveryFrame{f: f, worker: w, resumed: resumed, at: time.Now()})
	n := len(s.fr)
	s.mu.Unlock()
	if n == 3 {
		s.thirdOnce.Do(func() { close(s.third) })
	}
	return f.IsFinal, nil
}

// check verifies what the stream received: frames 0..n in order, each
// once, one final frame at the end (e2a.CheckFrames), cfg.Frames of them,
// and with text the final content equal to the text streamed.
func (s *recoveryStream) check(cfg RecoveryConfig, text bool) error {
	fr := s.frames()
	rs := make([]*e2a.Response, len(fr))
	var streamed strings.Builder
	for i, g := range fr {
		rs[i] = g.f
		if ch, err := g.f.Chunk(); err == nil && ch.DeltaKind == e2a.DeltaText {
			t, _ := ch.Delta.(string)
			streamed.WriteString(t)
		}
	}
	if err := e2a.CheckFrames(rs); err != nil {
		return err
	}
	if len(rs) != cfg.Frames {
		return fmt.Errorf("%d frames, expected %d", len(rs), cfg.Frames)
	}
	if text {
		done, err := rs[len(rs)-1].Complete()
		if err != nil {
			return err
		}
		if content, _ := done.Result.(map[string]any)["content"].(string); content != streamed.String() {
			return fmt.Errorf("final content %q, text streamed %q", content, streamed.String())
		}
	}
	return nil
}

var _ json.Marshaler = (*RecoveryReport)(nil)
