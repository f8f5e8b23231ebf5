package testbin

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/cubicle-sandbox/cubicle/"

// internalPath matches the internal package paths a doc.go names.
var internalPath = regexp.MustCompile(`\binternal(/[a-z0-9]+)+\b`)

// sentenceEnd ends a "may import" list.
var sentenceEnd = regexp.MustCompile(`[.;](\s|$)`)

// TestLayering: every package under internal/ says in its doc.go, in a
// paragraph with the words "may import", which internal packages it may
// import ("its own subpackages" allows those); importing any other fails.
// So the layers drawn in docs/ARCHITECTURE.md cannot drift.
func TestLayering(t *testing.T) {
	root := repoRoot(t)
	pkgs := internalPackages(t, root)
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages under %s/internal", len(pkgs), root)
	}
	for _, dir := range pkgs {
		rel, _ := filepath.Rel(root, dir)
		allowed, subs, ok := mayImport(t, dir)
		if !ok {
			t.Errorf("%s/doc.go has no paragraph saying what the package may import (\"It may import ...\")", rel)
			continue
		}
		for _, imp := range imports(t, dir) {
			if slices.Contains(allowed, imp) || (subs && strings.HasPrefix(imp, rel+"/")) {
				continue
			}
			t.Errorf("%s imports %s, which its doc.go does not allow (may import: %v)", rel, imp, allowed)
		}
	}
}

// TestMayImportParsing: the list ends with its sentence, so a package named
// after it ("stays in internal/x") is not allowed; a missing paragraph is
// reported.
func TestMayImportParsing(t *testing.T) {
	dir := t.TempDir()
	doc := "// Package p does things.\n//\n// It may import internal/a and\n// internal/b/c (its own subpackages too); routing stays in internal/x.\npackage p\n"
	if err := os.WriteFile(filepath.Join(dir, "doc.go"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	allowed, subs, ok := mayImport(t, dir)
	if !ok || !subs || !slices.Equal(allowed, []string{"internal/a", "internal/b/c"}) {
		t.Fatalf("got %v subs=%v ok=%v", allowed, subs, ok)
	}
	os.WriteFile(filepath.Join(dir, "doc.go"), []byte("// Package p imports internal/a.\npackage p\n"), 0o644)
	if _, _, ok := mayImport(t, dir); ok {
		t.Fatal("a doc.go without \"may import\" passed")
	}
}

// repoRoot is the module root above this package's directory.
func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}

// internalPackages lists the directories under internal/ with non-test Go
// files, testdata excluded.
func internalPackages(t *testing.T, root string) []string {
	seen := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			seen[filepath.Dir(p)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sortedKeys(seen)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// mayImport reads dir/doc.go's "may import" paragraph: the internal
// packages it names, and whether it allows the package's own subpackages.
func mayImport(t *testing.T, dir string) (allowed []string, subs, ok bool) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "doc.go"), nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil || f.Doc == nil {
		return nil, false, false
	}
	for _, para := range strings.Split(f.Doc.Text(), "\n\n") {
		flat := strings.Join(strings.Fields(para), " ")
		if !strings.Contains(strings.ToLower(flat), "may import") {
			continue
		}
		// The list runs from "may import" to the end of its sentence (or a
		// semicolon): packages named after it are not allowed by it.
		list := flat[strings.Index(strings.ToLower(flat), "may import"):]
		if end := sentenceEnd.FindStringIndex(list); end != nil {
			list = list[:end[0]]
		}
		return internalPath.FindAllString(list, -1), strings.Contains(list, "its own subpackages"), true
	}
	return nil, false, false
}

// imports lists the internal packages dir's non-test files import, as
// paths relative to the module ("internal/store").
func imports(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if rel, ok := strings.CutPrefix(p, module); ok && strings.HasPrefix(rel, "internal/") {
				seen[rel] = true
			}
		}
	}
	return sortedKeys(seen)
}
