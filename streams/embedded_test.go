package streams_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

func TestEmbeddedOptions(t *testing.T) {
	if _, err := streams.StartEmbedded(streams.EmbeddedOptions{Port: -1}); !errors.Is(err, streams.ErrInvalidOptions) {
		t.Fatalf("port -1: %v", err)
	}
	if _, err := streams.StartEmbedded(streams.EmbeddedOptions{Cluster: &streams.ClusterOptions{}}); !errors.Is(err, streams.ErrInvalidOptions) {
		t.Fatalf("cluster without name: %v", err)
	}
	if _, err := streams.StartEmbedded(streams.EmbeddedOptions{ServerName: "a b"}); !errors.Is(err, streams.ErrInvalidOptions) {
		t.Fatalf("bad server name: %v", err)
	}
}

func TestEmbeddedTempDirAndTCP(t *testing.T) {
	e, err := streams.StartEmbedded(streams.EmbeddedOptions{SyncAlways: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	dir := e.StoreDir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("store dir: %v", err)
	}
	if jc := e.Server().JetStreamConfig(); jc == nil || !jc.SyncAlways {
		t.Fatalf("SyncAlways not set: %+v", jc)
	}
	url := e.ClientURL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":0") || strings.HasSuffix(url, ":4222") {
		t.Fatalf("ClientURL %q", url)
	}
	// Tools connect over TCP; in-process components in process.
	tcp, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	inproc, err := e.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer inproc.Close()
	sub, _ := tcp.SubscribeSync("x")
	_ = tcp.Flush()
	if err := inproc.Publish("x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(2 * time.Second); err != nil || string(m.Data) != "hi" {
		t.Fatalf("TCP <- in-process: %v", err)
	}
	e.Shutdown()
	e.Shutdown() // idempotent
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temp store dir kept: %v", err)
	}
}

func TestEmbeddedRestartKeepsData(t *testing.T) {
	e, err := streams.StartEmbedded(streams.EmbeddedOptions{StoreDir: t.TempDir(), ServerName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := e.Connect()
	js, _ := jetstream.New(nc)
	if _, err := streams.Apply(ctx(t), js, testConfig()); err != nil {
		t.Fatal(err)
	}
	subj, _ := subjects.Response("r")
	if _, err := js.Publish(ctx(t), subj, []byte("frame")); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	opts := e.Options()
	e.Shutdown()

	e2, err := streams.StartEmbedded(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Shutdown()
	if e2.ClientURL() != e.ClientURL() {
		t.Fatalf("restarted at %s, was %s", e2.ClientURL(), e.ClientURL())
	}
	nc2, err := nats.Connect(e2.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	if err := e2.WaitJetStream(ctx(t)); err != nil {
		t.Fatal(err)
	}
	m, err := streams.LastBySubject(ctx(t), nc2, streams.ResponsesStream, subj)
	if err != nil || string(m.Data) != "frame" {
		t.Fatalf("after restart: %+v %v", m, err)
	}
}

func TestConnConfig(t *testing.T) {
	c := streams.ConnConfig{NatsURL: "nats://a:4222", User: "u", Password: "s3cret"}
	if s := c.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "[redacted]") {
		t.Fatalf("String leaks: %s", s)
	}
	if s := c.LogValue().String(); strings.Contains(s, "s3cret") {
		t.Fatalf("LogValue leaks: %s", s)
	}
	for name, bad := range map[string]streams.ConnConfig{
		"no url":             {},
		"two auth methods":   {NatsURL: "nats://a", CredsFile: "x.creds", User: "u", Password: "p"},
		"password only":      {NatsURL: "nats://a", Password: "p"},
		"cert without key":   {NatsURL: "nats://a", TLSCert: "c.pem"},
		"negative reconnect": {NatsURL: "nats://a", ReconnectWait: -time.Second},
	} {
		if err := bad.Validate(); !errors.Is(err, streams.ErrInvalidConnConfig) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := streams.Connect(context.Background(), bad); !errors.Is(err, streams.ErrInvalidConnConfig) {
			t.Errorf("Connect %s: %v", name, err)
		}
	}
	if _, err := (streams.ConnConfig{NatsURL: "nats://a", NKeySeedFile: "/does/not/exist"}).Options(); !errors.Is(err, streams.ErrInvalidConnConfig) {
		t.Errorf("missing nkey file: %v", err)
	}
}

func TestConnect(t *testing.T) {
	e, _, _ := startServer(t)
	nc, err := streams.Connect(ctx(t), streams.ConnConfig{NatsURL: e.ClientURL() + ", nats://127.0.0.1:1", Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.Opts.MaxReconnect != -1 || nc.Opts.Name != "test" {
		t.Fatalf("options: reconnect %d name %q", nc.Opts.MaxReconnect, nc.Opts.Name)
	}
	// A context that ends first.
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := streams.Connect(c, streams.ConnConfig{NatsURL: e.ClientURL()}); err == nil {
		t.Fatal("connected with a cancelled context")
	}
	// Nothing listening.
	c2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if _, err := streams.Connect(c2, streams.ConnConfig{NatsURL: "nats://127.0.0.1:1"}); err == nil {
		t.Fatal("connected to nothing")
	}
}
