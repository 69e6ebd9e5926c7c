package house

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, relative to this package.
const root = "../.."

const module = "github.com/threadclaim/threadclaim"

// The design card's top level, plus what Go's conventions need.
var topLevel = []string{
	"README.md", "go.mod", "go.sum", "spec", "tla", "core", "store", "runner", "tracecheck",
	"scripts", "cmd", "internal",
}

// TestTopLevel: ls shows the card, cmd/ and internal/, and dotfiles.
func TestTopLevel(t *testing.T) {
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || name == "LICENSE" || slices.Contains(topLevel, name) {
			continue
		}
		if ignored(t, name) {
			continue
		}
		t.Errorf("top level: %q is not on the design card (%s); put it under internal/ or cmd/", name, strings.Join(topLevel, ", "))
	}
}

// ignored reports whether git ignores name (a build output, say).
func ignored(t *testing.T, name string) bool {
	t.Helper()
	cmd := exec.Command("git", "check-ignore", "-q", name)
	cmd.Dir = root
	return cmd.Run() == nil
}

// publicPackages are the library: every package outside internal/ and
// cmd/.
var publicPackages = []string{
	"core", "core/coretest", "runner", "store/memory", "store/postgres", "store/storetest", "tracecheck",
}

// rank orders the module's packages: a package may import only packages
// of a lower rank (the internal ones are above the library, the command
// above everything).
func rank(rel string) int {
	switch {
	case rel == "core" || rel == "core/coretest":
		return 0
	case rel == "tracecheck" || rel == "runner" || rel == "store/memory" || rel == "store/postgres":
		return 1
	case rel == "store/storetest":
		return 2
	case strings.HasPrefix(rel, "internal/"):
		return 3
	case strings.HasPrefix(rel, "cmd/"):
		return 4
	}
	return -1
}

type listed struct {
	rel     string
	imports []string
	deps    []string
}

// goList lists the module's packages with their imports and dependencies
// (test files left out).
func goList(t *testing.T, patterns ...string) []listed {
	t.Helper()
	args := append([]string{"list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var ps []listed
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "|", 3)
		ps = append(ps, listed{rel: strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/"), imports: strings.Fields(f[1]), deps: strings.Fields(f[2])})
	}
	return ps
}

// TestPublicPackages: the packages outside internal/ and cmd/ are the
// library, and nothing else.
func TestPublicPackages(t *testing.T) {
	for _, p := range goList(t, "./...") {
		if rank(p.rel) < 0 {
			t.Errorf("package %q is neither the library (%s) nor under internal/ or cmd/", p.rel, strings.Join(publicPackages, ", "))
		}
		if rank(p.rel) <= 2 && !slices.Contains(publicPackages, p.rel) {
			t.Errorf("package %q is public but not one of the library's", p.rel)
		}
	}
}

// TestImportsRunDownwards: no package imports one of its rank or above
// (so storetest does not import the simulators, and core imports only the
// standard library).
func TestImportsRunDownwards(t *testing.T) {
	for _, v := range upwardImports(goList(t, "./...")) {
		t.Error(v)
	}
}

// upwardImports are the imports of ps that break TestImportsRunDownwards'
// rule, one message each.
func upwardImports(ps []listed) []string {
	var found []string
	for _, p := range ps {
		for _, imp := range p.imports {
			if !strings.HasPrefix(imp, module+"/") {
				if p.rel == "core" && strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
					found = append(found, fmt.Sprintf("core imports %s: core imports only the standard library", imp))
				}
				continue
			}
			to := strings.TrimPrefix(imp, module+"/")
			if down := rank(to) < rank(p.rel) || rank(p.rel) == 3 && rank(to) == 3; !down {
				found = append(found, fmt.Sprintf("%s imports %s: an arrow that does not run downwards", p.rel, to))
			}
		}
	}
	return found
}

// TestNoTestLibraryLinked: the command and the library link no testing
// package, testify or rapid.
func TestNoTestLibraryLinked(t *testing.T) {
	for _, p := range goList(t, "./cmd/tracecheck", "./runner", "./core", "./tracecheck", "./store/memory", "./store/postgres") {
		for _, d := range p.deps {
			if isTestLibrary(d) {
				t.Errorf("%s links %s", p.rel, d)
			}
		}
	}
}

// isTestLibrary: the package d is testing, testify or rapid.
func isTestLibrary(d string) bool {
	return d == "testing" || strings.Contains(d, "testify") || strings.Contains(d, "pgregory.net/rapid")
}

// maxExported is the library's budget of exported identifiers.
const maxExported = 400

// TestExportedIdentifiers: at most maxExported exported identifiers
// (top-level declarations, and the methods of exported types) outside
// internal/ and cmd/.
func TestExportedIdentifiers(t *testing.T) {
	total := 0
	for _, rel := range publicPackages {
		n := exported(t, filepath.Join(root, rel))
		t.Logf("%-16s %d", rel, n)
		total += n
	}
	t.Logf("%-16s %d (budget %d)", "total", total, maxExported)
	if total > maxExported {
		t.Errorf("the library exports %d identifiers, over the budget of %d: move machinery under internal/", total, maxExported)
	}
}

// exported counts a package's exported identifiers, test files left out.
func exported(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, f := range parseProduction(t, dir) {
		for _, d := range f.Decls {
			n += exportedIn(d)
		}
	}
	return n
}

// parseProduction parses a package's non-test files, keyed by their base
// names.
func parseProduction(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(path)] = f
	}
	return files
}

func exportedIn(d ast.Decl) int {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return 0
		}
		if d.Recv != nil && !ast.IsExported(receiverType(d.Recv.List[0].Type)) {
			return 0
		}
		return 1
	case *ast.GenDecl:
		n := 0
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					n++
				}
			case *ast.ValueSpec:
				for _, name := range s.Names {
					if name.IsExported() {
						n++
					}
				}
			}
		}
		return n
	}
	return 0
}

// receiverType is the name of a method's receiver type.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// maxFuncLines is the longest a function may be, tests included.
const maxFuncLines = 120

// TestFunctionLength: no function (or function literal) in the module is
// over maxFuncLines lines.
func TestFunctionLength(t *testing.T) {
	for _, v := range longFunctions(t, root) {
		t.Error(v)
	}
}

// longFunctions are the functions and function literals over
// maxFuncLines lines in the Go files under dir (testdata and dot
// directories left out), one message each.
func longFunctions(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var name string
			var body *ast.BlockStmt
			switch fn := n.(type) {
			case *ast.FuncDecl:
				name, body = fn.Name.Name, fn.Body
			case *ast.FuncLit:
				name, body = "a function literal", fn.Body
			default:
				return true
			}
			if body == nil {
				return true
			}
			from, to := fset.Position(n.Pos()), fset.Position(body.Rbrace)
			if lines := to.Line - from.Line + 1; lines > maxFuncLines {
				rel, _ := filepath.Rel(dir, path)
				found = append(found, fmt.Sprintf("%s:%d: %s is %d lines (at most %d)", rel, from.Line, name, lines, maxFuncLines))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestDocsLength: the README is a front door (at most 250 lines), the
// PostgreSQL package's doc comment stays about 120 lines, and no line of
// a Markdown file is over 400 characters.
func TestDocsLength(t *testing.T) {
	if n := len(readLines(t, filepath.Join(root, "README.md"))); n > 250 {
		t.Errorf("README.md is %d lines (at most 250): figures go in a BENCH.md beside their benchmark", n)
	}
	if n := len(readLines(t, filepath.Join(root, "store", "postgres", "doc.go"))); n > 130 {
		t.Errorf("store/postgres/doc.go is %d lines (about 120 at most)", n)
	}
	for _, v := range longMarkdownLines(t, root) {
		t.Error(v)
	}
}

// longMarkdownLines are the lines over 400 characters of the Markdown
// files under dir (dot directories left out, .github kept), one message
// each.
func longMarkdownLines(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && strings.HasPrefix(d.Name(), ".") && d.Name() != ".github" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		for i, line := range readLines(t, path) {
			if n := len([]rune(line)); n > 400 {
				rel, _ := filepath.Rel(dir, path)
				found = append(found, fmt.Sprintf("%s:%d: a line of %d characters (at most 400)", rel, i+1, n))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestNoToolDirective: the library's go.mod carries no tool's dependency
// graph (the tools have a module of their own under scripts/tools).
func TestNoToolDirective(t *testing.T) {
	for _, line := range readLines(t, filepath.Join(root, "go.mod")) {
		if strings.HasPrefix(strings.TrimSpace(line), "tool ") || strings.TrimSpace(line) == "tool (" {
			t.Errorf("go.mod: %q: every importer would inherit the tool's graph; put it in scripts/tools/go.mod", line)
		}
	}
}

// allowedForTesting are the test switches core may keep on its
// production path: the deliberate mutants (fences off, the documented
// defects) and the fork the deterministic simulator uses.
var allowedForTesting = []string{"WithFencesForTesting", "WithMutantsForTesting", "ForkForTesting"}

// TestNoTestSwitchesInCore: core's production code has no ForTesting
// switch but the allowed ones.
func TestNoTestSwitchesInCore(t *testing.T) {
	for name, f := range parseProduction(t, filepath.Join(root, "core")) {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if ok && strings.HasSuffix(fn.Name.Name, "ForTesting") && !slices.Contains(allowedForTesting, fn.Name.Name) {
				t.Errorf("%s: %s is a test switch on core's production path", name, fn.Name.Name)
			}
		}
	}
}

// TestTLCTraceFilesIgnored: the _TTrace_ files TLC run by hand leaves in
// spec/ are ignored by git, so they are never committed by mistake.
func TestTLCTraceFilesIgnored(t *testing.T) {
	for _, name := range []string{"spec/ThreadClaimLapse_TTrace_1764650000.tla", "spec/ThreadClaimLapse_TTrace_1764650000.bin"} {
		if !ignored(t, name) {
			t.Errorf("git does not ignore %s (a file TLC leaves behind)", name)
		}
	}
}

// TestReadmeSaysWhatGoRunHides: the README, whose examples use go run,
// says that go run turns every exit code into 1 and how to build the
// binary whose codes are its own.
func TestReadmeSaysWhatGoRunHides(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"`go run` turns\nevery exit code but 0 into 1", "go build -o tracecheck ./cmd/tracecheck"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
}
