package ci

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The sixteenth mutation pass's tests of the Runner itself, on small
// workflows of their own: what a step's failure, a bad expression or a
// malformed command file does to the job, as the GitHub runner would.

// tinyRepo is a git repository of one commit, for RunJob to clone.
func tinyRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("tiny\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "--quiet"},
		{"add", "README.md"},
		{"-c", "user.name=ci", "-c", "user.email=ci@example.com", "commit", "--quiet", "-m", "tiny"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return dir
}

// runOne parses a workflow of one job and runs it on repo, with PATH as
// the only variable of the environment the steps start from.
func runOne(t *testing.T, r *Runner, workflow string) (*JobRun, error) {
	t.Helper()
	wf, err := Parse([]byte(workflow))
	if err != nil {
		t.Fatal(err)
	}
	if len(wf.Jobs) != 1 {
		t.Fatalf("%d jobs, want one", len(wf.Jobs))
	}
	if r.Env == nil {
		r.Env = []string{"PATH=" + os.Getenv("PATH")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.RunJob(ctx, wf.Jobs[0])
}

// TestParseRefuses: a job with no steps, and a step with both run: and
// uses: or neither, are refused, not run as something else (mutants: the
// job's error ignored; a step with both taken for a run:).
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"no steps", "jobs:\n  a:\n    name: no steps\n", "job a: no steps"},
		{"both run and uses", "jobs:\n  a:\n    steps:\n      - run: \"true\"\n        uses: actions/checkout@v4\n", "job a: step 1: want exactly one of run: and uses:"},
		{"neither run nor uses", "jobs:\n  a:\n    steps:\n      - run: \"true\"\n      - name: nothing\n", "job a: step 2: want exactly one of run: and uses:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse: %v, want an error with %q", err, c.want)
			}
		})
	}
}

// stepCase is one job of TestRunnerSteps: its steps, the job's env, and
// what it gives.
type stepCase struct {
	name, steps string
	env         string // the job's env: block, if any
	want        string // the error's text; "" for none
	missing     bool   // errors.Is(err, ErrMissingOutput)
	ran         []string
	summary     string
}

var stepCases = []stepCase{
	{name: "after a failure, only always() and failure()", steps: `
      - name: fails
        run: exit 3
      - name: bare
        run: "true"
      - name: on success
        if: success()
        run: "true"
      - name: compared
        if: env.X == 'x'
        run: "true"
      - name: on failure
        if: failure()
        run: "true"
      - name: always
        if: always()
        run: exit 4`,
		env: "X: x", want: `step "fails": run: exit status 3`, ran: []string{"fails", "on failure", "always"}},
	{name: "no failure, no failure() step", steps: `
      - name: passes
        run: "true"
      - name: on failure
        if: failure()
        run: "true"
      - name: compared
        if: env.X != 'y'
        run: "true"`,
		env: "X: x", ran: []string{"passes", "compared"}},
	{name: "a failing command before the last", steps: `
      - name: two commands
        run: |
          false
          true`,
		want: `step "two commands": run: exit status 1`},
	{name: "a failing command in a pipe", steps: `
      - name: a pipe
        run: false | true`,
		want: `step "a pipe": run: exit status 1`},
	{name: "an if: naming an output nobody wrote", steps: `
      - name: guarded
        if: steps.nope.outputs.x == 'true'
        run: "true"`,
		want: "steps.nope.outputs.x (no step with id nope has run)", missing: true},
	{name: "an if: the runner cannot evaluate", steps: `
      - name: guarded
        if: contains(github.ref, 'main')
        run: "true"`,
		want: `cannot evaluate "contains(github.ref, 'main')" here`},
	{name: "a run: naming an output nobody wrote", steps: `
      - name: uses it
        run: echo ${{ steps.nope.outputs.x }}`,
		want: "steps.nope.outputs.x (no step with id nope has run)", missing: true},
	{name: "a run: with an expression the runner cannot evaluate", steps: `
      - name: uses it
        run: echo ${{ github.sha }}`,
		want: "cannot evaluate ${{ github.sha }} here"},
	{name: "a GITHUB_OUTPUT line that is not NAME=VALUE", steps: `
      - name: writes
        run: echo garbage >>"$GITHUB_OUTPUT"`,
		want: `GITHUB_OUTPUT: "garbage": not NAME=VALUE`},
	{name: "a GITHUB_OUTPUT line with no name", steps: `
      - name: writes
        run: echo =value >>"$GITHUB_OUTPUT"`,
		want: `GITHUB_OUTPUT: "=value": not NAME=VALUE`},
	{name: "a GITHUB_OUTPUT heredoc never closed", steps: `
      - name: writes
        run: printf 'X<<EOF\nabc\n' >>"$GITHUB_OUTPUT"`,
		want: "GITHUB_OUTPUT: X: no closing EOF"},
	{name: "the environment's layers", steps: `
      - name: exports
        run: |
          echo X=exported1 >>"$GITHUB_ENV"
          echo X=exported2 >>"$GITHUB_ENV"
      - name: reads
        env:
          Y: step
        run: echo "$CI $GITHUB_ACTIONS $Y ${{ env.X }}" >>"$GITHUB_STEP_SUMMARY"`,
		env: "X: job\n      Y: job", summary: "true true step exported2\n"},
	{name: "an action with no stand-in", steps: `
      - uses: actions/github-script@v7`,
		want: "actions/github-script@v7: no stand-in on this machine"},
	{name: "a checkout of a repository with no pin", steps: `
      - uses: actions/checkout@v4
        with:
          repository: someone/else
          ref: main`,
		want: "checkout of someone/else: no pin in scripts/tlc-pins"},
	{name: "an upload of a path that is not there", steps: `
      - name: upload
        uses: actions/upload-artifact@v4
        with:
          name: r
          path: ${{ runner.temp }}/nothing`,
		want: "upload-artifact r:"},
	{name: "an upload of a path that is not there, if-no-files-found: ignore", steps: `
      - name: upload
        uses: actions/upload-artifact@v4
        with:
          name: r
          path: ${{ runner.temp }}/nothing
          if-no-files-found: ignore`,
		ran: []string{"upload"}},
}

// TestRunnerSteps: one job each, run as GitHub's runner would. The
// steps after a failure run only under always() or failure() (mutants:
// the job not marked failed; success() or a bare if: passing regardless;
// a comparison without its implied success()); the job's error is its
// first failure; a step whose script fails anywhere,
// in a pipe's first command included, fails (mutant: bash without -eo
// pipefail); an expression that cannot be evaluated, in if:, run: or a
// steps. output nobody wrote, fails its step (mutants: those errors
// ignored, an unknown expression or condition read as empty or true); a
// malformed GITHUB_OUTPUT fails its step (mutants: collect's error
// ignored, an unclosed heredoc or an empty name accepted); a step's env
// wins over the job's, the runner's CI=true and GITHUB_ACTIONS=true are
// there, and env.X is the latest value GITHUB_ENV exported (mutants:
// those orders swapped, CI=true dropped); a uses: with no stand-in, a
// checkout of a repository with no pin, an upload of a missing path fail
// (mutants: each passing).
func TestRunnerSteps(t *testing.T) {
	repo := tinyRepo(t)
	for _, c := range stepCases {
		t.Run(c.name, func(t *testing.T) {
			workflow := "jobs:\n  a:\n"
			if c.env != "" {
				workflow += "    env:\n      " + c.env + "\n"
			}
			workflow += "    steps:" + c.steps + "\n"
			var log strings.Builder
			r := &Runner{Repo: repo, Work: t.TempDir(), Log: &log}
			jr, err := runOne(t, r, workflow)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("RunJob: %v, want no error\n%s", err, log.String())
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("RunJob: %v, want an error with %q\n%s", err, c.want, log.String())
			}
			if errors.Is(err, ErrMissingOutput) != c.missing {
				t.Errorf("errors.Is(err, ErrMissingOutput) = %v, want %v", !c.missing, c.missing)
			}
			if c.ran != nil && !slices.Equal(jr.Ran, c.ran) {
				t.Errorf("ran %q, want %q", jr.Ran, c.ran)
			}
			if c.summary != "" && jr.Summary != c.summary {
				t.Errorf("GITHUB_STEP_SUMMARY %q, want %q", jr.Summary, c.summary)
			}
		})
	}
}

// TestRunJobPrepareFails: a Prepare that fails stops the job before any
// step runs, with its error (mutant: the error ignored, the steps run on
// a clone without what Prepare was to put there).
func TestRunJobPrepareFails(t *testing.T) {
	broken := errors.New("no stubs")
	r := &Runner{Repo: tinyRepo(t), Work: t.TempDir(), Prepare: func(Job, string) error { return broken }}
	jr, err := runOne(t, r, "jobs:\n  a:\n    steps:\n      - name: a step\n        run: \"true\"\n")
	if !errors.Is(err, broken) {
		t.Fatalf("RunJob: %v, want Prepare's error", err)
	}
	if len(jr.Ran) != 0 {
		t.Errorf("ran %q after Prepare failed", jr.Ran)
	}
}
