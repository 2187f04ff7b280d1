package habits

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/e2a-pipeline/pipeline/"

// protocolSDKs are the module paths of the protocol SDKs the pipeline
// speaks through; only protocol packages (protocols/<name>) and the
// stages built for one protocol (bridges, push) import them.
var protocolSDKs = []string{
	"github.com/a2aproject/a2a-go",
	"github.com/coder/acp-go-sdk",
}

// layerRules are the packages that must stay protocol-neutral (issue 39's
// seam): egress is the core read stage (the Reader and the E2A read
// service), render the renderer toolkit below it (the frame as a reader
// delivers it, the Output, the SSE and NDJSON writers, the text fast
// path), protocols/host the seam every protocol package sees. None
// imports a protocol SDK or a protocol package, whose code depends on
// them, not the other way round; render imports no egress (egress
// imports render) and no NATS client (it never reads a stream).
var layerRules = []struct {
	dir       string // package directory, relative to the module root
	forbidden []string
}{
	{"egress", append([]string{module + "protocols"}, protocolSDKs...)},
	{"protocols/host", append([]string{module + "protocols"}, protocolSDKs...)},
	{"render", append([]string{module + "protocols", module + "egress", module + "ingress", "github.com/nats-io/nats.go"}, protocolSDKs...)},
}

// TestLayerImports fails when a non-test file of a protocol-neutral
// package (layerRules) imports a protocol SDK or a package under
// protocols/ (protocols/host itself excepted for its users).
func TestLayerImports(t *testing.T) {
	root := moduleRoot(t)
	for _, rule := range layerRules {
		dir := filepath.Join(root, rule.dir)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		files := 0
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			files++
			for _, imp := range fileImports(t, filepath.Join(dir, name)) {
				if bad := forbiddenImport(imp, rule.forbidden); bad != "" {
					t.Errorf("%s/%s imports %s (%s is above this layer: move the code that needs it up, to its protocol package or to egress)", rule.dir, name, imp, bad)
				}
			}
		}
		if files == 0 {
			t.Fatalf("no Go file in %s: the rule is stale", rule.dir)
		}
	}
}

// TestForbiddenImport pins the prefix rule: a path is forbidden when it
// is a forbidden path or below one, never when it only shares a prefix
// of its name; protocols/host is allowed everywhere.
func TestForbiddenImport(t *testing.T) {
	forbidden := []string{module + "protocols", "github.com/a2aproject/a2a-go"}
	for imp, want := range map[string]bool{
		module + "protocols":                  true,
		module + "protocols/a2a/a2amap":       true,
		module + "protocols/host":             false,
		module + "protocolsx":                 false,
		"github.com/a2aproject/a2a-go/a2a":    true,
		"github.com/a2aproject/a2a-go/v2/a2a": true,
		"github.com/a2aproject/a2a-go-extra":  false,
		"github.com/nats-io/nats.go":          false,
	} {
		if got := forbiddenImport(imp, forbidden) != ""; got != want {
			t.Errorf("forbiddenImport(%q) = %v, want %v", imp, got, want)
		}
	}
}

// forbiddenImport returns the entry of forbidden that imp is or is below,
// or "". The neutral seam protocols/host is never forbidden.
func forbiddenImport(imp string, forbidden []string) string {
	if imp == module+"protocols/host" {
		return ""
	}
	for _, f := range forbidden {
		if imp == f || strings.HasPrefix(imp, f+"/") {
			return f
		}
	}
	return ""
}

// fileImports returns the import paths of the Go file at path.
func fileImports(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(f.Imports))
	for _, s := range f.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
