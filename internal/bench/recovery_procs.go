package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
)

// processRig is e2a processes: on a JetStream server embedded in this
// process (KillAgent, KillServe), one `e2a serve` (two with KillServe) and
// cfg.Workers `e2a agent --pool demo` processes, worker i with the id w<i>;
// or one `e2a dev` on a store of its own (KillDev).
type processRig struct {
	emb    *streams.Embedded
	nc     *nats.Conn
	serves []*stageProc // with KillDev, the dev processes, the running one last
	agents map[string]*stageProc
	kind   string
	// dev: e2a dev's command line, to start it again after the kill.
	bin string
	env []string
	// killed is closed at the kill, restarted once what replaces the
	// killed process serves (at once with KillServe).
	killed, restarted chan struct{}
	store             string
}

// recoveryPool is the pool the process modes run: the demo agent, which
// resumes after the last stored frame.
const recoveryPool = "demo"

func startProcessRig(ctx context.Context, cfg RecoveryConfig) (_ *processRig, err error) {
	r := &processRig{agents: map[string]*stageProc{}, kind: cfg.Kill, bin: cfg.Bin, killed: make(chan struct{}), restarted: make(chan struct{})}
	if r.bin == "" {
		if r.bin, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	r.env = append([]string{"E2A_HTTP_ADDR=127.0.0.1:0", "E2A_LOG_FORMAT=json", "E2A_LOG_LEVEL=info", "E2A_METRICS_ADDR="}, cfg.Env...)
	if cfg.Kill == KillDev {
		return r, r.startDev(ctx)
	}
	var js jetstream.JetStream
	if r.emb, r.nc, js, err = startStreamsServer(ctx); err != nil {
		return nil, err
	}
	env := append([]string{"E2A_NATS_URL=" + r.emb.ClientURL()}, r.env...)
	serves := 1
	if cfg.Kill == KillServe {
		serves = 2
	}
	for range serves {
		p, err := startStage(ctx, r.bin, env, "serving", "addr", "serve")
		if err != nil {
			return nil, err
		}
		r.serves = append(r.serves, p)
	}
	for i := range cfg.Workers {
		p, err := startStage(ctx, r.bin, slices.Concat(env, []string{"E2A_AGENT_WORKER_ID=" + workerID(i), "E2A_AGENT_ACK_WAIT=" + cfg.AckWait.String()}),
			"agent pool running", "ops", "agent", "--pool", recoveryPool, "--concurrency", strconv.Itoa(max(64, cfg.Requests)))
		if err != nil {
			return nil, err
		}
		r.agents[workerID(i)] = p
	}
	if err := r.waitReady(ctx); err != nil {
		return nil, err
	}
	return r, waitConsumer(ctx, js, recoveryPool)
}

// startDev starts e2a dev on the rig's store (a new one the first time)
// and waits until it is ready.
func (r *processRig) startDev(ctx context.Context) error {
	if r.store == "" {
		dir, err := os.MkdirTemp("", "e2a-bench-recovery-")
		if err != nil {
			return err
		}
		r.store = dir
	}
	p, err := startStage(ctx, r.bin, append([]string{"E2A_NATS_URL=", "E2A_NATS_PORT=0", "E2A_STORE_DIR=" + r.store, "E2A_PUSH=off"}, r.env...),
		"serving", "addr", "dev")
	if err != nil {
		return err
	}
	r.serves = append(r.serves, p)
	return r.waitReady(ctx)
}

// waitReady waits until every running process answers /readyz.
func (r *processRig) waitReady(ctx context.Context) error {
	hc := newHTTPClient(4)
	defer hc.CloseIdleConnections()
	for _, p := range r.procs() {
		if p.cmd.ProcessState != nil {
			continue // killed
		}
		if err := p.waitReady(ctx, hc); err != nil {
			return err
		}
	}
	return nil
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

// resume is the second serve process, or the restarted e2a dev once it
// is ready; an error for a stream that broke before the kill, or when the
// agent process kill (which breaks no stream) is the kill.
func (r *processRig) resume(ctx context.Context) (string, error) {
	select {
	case <-r.killed:
	default:
		return "", errors.New("the stream broke before the kill")
	}
	if r.kind == KillAgent {
		return "", nil
	}
	select {
	case <-r.restarted:
		return "http://" + r.serves[len(r.serves)-1].addr, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// params: the demo agent writes 4 frames around its text frames.
func (r *processRig) params(cfg RecoveryConfig) map[string]any {
	return map[string]any{"text": "recovery", "frames": cfg.Frames - 4, "delay_ms": cfg.Delay.Milliseconds()}
}

// text: the demo agent's final content is the text it streamed.
func (r *processRig) text() bool { return true }

// kill sends SIGKILL to the agent process of that worker id, or to the
// serve process the clients stream from, or to e2a dev (then started again
// on its store), and reaps it.
func (r *processRig) kill(id string) error {
	p := r.agents[id]
	if r.kind == KillServe || r.kind == KillDev {
		p = r.serves[0]
	}
	if p == nil {
		return fmt.Errorf("bench: recovery: no process %s", id)
	}
	// killed is closed before the signal: a client whose stream breaks
	// when the process dies must find it closed (checked in resume), and
	// this goroutine may not run again before that client does.
	close(r.killed)
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	_ = p.cmd.Wait() // killed: its exit status says so
	if r.kind == KillDev {
		if err := r.startDev(context.Background()); err != nil {
			return fmt.Errorf("bench: recovery: restart e2a dev: %w", err)
		}
	}
	close(r.restarted)
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
	if r.store != "" {
		_ = os.RemoveAll(r.store)
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
