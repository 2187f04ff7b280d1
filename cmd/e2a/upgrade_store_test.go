package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/streams"
)

// TestEmbeddedStoreUpgradesPush: e2a dev started by a newer build on a
// store an earlier one kept (E2A_STORE_DIR) brings the push stage's bucket
// to this build's definition, as `e2a streams apply` does: earlier builds
// made E2A_PUSH unbounded (MaxBytes -1), and the push stage, which creates
// it when missing, never updates it, so it stayed unbounded for good.
func TestEmbeddedStoreUpgradesPush(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("E2A_NATS_URL", "")
	t.Setenv("E2A_NATS_PORT", "0")
	t.Setenv("E2A_STORE_DIR", dir)
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sc := cfg.StreamsConfig()

	// The store as an earlier build left it: E2A_PUSH without a byte bound.
	old, err := streams.StartEmbedded(streams.EmbeddedOptions{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := old.Connect()
	if err != nil {
		old.Shutdown()
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	earlier := sc.PushBucketConfig()
	earlier.MaxBytes = -1
	if _, err := js.CreateKeyValue(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	old.Shutdown()

	nc, stop, _, err := connectOrEmbed(ctx, cfg, slog.New(slog.DiscardHandler), streams.NewConnEvents(slog.New(slog.DiscardHandler)), true)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	js, _ = jetstream.New(nc)
	for _, name := range []string{streams.KVStream(streams.PushBucket), streams.PushDeadStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("%s after start-up: %v", name, err)
		}
		want := sc.PushDeadStreamConfig().MaxBytes
		if name != streams.PushDeadStream {
			want = sc.KeyValueMaxBytes
		}
		if got := s.CachedInfo().Config.MaxBytes; got != want {
			t.Errorf("%s MaxBytes after the upgraded start-up: %d, want %d", name, got, want)
		}
	}
}
