package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/redact"
)

// devBridgePool names `e2a dev`'s bridged pool when --pool is not given.
const devBridgePool = "agent"

// devBridgeFlags are the flags of `e2a dev` that put an agent already
// running behind the pipeline in the same process, as `e2a agent --pool
// NAME --a2a|--openai|--http URL` beside it would: the whole pipeline and
// the agent's pool in one command.
type devBridgeFlags struct {
	pool string
	bf   bridgeFlags
}

// register adds the flags to fs (`e2a dev`'s).
func (f *devBridgeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.pool, "pool", devBridgePool, "with --a2a, --openai or --http: the bridged agent's pool, the default pool unless E2A_DEFAULT_POOL names another")
	f.bf.register(fs)
}

// upstream returns the upstream the flags name, nil when they name none
// (flagUpstream); a pool `e2a dev` serves itself is a usage error too.
func (f *devBridgeFlags) upstream(fs *flag.FlagSet, cfg Config) (*UpstreamConfig, error) {
	up, err := flagUpstream(fs, f.bf, cfg, "pool")
	if up == nil || err != nil {
		return up, err
	}
	if err := checkPoolFlag(fs, f.pool); err != nil {
		return nil, err
	}
	if slices.Contains(builtinAgentPools, f.pool) {
		return nil, usageError(fs, fmt.Sprintf("--pool %q: e2a dev serves that pool itself (%s); give the bridged agent's pool another name",
			f.pool, strings.Join(builtinAgentPools, ", ")))
	}
	return up, nil
}

// flagUpstream is the upstream bf names for a command that runs the whole
// pipeline in its process (`e2a dev`, `e2a acp`), nil when it names none.
// Only a flag starts a bridge there (an E2A_UPSTREAM_URL exported for `e2a
// agent` does not); the E2A_UPSTREAM_* variables give the rest (the key,
// headers, timeouts, model), as for `e2a agent`. A flag that needs an
// upstream given without one (--model, --system, --think-open,
// --input-modes, and the command's own flags named in needing) and the
// upstream's own refusals are usage errors, said with the help before
// anything starts.
func flagUpstream(fs *flag.FlagSet, bf bridgeFlags, cfg Config, needing ...string) (*UpstreamConfig, error) {
	if err := emptyUpstreamFlag(fs); err != nil {
		return nil, err
	}
	if bf.a2a == "" && bf.openai == "" && bf.http == "" {
		var alone []string
		fs.Visit(func(fl *flag.Flag) {
			if slices.Contains(append([]string{"model", "system", "think-open", "input-modes"}, needing...), fl.Name) {
				alone = append(alone, "--"+fl.Name)
			}
		})
		if len(alone) > 0 {
			return nil, usageError(fs, strings.Join(alone, ", ")+" goes with an upstream: --a2a, --openai or --http")
		}
		return nil, nil
	}
	up, err := bf.upstream(cfg.Upstream)
	if err != nil {
		return nil, usageError(fs, err.Error())
	}
	return &up, nil
}

// bridgedDevPool is the pool `e2a dev` serves with h, the bridge to u:
// its banner's words (the upstream by kind and URL, shown as every
// upstream URL is: scheme and host) and its concurrency (bounded by the
// upstream's in-flight calls, as an `e2a agent` bridge worker's).
func bridgedDevPool(pool string, h agent.Handler, u UpstreamConfig) devPool {
	what := map[string]string{upstreamA2A: "the A2A agent at ", upstreamOpenAI: "the model " + u.Model + " at ", upstreamHTTP: "the HTTP agent at "}[u.Kind] +
		redact.URL(u.URL)
	return devPool{name: pool, h: h, what: what,
		opts: []agent.Option{agent.WithConcurrency(bridgeConcurrency(agent.DefaultConcurrency, u))}}
}

// pools is the pools `e2a dev` serves (devLayout) with the bridge to up
// (nil: none) built, its upstream checked before anything serves (a
// refusal ends the command as it ends `e2a agent`); cfg's default pool
// becomes the layout's.
func (f *devBridgeFlags) pools(ctx context.Context, js jetstream.JetStream, cfg *Config, up *UpstreamConfig, reg prometheus.Registerer, log *slog.Logger) ([]devPool, error) {
	var bridged *devPool
	if up != nil {
		h, err := newBridge(ctx, js, *cfg, f.pool, *up, reg, log)
		if err != nil {
			return nil, fmt.Errorf("pool %s: %w", f.pool, err)
		}
		p := bridgedDevPool(f.pool, h, *up)
		bridged = &p
	}
	pools, defaultPool, err := devLayout(cfg.DefaultPool, os.Getenv("E2A_DEFAULT_POOL") != "", bridged)
	if err != nil {
		return nil, err
	}
	cfg.DefaultPool = defaultPool
	return pools, nil
}

// ownAddress reports whether raw, an upstream's URL, names the listener
// at addr on this machine: the same port, on a loopback host, on addr's
// own host, or on an address of this machine's when addr's is unspecified
// (such a listener takes every local one).
// A bridge to it would make the pipeline its own agent, its start's check
// waiting on a listener not serving yet.
func ownAddress(raw string, addr net.Addr) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	lnHost, lnPort, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port != lnPort {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") || host == lnHost {
		return true
	}
	ip, lnIP := net.ParseIP(host), net.ParseIP(lnHost)
	switch {
	case ip == nil:
		return false // a name other than localhost: not resolved here
	case ip.IsLoopback():
		return true
	case lnIP == nil || !lnIP.IsUnspecified():
		return false
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// emptyUpstreamFlag refuses --a2a, --openai, --http or --model given
// empty (`--http "$URL"` with URL unset): an empty value reads as the flag
// not given, and the command ran without the agent asked for (e2a dev and
// e2a acp with the demo agent, e2a agent --pool demo the built-in one, or
// the E2A_UPSTREAM_* upstream), exit 0.
func emptyUpstreamFlag(fs *flag.FlagSet) error {
	for _, name := range []string{"a2a", "openai", "http", "model"} {
		if flagSet(fs, name) && fs.Lookup(name).Value.String() == "" {
			return usageError(fs, fmt.Sprintf("--%s is given empty (an unset variable?): give its value, or leave the flag out", name))
		}
	}
	return nil
}
