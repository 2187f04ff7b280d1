package habits

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"sort"
	"strings"
	"testing"
)

// TestPackageDocInDocGo: every package of the module (a directory with Go
// files, test-only ones included, such as deploy and internal/chaos) says
// what it is in a doc.go whose package comment starts "Package <name>" (or
// "Command <dir>" for a main package), and no other file of the package
// carries a package comment of its own (two would be merged by go doc, and
// the engineering rule puts it in doc.go). A program of one file
// (examples/shout, which the README shows whole) keeps its comment in that
// file. A new package without one fails here, naming it.
func TestPackageDocInDocGo(t *testing.T) {
	root := moduleRoot(t)
	type pkg struct {
		doc    *ast.File
		others []string // files other than doc.go with a package comment
		files  []*ast.File
	}
	pkgs := map[string]*pkg{}
	eachGoFile(t, root, parser.ParseComments|parser.PackageClauseOnly, func(string) bool { return true },
		func(_ *token.FileSet, rel string, file *ast.File) {
			dir := path.Dir(rel)
			p := pkgs[dir]
			if p == nil {
				p = &pkg{}
				pkgs[dir] = p
			}
			if !strings.HasSuffix(rel, "_test.go") {
				p.files = append(p.files, file)
			}
			switch {
			case path.Base(rel) == "doc.go":
				p.doc = file
			case file.Doc != nil && strings.HasSuffix(file.Name.Name, "_test"):
				// An external test package's comment is not the package's.
			case file.Doc != nil:
				p.others = append(p.others, rel)
			}
		})
	dirs := make([]string, 0, len(pkgs))
	for dir := range pkgs {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		p := pkgs[dir]
		if p.doc == nil && len(p.files) == 1 && p.files[0].Name.Name == "main" && len(p.others) == 1 {
			p.doc, p.others = p.files[0], nil // a program of one file
		}
		if p.doc == nil {
			t.Errorf("%s: no doc.go (the package's comment: what it is, and why it is a package)", dir)
			continue
		}
		want := "Package " + p.doc.Name.Name + " "
		if p.doc.Name.Name == "main" {
			want = "Command " + path.Base(dir) + " "
		}
		if p.doc.Doc == nil || !strings.HasPrefix(p.doc.Doc.Text(), want) {
			t.Errorf("%s/doc.go: its package comment must start %q", dir, want)
		}
		for _, f := range p.others {
			t.Errorf("%s: a package comment outside doc.go (move it there)", f)
		}
	}
}
