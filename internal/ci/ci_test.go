package ci

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// root is the repository's root, relative to this package.
const root = "../.."

const workflowPath = root + "/.github/workflows/ci.yml"

func readWorkflow(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(workflowPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func pins(t *testing.T) map[string]string {
	t.Helper()
	p, err := ReadPins(filepath.Join(root, "scripts", "tlc-pins"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWorkflowParses: the workflow has its three jobs, each with steps,
// and the test job's postgres service, which TestWorkflowFull replaces by
// a throwaway cluster (mutant of pass 16: the services not read).
func TestWorkflowParses(t *testing.T) {
	wf, err := Parse([]byte(readWorkflow(t)))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range wf.Jobs {
		ids = append(ids, j.ID)
	}
	if got := strings.Join(ids, ","); got != "test,tlc-models,tlc-traces" {
		t.Fatalf("jobs %s, want test,tlc-models,tlc-traces", got)
	}
	if got := wf.Jobs[0].Services; !slices.Equal(got, []string{"postgres"}) {
		t.Errorf("the test job's services %q, want postgres", got)
	}
}

// TestWorkflowPins: what the workflow's text says of the pinned tools is
// what scripts/tlc-pins says; a copy naming another version, commit or
// digest fails, and one naming the pinned commits themselves passes
// (mutant of pass 16: a commit had to be both pins at once).
func TestWorkflowPins(t *testing.T) {
	text, p := readWorkflow(t), pins(t)
	if err := CheckPins(text, p); err != nil {
		t.Fatal(err)
	}
	for _, pin := range []string{"TLAPLUS_COMMIT", "COMMUNITY_MODULES_COMMIT"} {
		literal := strings.Replace(text, "ref: ${{ steps.pins.outputs."+pin+" }}", "ref: "+p[pin], 1)
		if literal == text {
			t.Fatalf("the workflow has no checkout at steps.pins.outputs.%s", pin)
		}
		if err := CheckPins(literal, p); err != nil {
			t.Errorf("a workflow naming the pinned %s: %v", pin, err)
		}
	}
	for _, m := range []struct{ name, from, to string }{
		{"version", "tla2tools v1.7.4", "tla2tools v1.7.3"},
		{"commit", "ref: ${{ steps.pins.outputs.TLAPLUS_COMMIT }}", "ref: 0123456789abcdef0123456789abcdef01234567"},
		{"digest", "by sha256)", "by sha256 " + strings.Repeat("ab", 32) + ")"},
	} {
		broken := strings.Replace(text, m.from, m.to, 1)
		if broken == text {
			t.Fatalf("%s: %q is not in the workflow", m.name, m.from)
		}
		if err := CheckPins(broken, p); err == nil {
			t.Errorf("%s: a workflow with %q passes the pin check", m.name, m.to)
		}
	}
}

// stubs stand in for the project's scripts in a dry run: each logs its
// arguments and the environment the workflow gave it; tlc-jars prints
// what $GITHUB_ENV gets; scripts/tlc refuses an unknown mode; the
// -junit and -summary files, and REPORT_DIR's, are written.
var stubs = map[string]string{
	"scripts/test": `#!/usr/bin/env bash
echo "test $* | REPORT_DIR=${REPORT_DIR:-} DATABASE_URL=${DATABASE_URL:-} TLC_OFFLINE=${TLC_OFFLINE:-}" >>"$STUB_LOG"
if [ -n "${REPORT_DIR:-}" ]; then mkdir -p "$REPORT_DIR"; echo "## scripts/test: PASS" >>"$REPORT_DIR/summary.md"; echo '<testsuites/>' >"$REPORT_DIR/run.xml"; fi
`,
	"scripts/tlc": `#!/usr/bin/env bash
echo "tlc $* | TLA2TOOLS_JAR=${TLA2TOOLS_JAR:-} COMMUNITY_MODULES_JAR=${COMMUNITY_MODULES_JAR:-}" >>"$STUB_LOG"
mode=""
while [ $# -gt 0 ]; do
	case $1 in
	-junit) echo '<testsuites/>' >"$2"; shift 2 ;;
	-summary) echo "## tracecheck tlc $mode: PASS" >>"$2"; shift 2 ;;
	-keep-logs) mkdir -p "$2"; shift 2 ;;
	-*) shift ;;
	*) case $1 in all|spec|trace|generated|mutants|differential|batch) mode=$1 ;; *) echo "tlc: unknown mode $1" >&2; exit 2 ;; esac; shift ;;
	esac
done
`,
	"scripts/tlc-jars": `#!/usr/bin/env bash
echo "tlc-jars $* | TLAPLUS_SRC=${TLAPLUS_SRC:-}" >>"$STUB_LOG"
case $1 in
release) echo "TLA2TOOLS_JAR=/stub/release/tla2tools.jar"; echo "TLA2TOOLS_SHA256=stub" ;;
build) echo "TLA2TOOLS_JAR=$2/tla2tools.jar"; echo "COMMUNITY_MODULES_JAR=$2/CommunityModules-deps.jar" ;;
*) exit 2 ;;
esac
`,
}

// dryRunner is a Runner whose clones get the stubs, with ant on PATH.
func dryRunner(t *testing.T) (*Runner, string) {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "ant"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "stub.log")
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "DATABASE_URL=") && !strings.HasPrefix(e, "TLA2TOOLS_JAR=") && !strings.HasPrefix(e, "COMMUNITY_MODULES_JAR=") {
			env = append(env, e)
		}
	}
	env = append(env, "STUB_LOG="+log, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out strings.Builder
	r := &Runner{Repo: root, Work: t.TempDir(), Env: env, Pins: pins(t), Log: &out,
		Prepare: func(_ Job, clone string) error {
			for path, body := range stubs {
				if err := os.WriteFile(filepath.Join(clone, path), []byte(body), 0o755); err != nil {
					return err
				}
			}
			return nil
		}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the runner's log:\n%s", out.String())
		}
	})
	return r, log
}

func runAll(t *testing.T, r *Runner, text string) (map[string]*JobRun, error) {
	t.Helper()
	wf, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs := map[string]*JobRun{}
	for _, j := range wf.Jobs {
		jr, err := r.RunJob(ctx, j)
		runs[j.ID] = jr
		if err != nil {
			return runs, err
		}
	}
	return runs, nil
}

// TestWorkflowDryRun runs every job's steps in a fresh clone with the
// project's scripts stubbed: every step runs, in order, with the env the
// job gives it and what earlier steps exported (the jars from
// scripts/tlc-jars), each job's summary reaches GITHUB_STEP_SUMMARY and
// its reports are uploaded.
func TestWorkflowDryRun(t *testing.T) {
	r, log := dryRunner(t)
	runs, err := runAll(t, r, readWorkflow(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{
		"test  | REPORT_DIR=" + runs["test"].Temp + "/reports DATABASE_URL=postgres://threadclaim:threadclaim@localhost:5432/threadclaim?sslmode=disable TLC_OFFLINE=1",
		"tlc-jars release | TLAPLUS_SRC=",
		"tlc spec -junit " + runs["tlc-models"].Temp + "/reports/tlc-models.xml",
		"tlc-jars build " + runs["tlc-traces"].Temp + "/tlc-build | TLAPLUS_SRC=" + runs["tlc-traces"].Clone + "/tlc-src/tlaplus",
		"tlc trace -junit", "tlc generated -junit", "tlc mutants -junit", "tlc differential -junit",
	}
	if len(got) != len(want) {
		t.Fatalf("the stubs ran %d times, want %d:\n%s", len(got), len(want), b)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("call %d: %q, want it to start %q", i+1, got[i], want[i])
		}
	}
	if !strings.Contains(got[2], "TLA2TOOLS_JAR=/stub/release/tla2tools.jar") {
		t.Errorf("scripts/tlc spec did not get the jar scripts/tlc-jars release exported: %s", got[2])
	}
	if !strings.Contains(got[4], "COMMUNITY_MODULES_JAR="+runs["tlc-traces"].Temp+"/tlc-build/CommunityModules-deps.jar") {
		t.Errorf("scripts/tlc trace did not get the jars scripts/tlc-jars build exported: %s", got[4])
	}
	for id, jr := range runs {
		if !strings.Contains(jr.Summary, "PASS") {
			t.Errorf("job %s: GITHUB_STEP_SUMMARY holds %q, want the reports' summary", id, jr.Summary)
		}
		if len(jr.Artifacts) != 1 {
			t.Errorf("job %s: artifacts %v, want its reports", id, jr.Artifacts)
		}
	}
}

// TestWorkflowDryRunCatches: broken copies of the workflow fail the dry
// run: a step that fails; an output a later step needs that no step wrote
// (the step's id changed, or the step writing only one of two); a
// checkout at another commit than the pin. A failed step still lets the
// if: always() steps run.
func TestWorkflowDryRunCatches(t *testing.T) {
	text := readWorkflow(t)
	for _, m := range []struct {
		name, from, to, want string
		missing              bool
	}{
		{"a failing step", `scripts/tlc-pins >> "$GITHUB_OUTPUT"`, `scripts/tlc-pinz >> "$GITHUB_OUTPUT"`, `step "Read the pinned commits": run: exit status 2`, false},
		{"a step id changed", "id: pins", "id: pin", "steps.pins.outputs.TLAPLUS_COMMIT (no step with id pins has run)", true},
		{"an output not written", "^(TLAPLUS_COMMIT|COMMUNITY_MODULES_COMMIT)=", "^(TLAPLUS_COMMIT)=", "steps.pins.outputs.COMMUNITY_MODULES_COMMIT (step pins did not write it)", true},
		{"a checkout off its pin", "ref: ${{ steps.pins.outputs.COMMUNITY_MODULES_COMMIT }}", "ref: ${{ steps.pins.outputs.TLAPLUS_COMMIT }}", "but scripts/tlc-pins has COMMUNITY_MODULES_COMMIT=", false},
		{"an unknown mode", "scripts/tlc mutants -junit", "scripts/tlc mutant -junit", `step "scripts/tlc mutants (every spec mutant in spec/mutants must be caught)": run: exit status 2`, false},
	} {
		t.Run(m.name, func(t *testing.T) {
			broken := strings.Replace(text, m.from, m.to, 1)
			if broken == text {
				t.Fatalf("%q is not in the workflow", m.from)
			}
			r, _ := dryRunner(t)
			runs, err := runAll(t, r, broken)
			if err == nil || !strings.Contains(err.Error(), m.want) {
				t.Fatalf("dry run: %v, want an error with %q", err, m.want)
			}
			if m.missing != errors.Is(err, ErrMissingOutput) {
				t.Errorf("errors.Is(err, ErrMissingOutput) = %v, want %v", !m.missing, m.missing)
			}
			if jr := runs["tlc-traces"]; jr != nil && !slices.Contains(jr.Ran, "Upload the reports") {
				t.Errorf("the upload (if: always()) did not run after the failure: ran %q", jr.Ran)
			}
		})
	}
}

// TestWorkflowFull runs every job for real (opt-in: THREADCLAIM_CI_FULL=1;
// it runs scripts/test and TLC): the test job's PostgreSQL service is a
// throwaway cluster (scripts/with-postgres, DATABASE_URL unset); the
// models job's release is downloaded by scripts/tlc-jars release, or
// taken from this machine's TLC cache where it was downloaded before
// (verified by its sha256 either way); the trace job's jars built from
// the pins are ../shared/tlc's, as a cache hit.
func TestWorkflowFull(t *testing.T) {
	if os.Getenv("THREADCLAIM_CI_FULL") != "1" {
		t.Skip("THREADCLAIM_CI_FULL is not 1: the whole workflow (scripts/test and TLC) runs only when asked")
	}
	shared, err := filepath.Abs(filepath.Join(root, "..", "shared", "tlc"))
	if err != nil {
		t.Fatal(err)
	}
	for _, jar := range []string{"tla2tools.jar", "CommunityModules-deps.jar"} {
		if _, err := os.Stat(filepath.Join(shared, jar)); err != nil {
			t.Fatalf("the full run needs the pinned jars in %s: %v", shared, err)
		}
	}
	var env []string
	for _, e := range os.Environ() {
		// The job's go test must not start a full run of its own.
		if !strings.HasPrefix(e, "DATABASE_URL=") && !strings.HasPrefix(e, "THREADCLAIM_CI_FULL=") {
			env = append(env, e)
		}
	}
	withPG, err := filepath.Abs(filepath.Join(root, "scripts", "with-postgres"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Repo: root, Work: t.TempDir(), Env: env, Pins: pins(t), Log: testWriter{t}}
	r.Command = func(j Job, script string) []string {
		argv := []string{"bash", "--noprofile", "--norc", "-eo", "pipefail", script}
		if slices.Contains(j.Services, "postgres") {
			return append([]string{withPG}, argv...)
		}
		return argv
	}
	r.Uses = func(ctx context.Context, j *JobRun, st Step, with map[string]string) error {
		if strings.HasPrefix(st.Uses, "actions/cache@") {
			// The jars built from the pins, as a cache hit.
			if err := os.MkdirAll(with["path"], 0o755); err != nil {
				return err
			}
			for _, jar := range []string{"tla2tools.jar", "CommunityModules-deps.jar"} {
				if out, err := exec.CommandContext(ctx, "cp", filepath.Join(shared, jar), with["path"]).CombinedOutput(); err != nil {
					return errors.New(string(out))
				}
			}
			j.SetOutput("cache-hit", "true")
			return nil
		}
		return r.StandIn(ctx, j, st, with)
	}
	wf, err := Parse([]byte(readWorkflow(t)))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range wf.Jobs {
		if slices.Contains(j.Services, "postgres") {
			// The service's URL is replaced by the throwaway cluster's.
			j.Env = slices.DeleteFunc(slices.Clone(j.Env), func(v Var) bool { return v.Name == "DATABASE_URL" })
		}
		start := time.Now()
		if _, err := r.RunJob(context.Background(), j); err != nil {
			t.Errorf("job %s: %v", j.ID, err)
		}
		t.Logf("job %s: %v", j.ID, time.Since(start).Round(time.Second))
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	if s := strings.TrimRight(string(p), "\n"); strings.TrimSpace(s) != "" {
		w.t.Log(s)
	}
	return len(p), nil
}

// TestWithPostgresBadURL: a DATABASE_URL that cannot be reached is one
// error and exit 2 from scripts/with-postgres, and the command (a test
// run that would print the error once per test) does not run.
func TestWithPostgresBadURL(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("no psql on PATH: scripts/with-postgres checks the URL with it")
	}
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(filepath.Join(root, "scripts", "with-postgres"), "touch", marker)
	cmd.Env = append(os.Environ(), "DATABASE_URL=postgres://nobody@127.0.0.1:1/none", "PGCONNECT_TIMEOUT=5")
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out)
	}
	if n := strings.Count(string(out), "cannot connect"); n != 1 {
		t.Errorf("%d errors, want one:\n%s", n, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran against a database that cannot be reached")
	}
}

// TestWithPostgresServerOptsNeedTheCluster: server options for the
// throwaway cluster, with DATABASE_URL naming a server of its own, would
// be ignored: scripts/with-postgres exits 2 saying so, and the command
// does not run.
func TestWithPostgresServerOptsNeedTheCluster(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(filepath.Join(root, "scripts", "with-postgres"), "touch", marker)
	cmd.Env = append(os.Environ(), "DATABASE_URL=postgres://nobody@127.0.0.1:1/none",
		"WITH_POSTGRES_SERVER_OPTS=-c shared_preload_libraries=pg_stat_statements")
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out)
	}
	if !strings.Contains(string(out), "WITH_POSTGRES_SERVER_OPTS") {
		t.Errorf("the error does not name WITH_POSTGRES_SERVER_OPTS:\n%s", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran with server options it could not apply")
	}
}

// TestWithPostgresExitCode: with no DATABASE_URL, scripts/with-postgres
// starts a throwaway cluster, exits with the command's own code, and has
// removed the cluster's directory by the time it exits (mutants of pass
// 16: exit 0 whatever the command's code; the directory left for the
// watchdog).
func TestWithPostgresExitCode(t *testing.T) {
	if !serverInstalled() {
		t.Fatal("no PostgreSQL server binaries (initdb, pg_ctl) under pg_config --bindir or /usr/lib/postgresql/*/bin: scripts/with-postgres cannot start a throwaway cluster, and the test command needs one; install the server (Debian: postgresql)")
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "with-postgres"), "sh", "-c", `test -n "$DATABASE_URL" && exit 3`)
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "WITH_POSTGRES_SERVER_OPTS=")
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code != 3 {
		t.Fatalf("exit %d, want the command's 3:\n%s", code, out)
	}
	_, rest, ok := strings.Cut(string(out), "throwaway PostgreSQL ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 3 || fields[1] != "in" {
		t.Fatalf("no cluster directory named in:\n%s", out)
	}
	if _, err := os.Stat(fields[2]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cluster's directory %s is still there once scripts/with-postgres exited (%v)", fields[2], err)
	}
}

// serverInstalled: scripts/with-postgres can find initdb and pg_ctl (as
// it looks for them: pg_config's bindir, else /usr/lib/postgresql).
func serverInstalled() bool {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(out)), "initdb")); err == nil {
			return true
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	return len(found) > 0
}

// TestCIRun: .ci/run, the CI entry point, with the pinned jars of
// ../shared/tlc and scripts/test stood in for: the jars whose sha256 is
// SHA256SUMS' are exported, with their digests and REQUIRE_TLC=1; a jar
// with another digest, or no SHA256SUMS, stops it with exit 2 before
// scripts/test runs; scripts/test's exit code is its own; a TLA2TOOLS_JAR
// given is used as it is (mutants of pass 16: the digest not compared,
// REQUIRE_TLC not set, scripts/test's failure turned into a pass).
func TestCIRun(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	jars := map[string]string{"tla2tools.jar": "the tools", "CommunityModules-deps.jar": "the modules"}
	for _, c := range []struct {
		name    string
		spoil   func(t *testing.T, shared string)
		env     []string
		code    int
		says    string
		scripts string // what scripts/test saw; "" when it must not run
	}{
		{name: "the jars as SHA256SUMS has them", code: 0,
			scripts: "TLA2TOOLS_JAR={shared}/tla2tools.jar TLA2TOOLS_SHA256={tla2tools.jar} COMMUNITY_MODULES_JAR={shared}/CommunityModules-deps.jar COMMUNITY_MODULES_SHA256={CommunityModules-deps.jar} REQUIRE_TLC=1"},
		{name: "a jar with another digest", code: 2, says: "has sha256",
			spoil: func(t *testing.T, shared string) {
				writeFile(t, filepath.Join(shared, "CommunityModules-deps.jar"), "other modules")
			}},
		{name: "no SHA256SUMS", code: 2, says: "SHA256SUMS is missing",
			spoil: func(t *testing.T, shared string) { removeFile(t, filepath.Join(shared, "SHA256SUMS")) }},
		{name: "a jar missing", code: 2, says: "tla2tools.jar is missing",
			spoil: func(t *testing.T, shared string) { removeFile(t, filepath.Join(shared, "tla2tools.jar")) }},
		{name: "scripts/test fails", env: []string{"STUB_EXIT=1"}, code: 1,
			scripts: "TLA2TOOLS_JAR={shared}/tla2tools.jar"},
		{name: "a jar given", env: []string{"TLA2TOOLS_JAR=/given/tla2tools.jar"}, code: 0,
			scripts: "TLA2TOOLS_JAR=/given/tla2tools.jar TLA2TOOLS_SHA256= COMMUNITY_MODULES_JAR= COMMUNITY_MODULES_SHA256= REQUIRE_TLC="},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			repo, shared, bin := filepath.Join(base, "repo"), filepath.Join(base, "shared", "tlc"), filepath.Join(base, "bin")
			saw := filepath.Join(base, "saw")
			writeFile(t, filepath.Join(repo, ".ci", "run"), string(script))
			writeFile(t, filepath.Join(repo, "scripts", "test"), `#!/bin/sh
echo "TLA2TOOLS_JAR=${TLA2TOOLS_JAR:-} TLA2TOOLS_SHA256=${TLA2TOOLS_SHA256:-} COMMUNITY_MODULES_JAR=${COMMUNITY_MODULES_JAR:-} COMMUNITY_MODULES_SHA256=${COMMUNITY_MODULES_SHA256:-} REQUIRE_TLC=${REQUIRE_TLC:-}" >"$SAW"
exit "${STUB_EXIT:-0}"
`)
			// A chromium on PATH: .ci/run installs none.
			writeFile(t, filepath.Join(bin, "chromium"), "#!/bin/sh\nexit 0\n")
			var sums strings.Builder
			digests := map[string]string{}
			for name, body := range jars {
				writeFile(t, filepath.Join(shared, name), body)
				digests[name] = fmt.Sprintf("%x", sha256.Sum256([]byte(body)))
				fmt.Fprintf(&sums, "%s  %s\n", digests[name], name)
			}
			writeFile(t, filepath.Join(shared, "SHA256SUMS"), sums.String())
			if c.spoil != nil {
				c.spoil(t, shared)
			}
			cmd := exec.Command(filepath.Join(repo, ".ci", "run"))
			for _, e := range os.Environ() {
				name, _, _ := strings.Cut(e, "=")
				if !slices.Contains([]string{"TLA2TOOLS_JAR", "TLA2TOOLS_SHA256", "COMMUNITY_MODULES_JAR", "COMMUNITY_MODULES_SHA256", "REQUIRE_TLC", "PATH"}, name) {
					cmd.Env = append(cmd.Env, e)
				}
			}
			cmd.Env = append(cmd.Env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "SAW="+saw)
			cmd.Env = append(cmd.Env, c.env...)
			out, err := cmd.CombinedOutput()
			if code := exitCode(t, err); code != c.code || !strings.Contains(string(out), c.says) {
				t.Errorf("exit %d, want %d, saying %q:\n%s", code, c.code, c.says, out)
			}
			got, err := os.ReadFile(saw)
			switch {
			case c.scripts == "" && err == nil:
				t.Errorf("scripts/test ran: %s", got)
			case c.scripts != "":
				want := strings.ReplaceAll(c.scripts, "{shared}", shared)
				for name, d := range digests {
					want = strings.ReplaceAll(want, "{"+name+"}", d)
				}
				if !strings.HasPrefix(string(got), want) {
					t.Errorf("scripts/test saw %q, want it to start %q", got, want)
				}
			}
		})
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func removeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// TestScriptsTestSummary: scripts/test's summary, run as it is written
// (from its tmp= line to its trap) on a go test -json record of a test
// that passed and one that skipped: every step with its outcome, the
// step that was under way when it exited FAILED, each skipped test with
// its reason, the count, and the exit code of the run kept (mutants of
// pass 16: the failed step reported ok, the skipped tests not listed,
// exit 0 whatever the code).
func TestScriptsTestSummary(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "scripts", "test"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	start, end := strings.Index(src, "\ntmp=$(mktemp"), strings.Index(src, "\ntrap summary EXIT\n")
	if start < 0 || end < start {
		t.Fatal("scripts/test has no summary section from tmp=$(mktemp to trap summary EXIT")
	}
	record := filepath.Join(t.TempDir(), "go-test.json")
	writeFile(t, record, `{"Action":"start","Package":"example.com/p"}
{"Action":"run","Package":"example.com/p","Test":"TestRan"}
{"Action":"pass","Package":"example.com/p","Test":"TestRan","Elapsed":0}
{"Action":"run","Package":"example.com/p","Test":"TestNoServer"}
{"Action":"output","Package":"example.com/p","Test":"TestNoServer","Output":"    p_test.go:9: no server here\n"}
{"Action":"skip","Package":"example.com/p","Test":"TestNoServer","Elapsed":0}
{"Action":"pass","Package":"example.com/p","Elapsed":0.1}
`)
	for _, c := range []struct {
		name  string
		exit  int
		steps []string // the steps' outcomes, as the summary gives them
	}{
		{"all passed", 0, []string{"ok", "ok"}},
		{"the last step failed", 1, []string{"ok", "FAILED"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			script := "set -euo pipefail\n" + src[start:end] + "\ntrap summary EXIT\n" +
				`cp "$RECORD" "$tmp/go-test-race.json"` + "\nstep \"the first step\"\nstep \"the last step\"\nexit " + fmt.Sprint(c.exit) + "\n"
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", script)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "RECORD="+record, "REPORT_DIR=")
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("scripts/test's summary did not finish within 2 minutes:\n%s", out)
			}
			if code := exitCode(t, err); code != c.exit {
				t.Errorf("exit %d, want %d:\n%s", code, c.exit, out)
			}
			_, summary, ok := strings.Cut(string(out), "== summary (scripts/test)")
			if !ok {
				t.Fatalf("no summary:\n%s", out)
			}
			for i, step := range []string{"the first step", "the last step"} {
				re := regexp.MustCompile(`(?m)^  ` + c.steps[i] + ` +\d+s  ` + step + `$`)
				if !re.MatchString(summary) {
					t.Errorf("no line %q in the summary:\n%s", re, summary)
				}
			}
			for _, want := range []string{"Go tests that skipped, and why:", "TestNoServer", "no server here", "tests: 1 passed, 0 failed, 1 skipped"} {
				if !strings.Contains(summary, want) {
					t.Errorf("%q not in the summary:\n%s", want, summary)
				}
			}
		})
	}
}

// TestPgStatementsUsage: scripts/pg-statements answers -h with its usage
// and exit 0, and refuses, with exit 2 and before starting anything, no
// benchmark, a TOP that is not a whole number, and a DATABASE_URL (it
// starts a server of its own, with the extension loaded).
func TestPgStatementsUsage(t *testing.T) {
	script := filepath.Join(root, "scripts", "pg-statements")
	for _, c := range []struct {
		name string
		args []string
		env  []string
		code int
		says string
	}{
		{"help", []string{"-h"}, nil, 0, "usage: scripts/pg-statements"},
		{"no benchmark", nil, nil, 2, "usage: scripts/pg-statements"},
		{"bad top", []string{"Post", "10x", "ten"}, nil, 2, "TOP must be a whole number"},
		{"database given", []string{"Post"}, []string{"DATABASE_URL=postgres://nobody@127.0.0.1:1/none"}, 2, "DATABASE_URL is set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(script, c.args...)
			cmd.Env = append(os.Environ(), c.env...)
			if c.env == nil {
				cmd.Env = append(cmd.Env, "DATABASE_URL=")
			}
			out, err := cmd.CombinedOutput()
			if code := exitCode(t, err); code != c.code || !strings.Contains(string(out), c.says) {
				t.Errorf("exit %d, want %d, saying %q:\n%s", code, c.code, c.says, out)
			}
		})
	}
}

// exitCode is the exit code of a command that ran and returned err (0
// when err is nil); a command that did not run fails t.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return 0
}
