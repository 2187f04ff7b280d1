package habits

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestFuzzCorporaHaveTargets fails for a kept fuzz corpus,
// <dir>/testdata/fuzz/<Target>, whose package has no fuzz test of that
// name (the target was renamed or removed and its inputs no longer run),
// and reads the fuzz targets so that a broken walk shows.
func TestFuzzCorporaHaveTargets(t *testing.T) {
	root := moduleRoot(t)
	targets := map[string]bool{} // "dir/FuzzName"
	eachGoFile(t, root, parser.SkipObjectResolution, func(name string) bool { return strings.HasSuffix(name, "_test.go") },
		func(_ *token.FileSet, rel string, file *ast.File) {
			for _, d := range file.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
					targets[path.Join(path.Dir(rel), fn.Name.Name)] = true
				}
			}
		})
	if len(targets) < 30 {
		t.Fatalf("found only %d fuzz targets under %s: the walk is broken", len(targets), root)
	}
	var corpora []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() && filepath.Base(filepath.Dir(p)) == "fuzz" && filepath.Base(filepath.Dir(filepath.Dir(p))) == "testdata" {
			corpora = append(corpora, p)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(corpora)
	kept := 0
	for _, dir := range corpora {
		kept++
		rel, _ := filepath.Rel(root, dir)
		rel = filepath.ToSlash(rel)
		pkg, target, _ := strings.Cut(rel, "/testdata/fuzz/")
		if !targets[path.Join(pkg, target)] {
			t.Errorf("%s: no fuzz test %s in %s: delete the corpus or restore the target", rel, target, pkg)
		}
	}
	if kept < 20 {
		t.Fatalf("found only %d kept corpora: the glob is broken", kept)
	}
}
