package main

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/audit"
)

// historyOptions gives the E2A read API its history (egress.WithHistory)
// when E2A_HISTORY is on: an Auditor on the stage's connection, which
// finds a request the hot streams no longer hold in E2A_AUDIT and
// E2A_ARCHIVE from the time in its UUIDv7 id (audit.Auditor.Request).
func historyOptions(cfg Config, nc *nats.Conn) ([]egress.Option, error) {
	if !cfg.History {
		return nil, nil
	}
	a, err := audit.New(nc)
	if err != nil {
		return nil, fmt.Errorf("E2A_HISTORY: %w", err)
	}
	return []egress.Option{egress.WithHistory(a)}, nil
}
