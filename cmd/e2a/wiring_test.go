package main

import (
	"slices"
	"testing"

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
	e, err := newWorkflowValidator(nil)
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
