package workflow

import (
	"os"
	"testing"
)

// TestContinueOnError: "Failed operations stop execution (configurable)"
// (spec §5): by default the first failure stops the execution; with
// ContinueOnError the later operations still run, the outcome is failed and
// lists every failed operation (issue 16: not configurable).
func TestContinueOnError(t *testing.T) {
	wf := lines(
		op("bad", `{"ApiCall":{"method":"GET","url":"https://api.example.com/missing","outputPath":"/workflow/m"}}`),
		op("w", `{"Wait":{"duration":0}}`),
		op("bad2", `{"ApiCall":{"method":"GET","url":"https://api.example.com/missing?again=1","outputPath":"/workflow/m2"}}`),
		begin("bad", "w", "bad2"))
	out, _ := newEnv(t, nil).run(t, wf)
	if _, ran := out.Results["w"]; out.Status != StatusFailed || ran || out.Error == nil || out.Error.OperationID != "bad" {
		t.Fatalf("default: %+v %+v", out, out.Error)
	}
	out, _ = newEnv(t, func(o *Options) { o.ContinueOnError = true }).run(t, wf)
	failed, _ := out.Error.Details["failedOperations"].([]map[string]any)
	if _, ran := out.Results["w"]; out.Status != StatusFailed || !ran || out.Error.OperationID != "bad" || len(failed) != 2 || failed[1]["operationId"] != "bad2" {
		t.Fatalf("continue: %+v %+v", out, out.Error)
	}
	out, _ = newEnv(t, func(o *Options) { o.ContinueOnError = true }).run(t, lines(op("w", `{"Wait":{"duration":0}}`), begin("w")))
	if out.Status != StatusSuccess || out.Error != nil {
		t.Fatalf("continue, no failure: %+v", out)
	}
}

// TestFileStorageDefault: StoreData "file" works without configuration: an
// unset E2A_WORKFLOW_FILE_DIR is a private directory of the user (created
// 0700); "off" disables it (issue 16: refused unless configured).
func TestFileStorageDefault(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv("E2A_WORKFLOW_FILE_DIR", "")
	c, err := ConfigFromEnv()
	if err != nil || c.FileDir == "" {
		t.Fatalf("%q %v", c.FileDir, err)
	}
	if fi, err := os.Stat(c.FileDir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%v %v", fi, err)
	}
	en := newEnv(t, func(o *Options) { o.Storage = &Stores{Dir: c.FileDir} })
	out, _ := en.run(t, lines(op("w", `{"Wait":{"duration":0}}`),
		op("s", `{"StoreData":{"inputPath":"/workflow","storage":"file","key":"results.json"}}`), begin("w", "s")))
	if out.Status != StatusSuccess {
		t.Fatalf("file store: %+v", out.Error)
	}
	t.Setenv("E2A_WORKFLOW_FILE_DIR", "off")
	if c, err := ConfigFromEnv(); err != nil || c.FileDir != "" {
		t.Fatalf("off: %q %v", c.FileDir, err)
	}
}
