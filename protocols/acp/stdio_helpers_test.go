package acp_test

import (
	"context"
	"io"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/acptest"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
)

// stdioSession starts a pipeline whose default pool "agent" runs h, and
// an ACP session over stdio (acp-go-sdk's client) to it.
func stdioSession(t *testing.T, h agent.HandlerFunc) *acptest.Session {
	t.Helper()
	_, s := stdioPipeline(t, h)
	return s
}

// stdioPipeline is stdioSession with its pipeline.
func stdioPipeline(t *testing.T, h agent.HandlerFunc) (*pipetest.Pipeline, *acptest.Session) {
	t.Helper()
	p := pipetest.Start(t, pipetest.WithIngress(ingress.WithDefaultPool("agent")))
	p.Pool("agent", h)
	return p, acptest.OpenStdio(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return ingress.ServeACPStdio(ctx, in, out, p.Ingress)
	})
}
