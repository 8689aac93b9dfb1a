package kindcheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// root is the repository root, from this package's directory.
const root = "../.."

// allowed reports whether the file at rel (slash-separated, from the
// root) may compare kinds by name: the registry and the deciders.
func allowed(rel string) bool {
	dir, file := filepath.Split(filepath.FromSlash(rel))
	return filepath.ToSlash(filepath.Clean(dir)) == "bandit" && (file == "kinds.go" || strings.HasPrefix(file, "kind_"))
}

// kindNames returns the kinds' names and the names of the constants
// that hold them (const X PolicyKind = "...", in bandit/spec/; package
// bandit names each by an alias of the same name).
func kindNames(t *testing.T, root string) (names, consts map[string]bool) {
	t.Helper()
	names, consts = map[string]bool{}, map[string]bool{}
	for _, k := range bandit.PolicyKinds() {
		names[string(k)] = true
	}
	files, err := filepath.Glob(filepath.Join(root, "bandit", "spec", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "PolicyKind" {
					for _, n := range vs.Names {
						consts[n.Name] = true
					}
				}
			}
		}
	}
	return names, consts
}

// violations lists, as "file:line: what", every comparison of a policy
// kind by name in the non-test Go files under root outside the allowed
// files.
func violations(t *testing.T, root string, names, consts map[string]bool) []string {
	t.Helper()
	// isKind reports whether e names a kind: a string literal equal to
	// one, a kind constant (X or pkg.X), or a conversion of either.
	var isKind func(e ast.Expr) bool
	isKind = func(e ast.Expr) bool {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(e.Value)
			return e.Kind == token.STRING && err == nil && names[s]
		case *ast.Ident:
			return consts[e.Name]
		case *ast.SelectorExpr:
			return consts[e.Sel.Name]
		case *ast.ParenExpr:
			return isKind(e.X)
		case *ast.CallExpr:
			return len(e.Args) == 1 && isKind(e.Args[0])
		}
		return false
	}
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if allowed(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		flag := func(n ast.Node, what string) {
			out = append(out, fmt.Sprintf("%s:%d: %s", rel, fset.Position(n.Pos()).Line, what))
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (isKind(n.X) || isKind(n.Y)) {
					flag(n, "a policy kind compared by name")
				}
			case *ast.CaseClause:
				for _, e := range n.List {
					if isKind(e) {
						flag(e, "a policy kind as a switch case")
					}
				}
			case *ast.CompositeLit:
				if _, ok := n.Type.(*ast.MapType); ok {
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok && isKind(kv.Key) {
							flag(kv, "a map keyed by policy kind")
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKindsComparedOnlyInDeciders: outside bandit/kinds.go and
// bandit/kind_*.go no code compares a policy kind by name; it asks
// bandit.Capabilities instead.
func TestKindsComparedOnlyInDeciders(t *testing.T) {
	names, consts := kindNames(t, root)
	if len(names) != len(bandit.PolicyKinds()) || len(consts) != len(names) {
		t.Fatalf("found %d kind names and %d kind constants, want %d of each", len(names), len(consts), len(bandit.PolicyKinds()))
	}
	for _, v := range violations(t, root, names, consts) {
		t.Errorf("%s outside its decider (bandit/kind_*.go) and the registry (bandit/kinds.go): ask bandit.Capabilities", v)
	}

	t.Run("a planted comparison fails", func(t *testing.T) {
		dir := t.TempDir()
		src := `package p

import "github.com/refinery-bandits/refinery/bandit"

var costs = map[string]int{"refined-ts": 0}

func f(k bandit.PolicyKind, s string) bool {
	switch k {
	case bandit.Uniform:
		return true
	}
	return s == "mf-ts" || string(k) != string(bandit.EpsGreedy) || s == "not-a-kind"
}
`
		for _, rel := range []string{"api/planted.go", "bandit/kind_planted.go", "bandit/planted_test.go"} {
			path := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got := violations(t, dir, names, consts)
		want := []string{
			"api/planted.go:5: a map keyed by policy kind",
			"api/planted.go:9: a policy kind as a switch case",
			"api/planted.go:12: a policy kind compared by name",
			"api/planted.go:12: a policy kind compared by name",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("violations in the planted tree:\n%s\nwant (a decider file and a test file may compare):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
