package testkit

import (
	"bytes"
	"fmt"
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

// FuzzSeed compares the seed corpus file at path with one holding b as the
// single []byte argument of a fuzz target (the format go test writes under
// testdata/fuzz/<Target>/), or, with update, rewrites it: seeds built from
// golden files stay in the kept corpus, so that a fuzz run starts from
// them and go test runs them.
func FuzzSeed(t testing.TB, path string, b []byte, update bool) {
	t.Helper()
	Golden(t, path, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), update)
}
