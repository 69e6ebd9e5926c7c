package explore

import (
	_ "embed"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/threadclaim/threadclaim/core"
)

// SpecPath is where the spec lives in the repository.
const SpecPath = "spec/ThreadClaimLapse.tla"

// ErrNoSpec: the spec's text was not found.
var ErrNoSpec = errors.New("spec/ThreadClaimLapse.tla not found")

// FindSpec looks for SpecPath in dir and its parents: the explorer reads
// the spec's text when it runs, so a page always shows the spec as it is
// now, whoever edited it last.
func FindSpec(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, SpecPath)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoSpec
		}
		dir = parent
	}
}

// EmbeddedSpecPath is the copy of SpecPath built into the binary, for a
// page written outside the repository. TestEmbeddedSpecIsTheSpec fails
// when it differs from SpecPath; refresh it with
//
//	cp spec/ThreadClaimLapse.tla internal/explore/spec/ThreadClaimLapse.tla
const EmbeddedSpecPath = "internal/explore/spec/ThreadClaimLapse.tla"

//go:embed spec/ThreadClaimLapse.tla
var embeddedSpec string

// LoadSpec returns the spec's text and says where it came from: the file
// path when path is given; else SpecPath found from dir or a parent (the
// spec as it is now); else the copy built into the binary, as it was
// when the binary was built. An error only for a given path that cannot
// be read: the text is never silently missing.
func LoadSpec(path, dir string) (text, from string, err error) {
	if path == "" {
		path, _ = FindSpec(dir)
	}
	if path == "" {
		return embeddedSpec, "the copy of " + SpecPath + " built into this binary (no " + SpecPath + " in " + dir + " or a parent)", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	return string(b), path, nil
}

var definition = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*==`)

// ActionTexts returns the TLA+ text of each of the spec's actions that
// module (the text of spec/ThreadClaimLapse.tla) defines, found by the
// operator's name — not by line numbers, which edits move: the comment
// lines just above the definition, the definition, and its body up to the
// next blank line or definition.
func ActionTexts(module string) map[string]string {
	lines := strings.Split(module, "\n")
	want := map[string]bool{}
	for _, a := range core.Actions() {
		want[string(a)] = true
	}
	out := map[string]string{}
	for i, l := range lines {
		m := definition.FindStringSubmatch(l)
		if m == nil || !want[m[1]] {
			continue
		}
		from := i
		for from > 0 && strings.HasPrefix(strings.TrimSpace(lines[from-1]), `\*`) {
			from--
		}
		to := i + 1
		for to < len(lines) {
			next := lines[to]
			if strings.TrimSpace(next) == "" || definition.MatchString(next) || strings.HasPrefix(next, "----") || strings.HasPrefix(next, "====") {
				break
			}
			to++
		}
		out[m[1]] = strings.Join(lines[from:to], "\n")
	}
	return out
}
