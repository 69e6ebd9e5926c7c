package explore

import (
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
