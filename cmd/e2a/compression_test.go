package main

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestCompressionConfig: E2A_*_COMPRESSION reach the stream definitions
// (the audit S2 by default, the hot streams none), and a value other than
// none or s2 fails the configuration naming the variable.
func TestCompressionConfig(t *testing.T) {
	for _, k := range []string{"E2A_REQUESTS_COMPRESSION", "E2A_RESPONSES_COMPRESSION", "E2A_AUDIT_COMPRESSION"} {
		t.Setenv(k, "")
	}
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.StreamsConfig()
	if s.RequestsCompression != jetstream.NoCompression || s.ResponsesCompression != jetstream.NoCompression || s.AuditCompression != jetstream.NoCompression {
		t.Fatalf("empty values: %v %v %v", s.RequestsCompression, s.ResponsesCompression, s.AuditCompression)
	}
	t.Setenv("E2A_RESPONSES_COMPRESSION", "S2")
	t.Setenv("E2A_AUDIT_COMPRESSION", "none")
	if cfg, err = LoadConfig(); err != nil {
		t.Fatal(err)
	}
	s = cfg.StreamsConfig()
	if s.ResponsesCompression != jetstream.S2Compression || s.AuditCompression != jetstream.NoCompression {
		t.Fatalf("s2/none: %v %v", s.ResponsesCompression, s.AuditCompression)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2A_AUDIT_COMPRESSION", "zstd")
	if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "AUDIT_COMPRESSION") {
		t.Fatalf("zstd: %v", err)
	}
}

// TestCompressionDefaults: unset, no stream is compressed.
func TestCompressionDefaults(t *testing.T) {
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.StreamsConfig()
	if s.RequestsCompression != jetstream.NoCompression || s.ResponsesCompression != jetstream.NoCompression || s.AuditCompression != jetstream.NoCompression {
		t.Fatalf("defaults: %v %v %v", s.RequestsCompression, s.ResponsesCompression, s.AuditCompression)
	}
}
