package streams_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
)

// TestFullBucketLeavesStreamsWritable: a key-value bucket any principal
// writes (A2E_LOCAL: StoreData, no TTL) filled to its bound refuses its
// own writes, and a full stream that drops its oldest (E2A_RESPONSES)
// still takes frames. The server refuses writes to every stream once the
// data stored reaches its max_file_store: a bucket without a byte bound
// grew into the space the streams' reservations leave (here 6 MiB), and
// then no frame could be stored.
func TestFullBucketLeavesStreamsWritable(t *testing.T) {
	cfg := streams.DefaultConfig()
	cfg.ResponsesMaxBytes = 4 << 20
	cfg.KeyValueMaxBytes = 2 << 20
	e, err := streams.StartEmbedded(streams.EmbeddedOptions{StoreDir: t.TempDir(), MaxStore: 12 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := e.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx(t), cfg.ResponsesStreamConfig()); err != nil {
		t.Fatal(err)
	}
	kc, err := cfg.KeyValueConfig(streams.WorkflowLocalBucket)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx(t), kc)
	if err != nil {
		t.Fatal(err)
	}
	frame := bytes.Repeat([]byte("f"), 64<<10)
	publish := func() error {
		_, err := js.Publish(ctx(t), "e2a.resp.demo.01a2a3a4-0000-7000-8000-000000000001.0", frame)
		return err
	}
	for range 96 { // 6 MiB: E2A_RESPONSES full, its oldest dropped
		if err := publish(); err != nil {
			t.Fatalf("filling E2A_RESPONSES: %v", err)
		}
	}
	value := bytes.Repeat([]byte("x"), 512<<10)
	refused := 0
	for i := range 24 { // 12 MiB
		if _, err := kv.Put(ctx(t), fmt.Sprintf("p.k%d", i), value); err != nil {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("24 values of 512 KiB all stored in a bucket bounded to %d B", cfg.KeyValueMaxBytes)
	}
	if err := publish(); err != nil {
		t.Fatalf("a frame after the bucket filled: %v", err)
	}
}
