package tlc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Release is a tla2tools.jar release asset pinned by its sha256.
type Release struct {
	URL    string
	SHA256 string
}

// FindConfig says where Find looks. Its zero value reads the process's
// environment and PATH and never downloads.
type FindConfig struct {
	// Getenv reads an environment variable; nil means os.Getenv.
	Getenv func(string) string
	// LookPath finds java; nil means exec.LookPath.
	LookPath func(string) (string, error)
	// Release is the pinned release of tla2tools.jar to use when neither
	// TLA2TOOLS_JAR nor the local directory gives one: a copy in the cache
	// (CacheDir()/SHA256/tla2tools.jar) whose digest matches, or, through
	// Fetch, a download. Zero: no release.
	Release Release
	// Fetch downloads rel into dest (a file that does not exist yet). Find
	// calls it only when Release is set, TLC_OFFLINE is not 1 and no
	// cached copy matches, and checks the file's sha256 after it returns,
	// removing it on a mismatch. Nil: never download.
	Fetch func(ctx context.Context, rel Release, dest string) error
	// Workers becomes Env.Workers; TLC_WORKERS overrides it.
	Workers int
}

func (c FindConfig) getenv(k string) string {
	if c.Getenv == nil {
		return os.Getenv(k)
	}
	return c.Getenv(k)
}

// The environment variables Find reads.
const (
	EnvJar             = "TLA2TOOLS_JAR"
	EnvJarSHA256       = "TLA2TOOLS_SHA256"
	EnvCommunity       = "COMMUNITY_MODULES_JAR"
	EnvCommunitySHA256 = "COMMUNITY_MODULES_SHA256"
	EnvCacheDir        = "TLC_CACHE_DIR"
	EnvOffline         = "TLC_OFFLINE"
	EnvWorkers         = "TLC_WORKERS"
)

// The jars' file names in the local directory and the cache.
const (
	JarName       = "tla2tools.jar"
	CommunityName = "CommunityModules-deps.jar"
)

// CacheDir is where Find looks for jars: $TLC_CACHE_DIR, else
// $XDG_CACHE_HOME/threadclaim-tlc, else $HOME/.cache/threadclaim-tlc.
func (c FindConfig) CacheDir() string {
	if d := c.getenv(EnvCacheDir); d != "" {
		return d
	}
	if d := c.getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "threadclaim-tlc")
	}
	return filepath.Join(c.getenv("HOME"), ".cache", "threadclaim-tlc")
}

// LocalDir is the directory where a user puts jars they built or obtained
// themselves: CacheDir()/local. Find uses them without a digest.
func (c FindConfig) LocalDir() string { return filepath.Join(c.CacheDir(), "local") }

// Find finds java and the jars. tla2tools.jar is, in order:
//
//  1. $TLA2TOOLS_JAR, checked against $TLA2TOOLS_SHA256 when that is set;
//  2. LocalDir()/tla2tools.jar, used as it is (the user put it there);
//  3. the pinned release (cfg.Release): a cached copy whose sha256
//     matches, or a download through cfg.Fetch, verified before use.
//
// CommunityModules-deps.jar, needed by the trace spec only, is
// $COMMUNITY_MODULES_JAR (checked against $COMMUNITY_MODULES_SHA256 when
// set), else LocalDir()/CommunityModules-deps.jar, else none (Env's
// CommunityJar is "": no release of it loads on the pinned TLC release).
//
// Find returns an error wrapping ErrNotFound when there is no java or no
// tla2tools.jar, and ErrDigest when a jar does not have the sha256 it must
// have; it runs no java in either case.
func Find(ctx context.Context, cfg FindConfig) (Env, error) {
	look := cfg.LookPath
	if look == nil {
		look = exec.LookPath
	}
	java, err := look("java")
	if err != nil {
		return Env{}, fmt.Errorf("%w: no java on PATH", ErrNotFound)
	}
	env := Env{Java: java, Workers: cfg.Workers}
	if w := cfg.getenv(EnvWorkers); w != "" && w != "auto" {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			return Env{}, fmt.Errorf("tlc: %s=%q is not a number of workers (or auto)", EnvWorkers, w)
		}
		env.Workers = n
	}
	local := cfg.LocalDir()

	env.CommunityJar, err = cfg.given(EnvCommunity, EnvCommunitySHA256)
	if err != nil {
		return Env{}, err
	}
	if env.CommunityJar == "" && isFile(filepath.Join(local, CommunityName)) {
		env.CommunityJar = filepath.Join(local, CommunityName)
	}

	env.Jar, err = cfg.given(EnvJar, EnvJarSHA256)
	switch {
	case err != nil:
		return Env{}, err
	case env.Jar != "":
		env.Source = EnvJar
		return env, nil
	case isFile(filepath.Join(local, JarName)):
		env.Jar, env.Source = filepath.Join(local, JarName), "local "+local
		return env, nil
	}
	rel := cfg.Release
	if rel.SHA256 == "" {
		return Env{}, fmt.Errorf("%w: no %s (%s)", ErrNotFound, JarName, cfg.remedy(rel))
	}
	env.Jar, err = cfg.release(ctx, rel)
	if err != nil {
		return Env{}, err
	}
	env.Source = rel.URL + " (sha256 verified)"
	return env, nil
}

// given is the jar named by the variable name, checked against the digest
// in shaName when that is set; "" when name is unset.
func (c FindConfig) given(name, shaName string) (string, error) {
	path := c.getenv(name)
	if path == "" {
		return "", nil
	}
	if !isFile(path) {
		return "", fmt.Errorf("%w: %s=%s is not a file", ErrNotFound, name, path)
	}
	if want := c.getenv(shaName); want != "" {
		if err := checkDigest(path, want); err != nil {
			return "", fmt.Errorf("%s=%s: %w", name, path, err)
		}
	}
	// TLC runs in a work directory of its own: a path relative to this
	// process's would name nothing there.
	return filepath.Abs(path)
}

// release returns a verified copy of rel in the cache, downloading it
// when allowed.
func (c FindConfig) release(ctx context.Context, rel Release) (string, error) {
	want := strings.ToLower(rel.SHA256)
	dest := filepath.Join(c.CacheDir(), want, JarName)
	if isFile(dest) {
		if err := checkDigest(dest, want); err != nil {
			return "", fmt.Errorf("cached %s: %w", dest, err)
		}
		return dest, nil
	}
	if c.Fetch == nil || c.getenv(EnvOffline) == "1" {
		return "", fmt.Errorf("%w: no %s (%s)", ErrNotFound, JarName, c.remedy(rel))
	}
	dir := filepath.Dir(dest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("tlc: %w", err)
	}
	part := dest + ".part"
	_ = os.Remove(part)
	if err := c.Fetch(ctx, rel, part); err != nil {
		_ = os.Remove(part)
		// No empty cache directory is left behind by a failed download
		// (Remove removes only an empty one).
		_ = os.Remove(dir)
		return "", fmt.Errorf("%w: downloading %s: %v (%s)", ErrNotFound, rel.URL, err, c.remedy(rel))
	}
	if err := checkDigest(part, want); err != nil {
		_ = os.Remove(part)
		return "", fmt.Errorf("downloaded %s: %w", rel.URL, err)
	}
	if err := os.Rename(part, dest); err != nil {
		return "", fmt.Errorf("tlc: %w", err)
	}
	return dest, nil
}

// remedy says how to get a tla2tools.jar when none was found.
func (c FindConfig) remedy(rel Release) string {
	url := "the release scripts/tlc-pins pins"
	if rel.URL != "" {
		url = rel.URL
	}
	return fmt.Sprintf("to get one: set %s to a jar; or put one in %s; or run scripts/tlc-jars release on a machine with network (it downloads %s and checks its sha256), or scripts/tlc-jars build with ant; then run again",
		EnvJar, c.LocalDir(), url)
}

// checkDigest returns an error wrapping ErrDigest unless the file at path
// has the sha256 want (hex).
func checkDigest(path, want string) error {
	got, err := FileSHA256(path)
	if err != nil {
		return err
	}
	if !strings.EqualFold(got, want) {
		return fmt.Errorf("%w: got %s, want %s", ErrDigest, got, want)
	}
	return nil
}

// FileSHA256 is the hex sha256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
