package tlc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// findWorld is a fake environment for Find: variables, a PATH with or
// without java, and a Fetch that counts its calls.
type findWorld struct {
	vars    map[string]string
	noJava  bool
	fetched int
	payload []byte // what Fetch writes; nil: Fetch fails
}

func (w *findWorld) config(rel Release) FindConfig {
	return FindConfig{
		Getenv: func(k string) string { return w.vars[k] },
		LookPath: func(string) (string, error) {
			if w.noJava {
				return "", errors.New("not found")
			}
			return "/fake/java", nil
		},
		Release: rel,
		Fetch: func(_ context.Context, _ Release, dest string) error {
			w.fetched++
			if w.payload == nil {
				return errors.New("connection refused")
			}
			return os.WriteFile(dest, w.payload, 0o644)
		},
	}
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFind covers the order of Find's places and its digest checks: a jar
// whose digest is wrong is never returned, so no java runs on it.
func TestFind(t *testing.T) {
	jar := []byte("the release's jar")
	rel := Release{URL: "https://example.invalid/tla2tools.jar", SHA256: digest(jar)}
	ctx := context.Background()

	type setup struct {
		name    string
		prepare func(t *testing.T, w *findWorld, cache string)
		wantErr error
		wantJar string // relative to the cache dir, or absolute
		wantCM  string
		fetches int
	}
	cases := []setup{
		{name: "no java", prepare: func(t *testing.T, w *findWorld, cache string) { w.noJava = true }, wantErr: ErrNotFound},
		{name: "env jar", prepare: func(t *testing.T, w *findWorld, cache string) {
			w.vars[EnvJar] = writeFile(t, filepath.Join(cache, "x", "t.jar"), []byte("mine"))
			w.vars[EnvCommunity] = writeFile(t, filepath.Join(cache, "x", "c.jar"), []byte("cm"))
			w.vars[EnvCommunitySHA256] = digest([]byte("cm"))
		}, wantJar: "x/t.jar", wantCM: "x/c.jar"},
		{name: "env jar with the right digest", prepare: func(t *testing.T, w *findWorld, cache string) {
			w.vars[EnvJar] = writeFile(t, filepath.Join(cache, "x", "t.jar"), []byte("mine"))
			w.vars[EnvJarSHA256] = strings.ToUpper(digest([]byte("mine")))
		}, wantJar: "x/t.jar"},
		{name: "env jar with a wrong digest", prepare: func(t *testing.T, w *findWorld, cache string) {
			w.vars[EnvJar] = writeFile(t, filepath.Join(cache, "x", "t.jar"), []byte("mine"))
			w.vars[EnvJarSHA256] = digest([]byte("theirs"))
		}, wantErr: ErrDigest},
		{name: "community jar with a wrong digest", prepare: func(t *testing.T, w *findWorld, cache string) {
			w.vars[EnvCommunity] = writeFile(t, filepath.Join(cache, "x", "c.jar"), []byte("cm"))
			w.vars[EnvCommunitySHA256] = digest([]byte("other"))
		}, wantErr: ErrDigest},
		{name: "env jar missing", prepare: func(t *testing.T, w *findWorld, cache string) {
			w.vars[EnvJar] = filepath.Join(cache, "nothing.jar")
		}, wantErr: ErrNotFound},
		{name: "env jar is a directory", prepare: func(t *testing.T, w *findWorld, cache string) {
			w.vars[EnvJar] = cache
		}, wantErr: ErrNotFound},
		{name: "local dir, used without a digest", prepare: func(t *testing.T, w *findWorld, cache string) {
			writeFile(t, filepath.Join(cache, "local", JarName), []byte("built by hand"))
			writeFile(t, filepath.Join(cache, "local", CommunityName), []byte("cm by hand"))
		}, wantJar: "local/" + JarName, wantCM: "local/" + CommunityName},
		{name: "env jar before the local dir", prepare: func(t *testing.T, w *findWorld, cache string) {
			writeFile(t, filepath.Join(cache, "local", JarName), []byte("built by hand"))
			w.vars[EnvJar] = writeFile(t, filepath.Join(cache, "x", "t.jar"), []byte("mine"))
		}, wantJar: "x/t.jar"},
		{name: "cached release with its digest", prepare: func(t *testing.T, w *findWorld, cache string) {
			writeFile(t, filepath.Join(cache, rel.SHA256, JarName), jar)
		}, wantJar: rel.SHA256 + "/" + JarName},
		{name: "cached release corrupted", prepare: func(t *testing.T, w *findWorld, cache string) {
			writeFile(t, filepath.Join(cache, rel.SHA256, JarName), []byte("truncated"))
		}, wantErr: ErrDigest},
		{name: "download with the right digest", prepare: func(t *testing.T, w *findWorld, cache string) {
			w.payload = jar
		}, wantJar: rel.SHA256 + "/" + JarName, fetches: 1},
		{name: "download with a wrong digest", prepare: func(t *testing.T, w *findWorld, cache string) {
			w.payload = []byte("a replaced asset")
		}, wantErr: ErrDigest, fetches: 1},
		{name: "download fails", prepare: func(t *testing.T, w *findWorld, cache string) {}, wantErr: ErrNotFound, fetches: 1},
		{name: "offline", prepare: func(t *testing.T, w *findWorld, cache string) {
			w.payload = jar
			w.vars[EnvOffline] = "1"
		}, wantErr: ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache := t.TempDir()
			w := &findWorld{vars: map[string]string{EnvCacheDir: cache}}
			c.prepare(t, w, cache)
			env, err := Find(ctx, w.config(rel))
			if w.fetched != c.fetches {
				t.Errorf("%d downloads, want %d", w.fetched, c.fetches)
			}
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
				if env.Jar != "" {
					t.Errorf("Find returned jar %s with its error", env.Jar)
				}
				// A download that failed its digest leaves nothing to be
				// picked up by the next run.
				if _, err := os.Stat(filepath.Join(cache, rel.SHA256, JarName)); err == nil && c.fetches > 0 {
					t.Error("a rejected download was kept in the cache")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(cache, c.wantJar); env.Jar != want {
				t.Errorf("jar %s, want %s", env.Jar, want)
			}
			wantCM := ""
			if c.wantCM != "" {
				wantCM = filepath.Join(cache, c.wantCM)
			}
			if env.CommunityJar != wantCM {
				t.Errorf("community jar %q, want %q", env.CommunityJar, wantCM)
			}
			if env.Java != "/fake/java" || env.Source == "" {
				t.Errorf("java %q, source %q", env.Java, env.Source)
			}
		})
	}
}

// TestCacheDir: TLC_CACHE_DIR, else XDG_CACHE_HOME, else HOME/.cache.
func TestCacheDir(t *testing.T) {
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{EnvCacheDir: "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/c"},
		{map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/threadclaim-tlc"},
		{map[string]string{"HOME": "/h"}, "/h/.cache/threadclaim-tlc"},
	} {
		cfg := FindConfig{Getenv: func(k string) string { return c.vars[k] }}
		if got := cfg.CacheDir(); got != c.want {
			t.Errorf("%v: %s, want %s", c.vars, got, c.want)
		}
		if got := cfg.LocalDir(); got != filepath.Join(c.want, "local") {
			t.Errorf("%v: local %s", c.vars, got)
		}
	}
}

// TestFindWorkers: TLC_WORKERS must be a positive number or "auto".
func TestFindWorkers(t *testing.T) {
	cache := t.TempDir()
	writeFile(t, filepath.Join(cache, "local", JarName), []byte("jar"))
	for _, c := range []struct {
		val  string
		want int
		ok   bool
	}{{"", 3, true}, {"auto", 3, true}, {"2", 2, true}, {"0", 0, false}, {"many", 0, false}, {"2x", 0, false}} {
		w := &findWorld{vars: map[string]string{EnvCacheDir: cache, EnvWorkers: c.val}}
		cfg := w.config(Release{})
		cfg.Workers = 3
		env, err := Find(context.Background(), cfg)
		if (err == nil) != c.ok || (c.ok && env.Workers != c.want) {
			t.Errorf("TLC_WORKERS=%q: workers %d, err %v", c.val, env.Workers, err)
		}
	}
}

// TestFindNoJarRemedy: with no jar to be had, the error says how to get
// one, and a failed download leaves no empty cache directory behind.
func TestFindNoJarRemedy(t *testing.T) {
	rel := Release{URL: "https://example.invalid/tla2tools.jar", SHA256: digest([]byte("jar"))}
	for _, offline := range []bool{false, true} {
		cache := t.TempDir()
		w := &findWorld{vars: map[string]string{EnvCacheDir: cache}}
		if offline {
			w.vars[EnvOffline] = "1"
		}
		_, err := Find(context.Background(), w.config(rel))
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("offline %v: err %v, want ErrNotFound", offline, err)
		}
		for _, want := range []string{EnvJar, "scripts/tlc-jars release", filepath.Join(cache, "local")} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("offline %v: %q does not say %q", offline, err, want)
			}
		}
		entries, err := os.ReadDir(cache)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			t.Errorf("offline %v: the cache holds %v after a failed download, want nothing", offline, entries)
		}
	}
}

// TestFindRelativeJar: a jar named by a path relative to the working
// directory is returned absolute, since TLC runs in a directory of its
// own (scripts/tlc with TLA2TOOLS_JAR=../shared/tlc/tla2tools.jar found no
// class to run before).
func TestFindRelativeJar(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "jars", "t.jar"), []byte("mine"))
	t.Chdir(dir)
	vars := map[string]string{EnvJar: filepath.Join("jars", "t.jar")}
	c := FindConfig{Getenv: func(k string) string { return vars[k] }}
	jar, err := c.given(EnvJar, EnvJarSHA256)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "jars", "t.jar"); jar != want {
		t.Errorf("the jar is %q, want %q", jar, want)
	}
}
