package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"

	"github.com/threadclaim/threadclaim/internal/tlc"
)

const versionUsage = `usage: tracecheck version [flags]

Prints what a verdict depends on: the module's version (and the commit it
was built from, when the build knows it), TLC's version line, the path and
sha256 of the tla2tools.jar tracecheck tlc would use (found as it finds
it; "not found" and why otherwise), and the sha256 of the specification
(spec/*.tla and tla/*.tla under -root, each file's name and contents).
'tracecheck -version' is the same.

Flags:
`

// versionFigures is version's -json figures.
type versionFigures struct {
	Module     string `json:"module"`
	Version    string `json:"version"`
	Revision   string `json:"revision,omitempty"`
	TLC        string `json:"tlc"`
	Jar        string `json:"jar,omitempty"`
	JarSHA256  string `json:"jar_sha256,omitempty"`
	SpecSHA256 string `json:"spec_sha256"`
}

func cmdVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	root := fs.String("root", ".", "the repository's root, whose spec/ and tla/ are digested")
	jsonOut := jsonFlag(fs)
	if err := parse(fs, args, stdout, stderr, versionUsage); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	var v versionFigures
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Module, v.Version = bi.Main.Path, bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Revision = s.Value
			}
		}
	}
	digest, err := specDigest(*root)
	if err != nil {
		return usageError{fmt.Sprintf("-root %s: %v", *root, err)}
	}
	v.SpecSHA256 = digest
	cfg := findConfig(*root)
	cfg.Fetch = nil // version reports what is here; it downloads nothing
	env, err := tlc.Find(ctx, cfg)
	if err != nil {
		v.TLC = "not found: " + err.Error()
	} else {
		v.Jar = env.Jar
		if v.JarSHA256, err = tlc.FileSHA256(env.Jar); err != nil {
			return err
		}
		if v.TLC, err = env.Version(ctx); err != nil {
			v.TLC = "no version line: " + err.Error()
		}
	}
	if *jsonOut {
		return writeJSON(stdout, "version", nil, v)
	}
	fmt.Fprintf(stdout, "tracecheck %s %s", v.Module, v.Version)
	if v.Revision != "" {
		fmt.Fprintf(stdout, " (commit %s)", v.Revision)
	}
	fmt.Fprintf(stdout, "\ntlc        %s\n", v.TLC)
	if v.Jar != "" {
		fmt.Fprintf(stdout, "jar        %s\njar sha256 %s\n", v.Jar, v.JarSHA256)
	}
	fmt.Fprintf(stdout, "spec       sha256 %s (spec/*.tla, tla/*.tla)\n", v.SpecSHA256)
	return nil
}

// specDigest is the sha256 of spec/*.tla and tla/*.tla under root: each
// file's path, its length and its contents, in path order.
func specDigest(root string) (string, error) {
	var files []string
	for _, dir := range []string{"spec", "tla"} {
		m, err := filepath.Glob(filepath.Join(root, dir, "*.tla"))
		if err != nil {
			return "", err
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no spec/*.tla or tla/*.tla (run from the repository's root or give -root)")
	}
	slices.Sort(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, f)
		fmt.Fprintf(h, "%s\n%d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
