package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestServeWorkflowValidatorNeedsNoPoolSettings: `e2a serve`'s workflow
// validator accepts what the workflow pool decides (an API and a
// credential serve does not know), lists those checks as deferred, holds
// no credential even when its environment has one, and refuses only a
// storage type the pool does not have (file, with E2A_WORKFLOW_FILE_DIR
// off), accepting localStorage and sessionStorage without opening their
// buckets.
func TestServeWorkflowValidatorNeedsNoPoolSettings(t *testing.T) {
	t.Setenv("E2A_WORKFLOW_FILE_DIR", "off")
	t.Setenv("E2A_WORKFLOW_CREDENTIAL_APIKEY", "s3cret-value-123")
	e, err := newWorkflowValidator(configWith(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if creds := e.Capabilities("tester").AvailableCredentials; len(creds) != 0 {
		t.Errorf("serve holds no credential: %+v", creds)
	}
	wf := func(store string) string {
		return `{"type":"operationUpdate","operationId":"get","operation":{"ApiCall":{"method":"GET","url":"https://api.example.com/items",` +
			`"headers":{"Authorization":{"credentialRef":{"id":"apikey"},"prefix":"Bearer "}},"outputPath":"/workflow/items"}}}
{"type":"operationUpdate","operationId":"keep","operation":{"StoreData":{"inputPath":"/workflow/items","storage":"` + store + `","key":"k"}}}
{"type":"beginExecution","executionId":"x","operationOrder":["get","keep"]}`
	}
	for _, kind := range []string{workflow.StorageLocal, workflow.StorageSession} {
		if _, res := e.Validate("tester", wf(kind)); !res.Valid || !slices.Equal(res.Deferred, workflow.DeferredChecks()) {
			t.Errorf("StoreData %s, an API and a credential of the pool's: %+v", kind, res)
		}
	}
	if _, res := e.Validate("tester", wf(workflow.StorageFile)); res.Valid {
		t.Errorf("StoreData file with E2A_WORKFLOW_FILE_DIR=off must be refused: %+v", res)
	}
}

// TestWorkflowPoolRefusesMissingFileDir: a workflow pool whose
// E2A_WORKFLOW_FILE_DIR names no directory stops at start, naming the
// variable. It started, listed file storage in its capabilities and
// validated StoreData "file", then failed every one of them when it ran
// ("file storage is unavailable", not retryable). An existing directory
// is taken.
func TestWorkflowPoolRefusesMissingFileDir(t *testing.T) {
	_, nc := natstest.RunServer(t)
	js := natstest.JetStream(t, nc)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		cfg := configWith(t, "E2A_WORKFLOW_FILE_DIR="+dir)
		if _, err := newWorkflowExecutor(context.Background(), js, cfg, nil); err == nil || !strings.Contains(err.Error(), "E2A_WORKFLOW_FILE_DIR") {
			t.Errorf("E2A_WORKFLOW_FILE_DIR=%s: %v; want it refused at start, naming the variable", dir, err)
		}
	}
	cfg := configWith(t, "E2A_WORKFLOW_FILE_DIR="+t.TempDir())
	e, err := newWorkflowExecutor(context.Background(), js, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if kinds := e.Capabilities("tester").SecurityConstraints["storage"]; !slices.Contains(kinds.([]string), workflow.StorageFile) {
		t.Errorf("an existing directory: storage %v, want file in it", kinds)
	}
}

// TestWorkflowStorageQuotasListed: the localStorage and sessionStorage
// quotas per principal are each a quarter of their bucket's bound
// (E2A_KV_MAX_BYTES) unless E2A_WORKFLOW_LOCAL_QUOTA_BYTES /
// E2A_WORKFLOW_SESSION_QUOTA_BYTES sets it (-1: none), the same in serve's
// capabilities and in the pool, whose storage enforces them.
func TestWorkflowStorageQuotasListed(t *testing.T) {
	t.Setenv("E2A_WORKFLOW_FILE_DIR", "off")
	_, nc := natstest.RunServer(t)
	for _, q := range []struct{ env, member string }{
		{"E2A_WORKFLOW_LOCAL_QUOTA_BYTES", "localStorageQuotaBytes"},
		{"E2A_WORKFLOW_SESSION_QUOTA_BYTES", "sessionStorageQuotaBytes"},
	} {
		quota := func(e *workflow.Executor) any { return e.Capabilities("tester").SecurityConstraints[q.member] }
		for _, c := range []struct {
			env  string
			want any
		}{{"0", int64(1 << 20)}, {"1000", int64(1000)}, {"-1", nil}} {
			cfg := configWith(t, "E2A_KV_MAX_BYTES=4194304", q.env+"="+c.env)
			e, err := newWorkflowValidator(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := quota(e); got != c.want {
				t.Errorf("serve, %s=%q: %v, want %v", q.env, c.env, got, c.want)
			}
		}
		if _, err := newWorkflowValidator(configWith(t, q.env+"=-2"), nil); err == nil || !strings.Contains(err.Error(), q.env) {
			t.Errorf("%s=-2: %v", q.env, err)
		}
		e, err := newWorkflowExecutor(context.Background(), natstest.JetStream(t, nc), configWith(t, "E2A_KV_MAX_BYTES=4194304", q.env+"=1000"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := quota(e); got != int64(1000) {
			t.Errorf("pool, %s: %v", q.env, got)
		}
	}
}
