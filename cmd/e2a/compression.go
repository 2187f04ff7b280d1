package main

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// compression is a stream's storage compression in the environment
// (E2A_*_COMPRESSION): "none" or "s2".
type compression jetstream.StoreCompression

// Decode implements envconfig.Decoder.
func (c *compression) Decode(value string) error {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "none", "":
		*c = compression(jetstream.NoCompression)
	case "s2":
		*c = compression(jetstream.S2Compression)
	default:
		return fmt.Errorf("compression %q: use none or s2", value)
	}
	return nil
}

// store returns c as the stream setting.
func (c compression) store() jetstream.StoreCompression { return jetstream.StoreCompression(c) }
