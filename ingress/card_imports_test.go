package ingress_test

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestCardFilesKnowNoA2A: ingress serves the agent card and knows what it
// declares, but the card is the card server's (host.CardServer, package
// protocols/a2av1's): the files that build, serve and extend it, and the
// pool and workflow routes beside them, import no a2a-go package.
func TestCardFilesKnowNoA2A(t *testing.T) {
	for _, name := range []string{"card.go", "extcard.go", "poolroutes.go", "workflow.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if strings.Contains(imp.Path.Value, "github.com/a2aproject/") {
				t.Errorf("%s imports %s", name, imp.Path.Value)
			}
		}
	}
}
