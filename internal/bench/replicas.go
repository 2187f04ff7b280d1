package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ReplicasConfig is a scaling run: N `e2a serve` and N `e2a agent --pool
// demo` processes of the built binary on one JetStream server, for each N.
type ReplicasConfig struct {
	// Bench is the load of each N (Protocol, Requests, Concurrency,
	// Frames, FrameBytes, Timeout, Warmup).
	Bench Config
	// Replicas are the N to run, in order (e.g. 1, 2, 3).
	Replicas []int
	// Bin is the e2a executable (default: this process's).
	Bin string
}

// ReplicasRow is one N's figures.
type ReplicasRow struct {
	N      int     `json:"replicas"`
	RPS    float64 `json:"requests_per_s"`
	Ratio  float64 `json:"ratio_to_first"`
	TTFF50 float64 `json:"ttff_p50_ms"`
	TTFF99 float64 `json:"ttff_p99_ms"`
	OK     int     `json:"ok"`
	Failed int     `json:"failed"`
	// CPU per request (ms) of the serve processes, the agent processes,
	// and this process (the JetStream server and the load generator).
	CPUServe float64 `json:"cpu_ms_per_request_serve"`
	CPUAgent float64 `json:"cpu_ms_per_request_agent"`
	CPUBench float64 `json:"cpu_ms_per_request_nats_and_generator"`
	// PeakRSSServe and PeakRSSAgent are the largest peak resident set
	// (VmHWM, MiB) of a serve and of an agent process over the N's run.
	PeakRSSServe float64 `json:"peak_rss_mib_serve"`
	PeakRSSAgent float64 `json:"peak_rss_mib_agent"`
	// Rates are the open-loop phases at the bench's fixed rates (--rates),
	// run after the closed loop on the same processes.
	Rates []ReplicasRate `json:"rates,omitempty"`
}

// ReplicasRate is one open-loop phase of an N: latencies at a fixed
// offered rate, counted from the instant each request was due.
type ReplicasRate struct {
	Offered float64     `json:"offered_rps"`
	RPS     float64     `json:"requests_per_s"`
	OK      int         `json:"ok"`
	Failed  int         `json:"failed"`
	TTFF    Percentiles `json:"ttff"`
	// CPU per request (ms) of the serve and agent processes.
	CPUServe float64 `json:"cpu_ms_per_request_serve"`
	CPUAgent float64 `json:"cpu_ms_per_request_agent"`
}

// ReplicasReport is the scaling curve.
type ReplicasReport struct {
	Machine  Machine       `json:"machine"`
	Protocol string        `json:"protocol"`
	Requests int           `json:"requests_per_n"`
	Clients  int           `json:"clients"`
	Rows     []ReplicasRow `json:"rows"`
}

// RunReplicas measures how requests/s grows with the number of stage
// processes: for each N of rc.Replicas it starts N serve and N agent
// processes of rc.Bin against one embedded JetStream server in this
// process (streams provisioned once), waits for them to be ready, drives
// the N serve endpoints with the load generator (clients spread over them
// round-robin), reads each process's CPU time from /proc, and stops them.
func RunReplicas(ctx context.Context, rc ReplicasConfig) (*ReplicasReport, error) {
	cfg := rc.Bench
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if len(rc.Replicas) == 0 {
		return nil, errors.New("bench: --replicas needs at least one N")
	}
	for _, n := range rc.Replicas {
		if n < 1 || n > 32 {
			return nil, fmt.Errorf("bench: replicas must be 1..32, got %d", n)
		}
	}
	bin := rc.Bin
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
	}
	emb, nc, _, err := startStreamsServer(ctx)
	if err != nil {
		return nil, err
	}
	defer emb.Shutdown()
	defer nc.Close()
	out := &ReplicasReport{Machine: machine(), Protocol: cfg.Protocol, Requests: cfg.Requests, Clients: cfg.Concurrency}
	ids := &idGen{prefix: "replicas-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	hc := newHTTPClient(max(cfg.Concurrency, 64) * 4)
	for _, n := range rc.Replicas {
		progress(fmt.Sprintf("replicas %d: starting %d serve and %d agent processes", n, n, n))
		row, err := runReplicasN(ctx, cfg, bin, emb.ClientURL(), n, ids, hc, progress)
		if err != nil {
			return out, err
		}
		if len(out.Rows) > 0 && out.Rows[0].RPS > 0 {
			row.Ratio = row.RPS / out.Rows[0].RPS
		} else {
			row.Ratio = 1
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

// runReplicasN measures N serve and N agent processes: a warm-up, the
// closed loop, the open loops at the fixed rates, then the processes' peak
// memory.
func runReplicasN(ctx context.Context, cfg Config, bin, natsURL string, n int, ids *idGen, hc *http.Client, progress func(string)) (ReplicasRow, error) {
	row := ReplicasRow{N: n}
	rs := &replicaSet{cfg: cfg, n: n, ids: ids}
	defer rs.stop()
	if err := rs.start(ctx, bin, natsURL, hc); err != nil {
		return row, err
	}
	if cfg.Warmup > 0 {
		progress(fmt.Sprintf("replicas %d: warm-up, %d requests", n, cfg.Warmup))
		if w := closedLoop(ctx, "warmup", cfg.Warmup, cfg.Concurrency, ids, rs.do, false, false); w.OK == 0 {
			return row, fmt.Errorf("bench: every warm-up request failed with %d replicas: %v", n, w.Errors)
		}
	}
	progress(fmt.Sprintf("replicas %d: %d requests, %d clients, %s", n, cfg.Requests, cfg.Concurrency, cfg.Protocol))
	if err := rs.closedLoop(ctx, &row); err != nil {
		return row, err
	}
	for _, rate := range cfg.Rates {
		m := max(int(rate*cfg.SweepSeconds), 200)
		progress(fmt.Sprintf("replicas %d: open loop, %.0f requests/s, %d requests", n, rate, m))
		if err := rs.openLoop(ctx, &row, rate, m); err != nil {
			return row, err
		}
	}
	return row, rs.peakRSS(&row)
}

// replicaSet is one N's stage processes and the clients of its serve
// processes.
type replicaSet struct {
	cfg     Config
	n       int
	ids     *idGen
	procs   []*stageProc
	clients []*client
	// next spreads the requests over clients, round-robin.
	next atomic.Uint64
}

// start starts N serve and N agent (pool demo) processes on the server at
// natsURL and waits until each is ready; stop stops those started.
func (rs *replicaSet) start(ctx context.Context, bin, natsURL string, hc *http.Client) error {
	env := []string{"E2A_NATS_URL=" + natsURL, "E2A_HTTP_ADDR=127.0.0.1:0", "E2A_LOG_FORMAT=json", "E2A_LOG_LEVEL=info", "E2A_METRICS_ADDR="}
	for range rs.n {
		s, err := startStage(ctx, bin, env, "serving", "addr", "serve")
		if err != nil {
			return err
		}
		rs.procs = append(rs.procs, s)
		a, err := startStage(ctx, bin, env, "agent pool running", "ops", "agent", "--pool", "demo", "--concurrency", "256")
		if err != nil {
			return err
		}
		rs.procs = append(rs.procs, a)
	}
	for _, p := range rs.procs {
		if err := p.waitReady(ctx, hc); err != nil {
			return err
		}
	}
	cfg := rs.cfg
	for _, p := range rs.procs {
		if p.role == "serve" {
			rs.clients = append(rs.clients, &client{base: "http://" + p.addr, proto: cfg.Protocol, hc: hc,
				params:   map[string]any{"text": payload(cfg.FrameBytes), "frames": max(cfg.Frames-4, 0), "delay_ms": 0},
				sessions: make(chan string, 8*max(cfg.Concurrency, 64))})
		}
	}
	return nil
}

func (rs *replicaSet) stop() {
	for _, p := range rs.procs {
		p.stop()
	}
}

// do sends request id to the next serve process.
func (rs *replicaSet) do(ctx context.Context, id string, start time.Time) result {
	ctx, cancel := context.WithTimeout(ctx, rs.cfg.Timeout)
	defer cancel()
	return rs.clients[int(rs.next.Add(1))%len(rs.clients)].do(ctx, id, start)
}

// cpuMarks reads each process's CPU time so far.
func (rs *replicaSet) cpuMarks() map[*stageProc]time.Duration {
	cpu0 := map[*stageProc]time.Duration{}
	for _, p := range rs.procs {
		cpu0[p], _ = procCPU(p.cmd.Process.Pid)
	}
	return cpu0
}

// closedLoop runs Requests in a closed loop into row: requests/s, TTFF and
// the CPU per request of the serve processes, the agent processes and
// this one. Failed requests fail it.
func (rs *replicaSet) closedLoop(ctx context.Context, row *ReplicasRow) error {
	cfg := rs.cfg
	cpu0 := rs.cpuMarks()
	bench0 := processCPU()
	ph := closedLoop(ctx, fmt.Sprintf("replicas-%d", rs.n), cfg.Requests, cfg.Concurrency, rs.ids, rs.do, false, false)
	benchCPU := processCPU() - bench0
	serveCPU, agentCPU, err := stagesCPU(rs.procs, cpu0)
	if err != nil {
		return err
	}
	row.RPS, row.OK, row.Failed = ph.RPS, ph.OK, ph.Failed
	row.TTFF50, row.TTFF99 = ph.TTFF.P50, ph.TTFF.P99
	if ph.OK > 0 {
		row.CPUServe, row.CPUAgent, row.CPUBench = perRequest(serveCPU, ph.OK), perRequest(agentCPU, ph.OK), perRequest(benchCPU, ph.OK)
	}
	if ph.Failed > 0 {
		return fmt.Errorf("bench: %d failed requests with %d replicas: %v", ph.Failed, rs.n, ph.Errors)
	}
	return nil
}

// openLoop runs m requests at rate into a row of row.Rates. Failed
// requests fail it.
func (rs *replicaSet) openLoop(ctx context.Context, row *ReplicasRow, rate float64, m int) error {
	cpu0 := rs.cpuMarks()
	op := openLoop(ctx, fmt.Sprintf("replicas-%d-%.0f/s", rs.n, rate), m, rate, max(4*rs.cfg.Concurrency, 256), rs.ids, rs.do)
	serveCPU, agentCPU, err := stagesCPU(rs.procs, cpu0)
	if err != nil {
		return err
	}
	rr := ReplicasRate{Offered: rate, RPS: op.RPS, OK: op.OK, Failed: op.Failed, TTFF: op.TTFF}
	if op.OK > 0 {
		rr.CPUServe, rr.CPUAgent = perRequest(serveCPU, op.OK), perRequest(agentCPU, op.OK)
	}
	row.Rates = append(row.Rates, rr)
	if op.Failed > 0 {
		return fmt.Errorf("bench: %d failed requests at %.0f requests/s with %d replicas: %v", op.Failed, rate, rs.n, op.Errors)
	}
	return nil
}

// peakRSS sets row's largest peak resident set of a serve and of an agent
// process.
func (rs *replicaSet) peakRSS(row *ReplicasRow) error {
	for _, p := range rs.procs {
		b, err := procPeakRSS(p.cmd.Process.Pid)
		if err != nil {
			return err
		}
		mib := float64(b) / (1 << 20)
		if p.role == "serve" {
			row.PeakRSSServe = max(row.PeakRSSServe, mib)
		} else {
			row.PeakRSSAgent = max(row.PeakRSSAgent, mib)
		}
	}
	return nil
}

// stagesCPU sums the CPU time of the serve and of the agent processes
// since cpu0.
func stagesCPU(procs []*stageProc, cpu0 map[*stageProc]time.Duration) (serve, agent time.Duration, err error) {
	for _, p := range procs {
		c, err := procCPU(p.cmd.Process.Pid)
		if err != nil {
			return 0, 0, err
		}
		if p.role == "serve" {
			serve += c - cpu0[p]
		} else {
			agent += c - cpu0[p]
		}
	}
	return serve, agent, nil
}

// perRequest is d in ms per request of n.
func perRequest(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Millisecond) / float64(n)
}

// stageProc is one running stage process.
type stageProc struct {
	cmd  *exec.Cmd
	role string // serve or agent
	addr string // its HTTP listener (serve: the API; agent: ops)
	logs *tail
}

// startStage starts bin with args and env, and reads its JSON log on
// stderr until the line whose msg is ready names its listener in field.
func startStage(ctx context.Context, bin string, env []string, ready, field string, args ...string) (*stageProc, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s %s: %w", bin, args[0], err)
	}
	p := &stageProc{cmd: cmd, role: args[0], logs: &tail{}}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logs.add(line)
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == ready {
				if a, ok := m[field].(string); ok {
					select {
					case found <- a:
					default:
					}
				}
			}
		}
		close(found)
	}()
	select {
	case a, ok := <-found:
		if !ok {
			p.stop()
			return nil, fmt.Errorf("bench: %s exited before it was ready:\n%s", args[0], p.logs)
		}
		p.addr = a
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("bench: %s did not start within 30 s:\n%s", args[0], p.logs)
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
	return p, nil
}

// waitReady polls the process's /readyz until it answers 200 "ready"
// (not "degraded": JetStream answering too).
func (p *stageProc) waitReady(ctx context.Context, hc *http.Client) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"status":"ready"`) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s at %s not ready within 30 s:\n%s", p.role, p.addr, p.logs)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop asks the process to stop (SIGTERM), and kills it after 5 s.
func (p *stageProc) stop() {
	terminate(p.cmd)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// tail keeps the last lines of a process's log, for error reports.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 20 {
		t.lines = t.lines[1:]
	}
	t.lines = append(t.lines, l)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// WriteText prints the scaling curve.
func (r *ReplicasReport) WriteText(w io.Writer) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "e2a bench --replicas: %s, %d requests per N, %d clients, N serve + N agent processes on one JetStream server\n", r.Protocol, r.Requests, r.Clients)
	fmt.Fprintf(&b, "machine: %s, %d CPUs (GOMAXPROCS %d), %s/%s, %s\n\n", m.CPU, m.NumCPU, m.GOMAXPROCS, m.OS, m.Arch, m.Go)
	fmt.Fprintf(&b, "  %3s %8s %7s %9s %9s %10s %10s %16s %10s %10s\n", "N", "req/s", "÷ N=1", "TTFF p50", "TTFF p99", "CPU serve", "CPU agent", "CPU NATS+loadgen", "RSS serve", "RSS agent")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "  %3d %8.0f %6.2f× %9.2f %9.2f %10.3f %10.3f %16.3f %10.1f %10.1f\n", row.N, row.RPS, row.Ratio, row.TTFF50, row.TTFF99,
			row.CPUServe, row.CPUAgent, row.CPUBench, row.PeakRSSServe, row.PeakRSSAgent)
	}
	b.WriteString("  (latencies in ms; CPU in ms per request, summed over the processes of each kind; RSS: the largest peak of a process of the kind, MiB)\n")
	for i, row := range r.Rows {
		if i == 0 && len(row.Rates) > 0 {
			fmt.Fprintf(&b, "\nopen loop at fixed rates (latencies from the instant each request was due):\n")
			fmt.Fprintf(&b, "  %3s %8s %8s %7s %9s %9s %9s %10s %10s\n", "N", "offered", "req/s", "failed", "TTFF p50", "TTFF p99", "p99.9", "CPU serve", "CPU agent")
		}
		for _, rr := range row.Rates {
			fmt.Fprintf(&b, "  %3d %8.0f %8.0f %7d %9.2f %9.2f %9.2f %10.3f %10.3f\n", row.N, rr.Offered, rr.RPS, rr.Failed,
				rr.TTFF.P50, rr.TTFF.P99, rr.TTFF.P999, rr.CPUServe, rr.CPUAgent)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the scaling curve as JSON.
func (r *ReplicasReport) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}
