package ci

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// noraceStep matches scripts/test's step without the race detector: its
// -run pattern, then the packages it runs.
var noraceStep = regexp.MustCompile(`gotest go-test-norace [^\n]*-run '([^']+)'((?: \./[^ \n]+)+)`)

// TestRaceSkipsRunWithoutRace: a test that skips under the race detector
// (it reads raceEnabled in an if with a t.Skip) runs in scripts/test's
// step without it: its package is among the step's and its name matches
// the step's -run. Else the test command would not run it at all.
func TestRaceSkipsRunWithoutRace(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(root, "scripts", "test"))
	if err != nil {
		t.Fatal(err)
	}
	m := noraceStep.FindStringSubmatch(string(script))
	if m == nil {
		t.Fatal("scripts/test has no `gotest go-test-norace ... -run '...' ./pkg...` step")
	}
	run := regexp.MustCompile(m[1])
	pkgs := map[string]bool{}
	for _, p := range strings.Fields(m[2]) {
		pkgs[filepath.ToSlash(filepath.Clean(p))] = true
	}
	skipping := raceSkippingTests(t)
	if len(skipping) == 0 {
		t.Fatal("found no test that skips under the race detector: the search is broken")
	}
	for _, s := range skipping {
		if why, ok := runElsewhere[s.name]; ok {
			t.Logf("%s: %s", s.name, why)
			continue
		}
		if !pkgs[s.pkg] || !run.MatchString(s.name) {
			t.Errorf("%s (%s) skips under -race but scripts/test's step without it does not run it (package listed: %v; -run %q)", s.name, s.pkg, pkgs[s.pkg], m[1])
		}
	}
}

// runElsewhere names the tests that skip under -race whose check
// scripts/test makes in another step, and that step.
var runElsewhere = map[string]string{
	"TestSpecMutantsCaught": "the spec mutants are scripts/test's TLC step's (tracecheck tlc mutants, within scripts/tlc)",
}

type namedTest struct{ pkg, name string }

// raceSkippingTests lists the Test functions of the module whose body
// has an if that reads raceEnabled and calls t.Skip.
func raceSkippingTests(t *testing.T) []namedTest {
	t.Helper()
	var out []namedTest
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			if skipsUnderRace(fn.Body) {
				out = append(out, namedTest{filepath.ToSlash(rel), fn.Name.Name})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// skipsUnderRace reports whether body has an if whose condition reads
// raceEnabled and whose branch calls a Skip method.
func skipsUnderRace(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		is, ok := n.(*ast.IfStmt)
		if !ok || found || !mentions(is.Cond, "raceEnabled") {
			return !found
		}
		ast.Inspect(is.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Skip") {
				found = true
			}
			return !found
		})
		return !found
	})
	return found
}

func mentions(e ast.Expr, name string) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == name {
			found = true
		}
		return !found
	})
	return found
}
