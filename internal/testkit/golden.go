package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Golden compares got with the golden file at path, or, with update,
// rewrites the file (creating its directory). A difference is reported
// with got in full, so that the change can be read in the test output.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the golden file; got:\n%s", path, got)
	}
}
