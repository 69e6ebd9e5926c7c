package house

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The sixteenth mutation pass's tests of the house rules themselves: each
// rule, given a repository that breaks it, says so, and one that keeps
// it, says nothing. The rules' tests above pass on this repository,
// which keeps them; these show that they would fail on one that did not.

// TestRank: the ranks the layout gives the module's packages (mutant:
// storetest at the library's rank, which would forbid it the storages it
// exercises).
func TestRank(t *testing.T) {
	for rel, want := range map[string]int{
		"core": 0, "core/coretest": 0,
		"runner": 1, "tracecheck": 1, "store/memory": 1, "store/postgres": 1,
		"store/storetest": 2,
		"internal/sim":    3, "internal/cli": 3,
		"cmd/tracecheck": 4,
		"pkg/util":       -1, "store": -1,
	} {
		if got := rank(rel); got != want {
			t.Errorf("rank(%q) = %d, want %d", rel, got, want)
		}
	}
}

// TestUpwardImportsBite: an import within one rank of the library, or
// upwards, and core importing anything outside the standard library, are
// found; the internal packages' imports of each other, and downward
// ones, are not (mutants: same-rank imports allowed; core's standard
// library check skipped).
func TestUpwardImportsBite(t *testing.T) {
	in := func(rel string) string { return module + "/" + rel }
	for _, c := range []struct {
		name  string
		p     listed
		found int
	}{
		{"the library within its rank", listed{rel: "runner", imports: []string{in("tracecheck")}}, 1},
		{"the library upwards", listed{rel: "store/storetest", imports: []string{in("internal/sim")}}, 1},
		{"core beside coretest", listed{rel: "core", imports: []string{in("core/coretest")}}, 1},
		{"core outside the standard library", listed{rel: "core", imports: []string{"fmt", "github.com/google/uuid"}}, 1},
		{"core in the standard library", listed{rel: "core", imports: []string{"fmt", "net/http"}}, 0},
		{"downwards", listed{rel: "store/storetest", imports: []string{in("store/memory"), in("core"), "github.com/stretchr/testify/require"}}, 0},
		{"internal to internal", listed{rel: "internal/sim", imports: []string{in("internal/tlc"), in("runner")}}, 0},
	} {
		if got := upwardImports([]listed{c.p}); len(got) != c.found {
			t.Errorf("%s: found %q, want %d", c.name, got, c.found)
		}
	}
}

// TestIsTestLibrary: testing, testify and rapid are test libraries, the
// standard library's other packages are not (mutant: testing itself
// left out).
func TestIsTestLibrary(t *testing.T) {
	for d, want := range map[string]bool{
		"testing": true, "github.com/stretchr/testify/require": true, "pgregory.net/rapid": true,
		"fmt": false, "net/http/httptest": false,
	} {
		if got := isTestLibrary(d); got != want {
			t.Errorf("isTestLibrary(%q) = %v, want %v", d, got, want)
		}
	}
}

// TestLongFunctionsBite: a function and a function literal of
// maxFuncLines+1 lines are found, one of maxFuncLines is not, nor one
// under testdata (mutant: function literals not looked at).
func TestLongFunctionsBite(t *testing.T) {
	dir := t.TempDir()
	// fn is a function of n lines, its declaration and closing brace
	// included.
	fn := func(decl string, n int) string {
		return decl + " {\n" + strings.Repeat("\t_ = 0\n", n-2) + "}\n"
	}
	src := "package p\n\n" + fn("func fits()", maxFuncLines) + fn("func tooLong()", maxFuncLines+1) +
		"var lit = " + fn("func()", maxFuncLines+1)
	write(t, filepath.Join(dir, "p.go"), src)
	write(t, filepath.Join(dir, "testdata", "q.go"), "package q\n\n"+fn("func ignored()", maxFuncLines+1))
	got := longFunctions(t, dir)
	want := []string{"tooLong is 121 lines", "a function literal is 121 lines"}
	if len(got) != len(want) {
		t.Fatalf("found %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("found %q, want %q", got[i], w)
		}
	}
}

// TestLongMarkdownLinesBite: a line over 400 characters is found, in
// .github's Markdown too; one of 400 is not, nor one in another dot
// directory (mutant: .github skipped as the other dot directories are).
func TestLongMarkdownLinesBite(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.md"), strings.Repeat("a", 400)+"\n"+strings.Repeat("é", 401)+"\n")
	write(t, filepath.Join(dir, ".github", "b.md"), strings.Repeat("b", 401)+"\n")
	write(t, filepath.Join(dir, ".cache", "c.md"), strings.Repeat("c", 401)+"\n")
	got := longMarkdownLines(t, dir)
	want := []string{filepath.Join(".github", "b.md") + ":1: a line of 401 characters", "a.md:2: a line of 401 characters"}
	slices.Sort(got)
	if len(got) != len(want) {
		t.Fatalf("found %q, want %q", got, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("found %q, want %q", got[i], w)
		}
	}
}

// TestExportedCounts: the exported identifiers are the exported
// top-level names and the methods of exported types, not a method of an
// unexported type (mutant: those counted too).
func TestExportedCounts(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.go"), `package p

type T struct{}

func (T) M()      {}
func (*T) N()     {}
func (T) hidden() {}

type u struct{}

func (u) M() {}

func F() {}
func f() {}

var A, B, c = 1, 2, 3

const K = 1
`)
	write(t, filepath.Join(dir, "p_test.go"), "package p\n\nfunc TestX() {}\n")
	if got := exported(t, dir); got != 7 {
		t.Errorf("%d exported identifiers, want 7 (T, T.M, T.N, F, A, B, K)", got)
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
