package streams

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// DefaultHost is the address the embedded server listens on by default.
const DefaultHost = "127.0.0.1"

// ClusterOptions make an embedded server a node of a NATS cluster with
// clustered JetStream. Every node needs a distinct ServerName.
type ClusterOptions struct {
	// Name of the cluster; required.
	Name string
	// Host of the route listener; default the server's Host.
	Host string
	// Port of the route listener; 0 picks a free port.
	Port int
	// Routes are the route URLs (nats-route://host:port) of the nodes, see
	// Embedded.ClusterURL; at least one. A node's own URL may be in the
	// list, so every node can be given the same list.
	Routes []string
}

// EmbeddedOptions configure StartEmbedded.
type EmbeddedOptions struct {
	// StoreDir is the JetStream store directory. Empty: a temporary
	// directory, removed by Shutdown.
	StoreDir string
	// Host of the client listener; default DefaultHost (loopback).
	Host string
	// Port of the client listener; 0 picks a free port. The server always
	// listens, so that nats tools and integrators can connect; negative
	// ports are refused.
	Port int
	// ServerName; default "e2a-embedded". Required to be distinct in a
	// cluster.
	ServerName string
	// SyncAlways makes JetStream fsync every write before acknowledging it
	// (the server's sync_interval: always), as production servers run.
	SyncAlways bool
	// MaxMemory and MaxStore bound JetStream memory and file storage; 0
	// lets the server choose (75% of memory, of disk).
	MaxMemory, MaxStore int64
	// Cluster, when set, makes the server a cluster node.
	Cluster *ClusterOptions
	// ReadyTimeout bounds the wait for the server to accept connections and
	// enable JetStream; default 10s.
	ReadyTimeout time.Duration
	// Logging sends the server's log to standard error.
	Logging bool
	// MaxPayload is the server's max_payload, the largest message (headers
	// included) it accepts; 0 = the server's default (1 MiB).
	MaxPayload int32
}

// Embedded is a JetStream server running in this process.
type Embedded struct {
	srv     *server.Server
	opts    EmbeddedOptions
	tempDir string
}

// StartEmbedded starts a JetStream server in this process and waits until
// it accepts connections and JetStream is enabled. A cluster node does not
// wait for the cluster to elect a meta leader: see Embedded.WaitJetStream.
//
// It returns ErrInvalidOptions for invalid options, ErrServerNotReady when
// the server did not become ready within ReadyTimeout, and the server's
// error when it cannot be configured.
func StartEmbedded(opts EmbeddedOptions) (*Embedded, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	e := &Embedded{}
	if opts.StoreDir == "" {
		dir, err := os.MkdirTemp("", "e2a-jetstream-")
		if err != nil {
			return nil, err
		}
		e.tempDir = dir
		opts.StoreDir = dir
	}
	srv, err := server.NewServer(opts.serverOptions())
	if err != nil {
		e.cleanup()
		return nil, err
	}
	if opts.Logging {
		srv.ConfigureLogger()
	}
	e.srv = srv
	srv.Start()
	if err := waitReady(srv, opts.ReadyTimeout); err != nil {
		e.Shutdown()
		return nil, err
	}
	e.opts = opts.withAddrs(srv)
	return e, nil
}

// check fills in o's defaults and validates it (ErrInvalidOptions).
func (o *EmbeddedOptions) check() error {
	if o.Port < 0 {
		return fmt.Errorf("%w: port %d: the embedded server always listens; use 0 for a free port", ErrInvalidOptions, o.Port)
	}
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.ServerName == "" {
		o.ServerName = "e2a-embedded"
	}
	if strings.ContainsAny(o.ServerName, " \t\r\n") {
		return fmt.Errorf("%w: server name %q", ErrInvalidOptions, o.ServerName)
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 10 * time.Second
	}
	if o.MaxMemory < 0 || o.MaxStore < 0 {
		return fmt.Errorf("%w: negative JetStream limits", ErrInvalidOptions)
	}
	if o.MaxPayload < 0 {
		return fmt.Errorf("%w: max payload %d", ErrInvalidOptions, o.MaxPayload)
	}
	if c := o.Cluster; c != nil {
		if c.Name == "" || strings.ContainsAny(c.Name, " \t\r\n") {
			return fmt.Errorf("%w: cluster name %q", ErrInvalidOptions, c.Name)
		}
		if c.Port < 0 {
			return fmt.Errorf("%w: cluster port %d", ErrInvalidOptions, c.Port)
		}
		if len(c.Routes) == 0 {
			return fmt.Errorf("%w: a clustered JetStream node needs routes (its own URL may be among them)", ErrInvalidOptions)
		}
	}
	return nil
}

// serverOptions are the NATS server's options for o (checked).
func (o *EmbeddedOptions) serverOptions() *server.Options {
	sopts := &server.Options{
		ServerName:         o.ServerName,
		Host:               o.Host,
		Port:               randomIfZero(o.Port),
		NoLog:              !o.Logging,
		NoSigs:             true,
		JetStream:          true,
		StoreDir:           o.StoreDir,
		SyncAlways:         o.SyncAlways,
		JetStreamMaxMemory: o.MaxMemory,
		JetStreamMaxStore:  o.MaxStore,
		MaxPayload:         o.MaxPayload,
	}
	if c := o.Cluster; c != nil {
		host := c.Host
		if host == "" {
			host = o.Host
		}
		sopts.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: randomIfZero(c.Port)}
		sopts.Routes = server.RoutesFromStr(strings.Join(c.Routes, ","))
	}
	return sopts
}

// waitReady waits until srv accepts connections and JetStream is enabled,
// at most timeout for each (ErrServerNotReady).
func waitReady(srv *server.Server, timeout time.Duration) error {
	if !srv.ReadyForConnections(timeout) {
		return fmt.Errorf("%w: no client listener after %v", ErrServerNotReady, timeout)
	}
	deadline := time.Now().Add(timeout)
	for !srv.JetStreamEnabled() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: JetStream not enabled after %v", ErrServerNotReady, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// withAddrs is o with the ports srv actually listens on, so that Options
// can restart the server at the same addresses.
func (o EmbeddedOptions) withAddrs(srv *server.Server) EmbeddedOptions {
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		o.Port = a.Port
	}
	if o.Cluster != nil {
		c := *o.Cluster
		c.Routes = append([]string(nil), c.Routes...)
		if a := srv.ClusterAddr(); a != nil {
			c.Port = a.Port
		}
		o.Cluster = &c
	}
	return o
}

func randomIfZero(port int) int {
	if port == 0 {
		return server.RANDOM_PORT
	}
	return port
}

// WaitJetStream waits until JetStream is ready to serve requests: for a
// cluster node, until the meta group has a leader and this node is current
// with it. It returns ctx.Err() when ctx ends first.
func (e *Embedded) WaitJetStream(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if e.srv.JetStreamEnabled() && e.srv.JetStreamIsCurrent() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrServerNotReady, ctx.Err())
		case <-t.C:
		}
	}
}

// ClientURL returns nats://host:port of the client listener (loopback
// when the server listens on all interfaces).
func (e *Embedded) ClientURL() string {
	return "nats://" + net.JoinHostPort(dialHost(e.opts.Host), strconv.Itoa(e.opts.Port))
}

func dialHost(h string) string {
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			return "127.0.0.1"
		}
		return "::1"
	}
	return h
}

// ClusterURL returns nats-route://host:port of the route listener, for the
// Routes of other nodes, or "" when the server is not a cluster node.
func (e *Embedded) ClusterURL() string {
	if e.opts.Cluster == nil {
		return ""
	}
	host := e.opts.Cluster.Host
	if host == "" {
		host = e.opts.Host
	}
	return "nats-route://" + net.JoinHostPort(dialHost(host), strconv.Itoa(e.opts.Cluster.Port))
}

// Options returns the options the server runs with, the ports resolved:
// passing them to StartEmbedded after Shutdown restarts the same node at the
// same addresses (unless the store directory was temporary, since Shutdown
// removes it).
func (e *Embedded) Options() EmbeddedOptions {
	o := e.opts
	if o.Cluster != nil {
		c := *o.Cluster
		c.Routes = append([]string(nil), c.Routes...)
		o.Cluster = &c
	}
	if e.tempDir != "" {
		o.StoreDir = ""
	}
	return o
}

// StoreDir returns the JetStream store directory.
func (e *Embedded) StoreDir() string { return e.opts.StoreDir }

// Connect connects to the server in process (no TCP), with opts. Such a
// connection cannot fail over to another node: to a cluster, connect with
// nats.Connect to the ClientURLs instead.
func (e *Embedded) Connect(opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{nats.InProcessServer(e.srv), nats.Name(e.opts.ServerName + "-inprocess")}, opts...)
	return nats.Connect(e.ClientURL(), all...)
}

// Server returns the underlying server.
func (e *Embedded) Server() *server.Server { return e.srv }

// Shutdown stops the server, waits until it has stopped and removes the
// store directory if it was temporary. It may be called more than once.
func (e *Embedded) Shutdown() {
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
	e.cleanup()
}

func (e *Embedded) cleanup() {
	if e.tempDir != "" {
		_ = os.RemoveAll(e.tempDir)
	}
}
