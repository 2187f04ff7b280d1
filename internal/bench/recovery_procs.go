package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
)

// processRig is e2a processes on a JetStream server embedded in this
// process (KillAgent, KillServe): one `e2a serve` (two with KillServe) and
// cfg.Workers `e2a agent --pool demo` processes, worker i with the id w<i>.
type processRig struct {
	emb    *streams.Embedded
	nc     *nats.Conn
	serves []*stageProc
	agents map[string]*stageProc
	kind   string
}

// recoveryPool is the pool the process modes run: the demo agent, which
// resumes after the last stored frame.
const recoveryPool = "demo"

func startProcessRig(ctx context.Context, cfg RecoveryConfig) (_ *processRig, err error) {
	bin := cfg.Bin
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	r := &processRig{agents: map[string]*stageProc{}, kind: cfg.Kill}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	var js jetstream.JetStream
	if r.emb, r.nc, js, err = startStreamsServer(ctx); err != nil {
		return nil, err
	}
	env := []string{"E2A_NATS_URL=" + r.emb.ClientURL(), "E2A_HTTP_ADDR=127.0.0.1:0", "E2A_LOG_FORMAT=json", "E2A_LOG_LEVEL=info", "E2A_METRICS_ADDR="}
	serves := 1
	if cfg.Kill == KillServe {
		serves = 2
	}
	for range serves {
		p, err := startStage(ctx, bin, env, "serving", "addr", "serve")
		if err != nil {
			return nil, err
		}
		r.serves = append(r.serves, p)
	}
	for i := range cfg.Workers {
		p, err := startStage(ctx, bin, append(env, "E2A_AGENT_WORKER_ID="+workerID(i), "E2A_AGENT_ACK_WAIT="+cfg.AckWait.String()),
			"agent pool running", "ops", "agent", "--pool", recoveryPool, "--concurrency", strconv.Itoa(max(64, cfg.Requests)))
		if err != nil {
			return nil, err
		}
		r.agents[workerID(i)] = p
	}
	hc := newHTTPClient(4)
	defer hc.CloseIdleConnections()
	for _, p := range r.procs() {
		if err := p.waitReady(ctx, hc); err != nil {
			return nil, err
		}
	}
	return r, waitConsumer(ctx, js, recoveryPool)
}

func (r *processRig) procs() []*stageProc {
	ps := append([]*stageProc{}, r.serves...)
	for _, p := range r.agents {
		ps = append(ps, p)
	}
	return ps
}

func (r *processRig) post() string {
	return "http://" + r.serves[0].addr + PathE2A + "?agent=" + recoveryPool
}

func (r *processRig) resume() string {
	if len(r.serves) < 2 {
		return ""
	}
	return "http://" + r.serves[1].addr
}

// params: the demo agent writes 4 frames around its text frames.
func (r *processRig) params(cfg RecoveryConfig) map[string]any {
	return map[string]any{"text": "recovery", "frames": cfg.Frames - 4, "delay_ms": cfg.Delay.Milliseconds()}
}

// kill sends SIGKILL to the agent process of that worker id, or with
// KillServe to the serve process the clients stream from, and reaps it.
func (r *processRig) kill(id string) error {
	p := r.agents[id]
	if r.kind == KillServe {
		p = r.serves[0]
	}
	if p == nil {
		return fmt.Errorf("bench: recovery: no process %s", id)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	_ = p.cmd.Wait() // killed: its exit status says so
	return nil
}

func (r *processRig) close() {
	for _, p := range r.procs() {
		if p.cmd.ProcessState == nil {
			p.stop()
		}
	}
	if r.nc != nil {
		r.nc.Close()
	}
	if r.emb != nil {
		r.emb.Shutdown()
	}
}

// startStreamsServer starts a JetStream server in this process with the
// E2A streams (one replica, the defaults) for e2a processes to run on.
func startStreamsServer(ctx context.Context) (*streams.Embedded, *nats.Conn, jetstream.JetStream, error) {
	emb, err := streams.StartEmbedded(streams.EmbeddedOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	nc, err := emb.Connect()
	if err != nil {
		emb.Shutdown()
		return nil, nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		scfg := streams.DefaultConfig()
		scfg.Replicas = 1
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var rep streams.Report
		rep, err = streams.Apply(actx, js, scfg)
		cancel()
		if err != nil {
			err = fmt.Errorf("bench: provision streams: %w\n%s", err, rep)
		}
	}
	if err != nil {
		nc.Close()
		emb.Shutdown()
		return nil, nil, nil, err
	}
	return emb, nc, js, nil
}
