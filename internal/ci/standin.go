package ci

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// pinOf is the scripts/tlc-pins name of the commit a repository's checkout
// must be at.
var pinOf = map[string]string{
	"tlaplus/tlaplus":          "TLAPLUS_COMMIT",
	"tlaplus/CommunityModules": "COMMUNITY_MODULES_COMMIT",
}

// StandIn stands in for the actions the workflow uses, with what this
// machine has: actions/checkout of the workflow's own repository is the
// clone (another repository's must be at its pin, and is an empty
// directory here); setup-go and setup-java need go and java on PATH; the
// cache is empty (cache-hit false); upload-artifact records its path.
func (r *Runner) StandIn(ctx context.Context, j *JobRun, st Step, with map[string]string) error {
	action, _, _ := strings.Cut(st.Uses, "@")
	switch action {
	case "actions/checkout":
		repo := with["repository"]
		if repo == "" {
			return nil
		}
		name, ok := pinOf[repo]
		if !ok {
			return fmt.Errorf("checkout of %s: no pin in scripts/tlc-pins", repo)
		}
		if want := r.Pins[name]; with["ref"] != want {
			return fmt.Errorf("checkout of %s at %q, but scripts/tlc-pins has %s=%s", repo, with["ref"], name, want)
		}
		return os.MkdirAll(filepath.Join(j.Clone, with["path"]), 0o755)
	case "actions/setup-go":
		if f := with["go-version-file"]; f != "" {
			if _, err := os.Stat(filepath.Join(j.Clone, f)); err != nil {
				return fmt.Errorf("go-version-file: %w", err)
			}
		}
		_, err := exec.LookPath("go")
		return err
	case "actions/setup-java":
		_, err := exec.LookPath("java")
		return err
	case "actions/cache":
		if with["key"] == "" || with["path"] == "" {
			return fmt.Errorf("the cache needs a key and a path")
		}
		j.SetOutput("cache-hit", "false")
		return nil
	case "actions/upload-artifact":
		name, path := with["name"], with["path"]
		if name == "" || path == "" {
			return fmt.Errorf("upload-artifact needs a name and a path")
		}
		if _, err := os.Stat(path); err != nil {
			if with["if-no-files-found"] == "ignore" {
				return nil
			}
			return fmt.Errorf("upload-artifact %s: %w", name, err)
		}
		j.Artifacts[name] = path
		return nil
	}
	return fmt.Errorf("%s: no stand-in on this machine", st.Uses)
}

// ReadPins reads scripts/tlc-pins: NAME=VALUE lines, # comments.
func ReadPins(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pins := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			pins[k] = v
		}
	}
	return pins, sc.Err()
}

var (
	commitRE  = regexp.MustCompile(`\b[0-9a-f]{40}\b`)
	sha256RE  = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	versionRE = regexp.MustCompile(`tla2tools(?:\.jar)? (v\d+\.\d+\.\d+)`)
)

// CheckPins checks what the workflow's text says of the pinned tools
// against scripts/tlc-pins: every commit it names is a pinned commit,
// every sha256 the release's, every tla2tools version the release URL's.
func CheckPins(text string, pins map[string]string) error {
	for _, c := range commitRE.FindAllString(text, -1) {
		if c != pins["TLAPLUS_COMMIT"] && c != pins["COMMUNITY_MODULES_COMMIT"] {
			return fmt.Errorf("the workflow names commit %s, which is not a pin of scripts/tlc-pins", c)
		}
	}
	for _, d := range sha256RE.FindAllString(text, -1) {
		if d != pins["TLA2TOOLS_RELEASE_SHA256"] {
			return fmt.Errorf("the workflow names sha256 %s, not scripts/tlc-pins' TLA2TOOLS_RELEASE_SHA256 %s", d, pins["TLA2TOOLS_RELEASE_SHA256"])
		}
	}
	for _, m := range versionRE.FindAllStringSubmatch(text, -1) {
		if !strings.Contains(pins["TLA2TOOLS_RELEASE_URL"], "/"+m[1]+"/") {
			return fmt.Errorf("the workflow says tla2tools %s, but scripts/tlc-pins' release is %s", m[1], pins["TLA2TOOLS_RELEASE_URL"])
		}
	}
	return nil
}
