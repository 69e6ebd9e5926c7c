package ci

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrMissingOutput is an expression naming a step output no step wrote.
var ErrMissingOutput = errors.New("an output a step needs was not written")

// Runner runs a workflow's jobs on this machine.
type Runner struct {
	// Repo is the repository to clone (its HEAD), the checkout's stand-in.
	Repo string
	// Work is where each job's clone and runner.temp go.
	Work string
	// Env is the environment every step starts from (os.Environ() if nil).
	Env []string
	// Prepare, when set, is called on each job's fresh clone before its
	// steps run (the dry run puts its stubs there).
	Prepare func(job Job, clone string) error
	// Command is the command a run: step's script runs with (its path
	// last); default bash --noprofile --norc -eo pipefail, as the runner's
	// default shell.
	Command func(job Job, script string) []string
	// Uses stands in for a uses: step; default StandIn.
	Uses func(ctx context.Context, j *JobRun, st Step, with map[string]string) error
	// Pins are scripts/tlc-pins' values: a checkout of tlaplus/tlaplus or
	// tlaplus/CommunityModules must be at the pinned commit.
	Pins map[string]string
	// Log receives each step's heading and output.
	Log io.Writer
}

// JobRun is one job's state while it runs.
type JobRun struct {
	Job       Job
	Clone     string
	Temp      string
	outputs   map[string]map[string]string // by step id
	exported  []Var                        // GITHUB_ENV's, in order
	Summary   string                       // GITHUB_STEP_SUMMARY, every step's
	failed    bool
	Artifacts map[string]string // upload-artifact: name → path
	Ran       []string          // the steps run (not skipped by their if:), by label
	// SetOutput records an output of the step being stood in for.
	stepOutputs map[string]string
}

// SetOutput sets an output of the uses: step being stood in for.
func (j *JobRun) SetOutput(name, value string) { j.stepOutputs[name] = value }

// StepError is a step that failed.
type StepError struct {
	Job, Step string
	Err       error
}

func (e *StepError) Error() string { return fmt.Sprintf("job %s, step %q: %v", e.Job, e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// RunJob runs one job in a fresh clone and returns what it left (its
// summary, artifacts) and the first failure: a step that failed, an
// expression it could not evaluate, an output it needed that no step
// wrote.
func (r *Runner) RunJob(ctx context.Context, job Job) (*JobRun, error) {
	dir := filepath.Join(r.Work, job.ID)
	j := &JobRun{Job: job, Clone: filepath.Join(dir, "workspace"), Temp: filepath.Join(dir, "temp"),
		outputs: map[string]map[string]string{}, Artifacts: map[string]string{}}
	if err := os.MkdirAll(j.Temp, 0o755); err != nil {
		return j, err
	}
	clone := exec.CommandContext(ctx, "git", "clone", "--quiet", r.Repo, j.Clone)
	if out, err := clone.CombinedOutput(); err != nil {
		return j, fmt.Errorf("git clone %s: %v: %s", r.Repo, err, out)
	}
	if r.Prepare != nil {
		if err := r.Prepare(job, j.Clone); err != nil {
			return j, err
		}
	}
	var first error
	for k, st := range job.Steps {
		err := r.step(ctx, j, k, st)
		if err != nil {
			j.failed = true
			if first == nil {
				first = &StepError{Job: job.ID, Step: st.Label(), Err: err}
			}
		}
	}
	return j, first
}

func (r *Runner) logf(format string, args ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, format, args...)
	}
}

func (r *Runner) step(ctx context.Context, j *JobRun, k int, st Step) error {
	cond := st.If
	if cond == "" {
		cond = "success()"
	}
	run, err := r.cond(j, cond)
	if err != nil {
		return fmt.Errorf("if: %w", err)
	}
	if !run {
		r.logf("== %s / %s: skipped (if: %s)\n", j.Job.ID, st.Label(), cond)
		return nil
	}
	r.logf("== %s / %s\n", j.Job.ID, st.Label())
	j.Ran = append(j.Ran, st.Label())
	env, err := r.env(j, st)
	if err != nil {
		return err
	}
	files := map[string]string{}
	for _, name := range []string{"GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_PATH"} {
		files[name] = filepath.Join(j.Temp, fmt.Sprintf("_runner_file_commands/%s_%d", strings.ToLower(name), k))
		if err := os.MkdirAll(filepath.Dir(files[name]), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(files[name], nil, 0o644); err != nil {
			return err
		}
		env = append(env, name+"="+files[name])
	}
	j.stepOutputs = map[string]string{}
	if st.Uses != "" {
		with := map[string]string{}
		for name, v := range st.With {
			if with[name], err = r.expand(j, v); err != nil {
				return fmt.Errorf("with.%s: %w", name, err)
			}
		}
		uses := r.Uses
		if uses == nil {
			uses = r.StandIn
		}
		err = uses(ctx, j, st, with)
	} else {
		err = r.runScript(ctx, j, k, st, env)
	}
	if rerr := r.collect(j, st, files); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

func (r *Runner) runScript(ctx context.Context, j *JobRun, k int, st Step, env []string) error {
	script, err := r.expand(j, st.Run)
	if err != nil {
		return err
	}
	path := filepath.Join(j.Temp, fmt.Sprintf("step_%d.sh", k))
	if err := os.WriteFile(path, []byte(script+"\n"), 0o644); err != nil {
		return err
	}
	argv := []string{"bash", "--noprofile", "--norc", "-eo", "pipefail", path}
	if r.Command != nil {
		argv = r.Command(j.Job, path)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = j.Clone, env
	if r.Log != nil {
		cmd.Stdout, cmd.Stderr = r.Log, r.Log
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}

// collect reads what the step wrote to the runner's files.
func (r *Runner) collect(j *JobRun, st Step, files map[string]string) error {
	outs, err := readCommandFile(files["GITHUB_OUTPUT"])
	if err != nil {
		return fmt.Errorf("GITHUB_OUTPUT: %w", err)
	}
	for k, v := range j.stepOutputs {
		outs = append(outs, Var{k, v})
	}
	if st.ID != "" {
		m := map[string]string{}
		for _, o := range outs {
			m[o.Name] = o.Value
		}
		j.outputs[st.ID] = m
	}
	exp, err := readCommandFile(files["GITHUB_ENV"])
	if err != nil {
		return fmt.Errorf("GITHUB_ENV: %w", err)
	}
	j.exported = append(j.exported, exp...)
	b, err := os.ReadFile(files["GITHUB_STEP_SUMMARY"])
	if err != nil {
		return err
	}
	j.Summary += string(b)
	return nil
}

// readCommandFile reads a GITHUB_ENV or GITHUB_OUTPUT file: NAME=VALUE
// lines, and NAME<<DELIMITER blocks.
func readCommandFile(path string) ([]Var, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Var
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if name, delim, ok := strings.Cut(line, "<<"); ok && !strings.Contains(name, "=") {
			var val []string
			closed := false
			for sc.Scan() {
				if sc.Text() == delim {
					closed = true
					break
				}
				val = append(val, sc.Text())
			}
			if !closed {
				return nil, fmt.Errorf("%s: no closing %s", name, delim)
			}
			out = append(out, Var{name, strings.Join(val, "\n")})
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: not NAME=VALUE nor NAME<<DELIMITER", line)
		}
		out = append(out, Var{name, val})
	}
	return out, sc.Err()
}

// env is the step's environment: the base, the runner's variables, the
// job's env, what earlier steps exported, the step's env.
func (r *Runner) env(j *JobRun, st Step) ([]string, error) {
	env := r.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(env[:len(env):len(env)], "CI=true", "GITHUB_ACTIONS=true", "GITHUB_WORKSPACE="+j.Clone, "RUNNER_TEMP="+j.Temp)
	for _, vs := range [][]Var{j.Job.Env, j.exported, st.Env} {
		for _, v := range vs {
			val, err := r.expand(j, v.Value)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", v.Name, err)
			}
			env = append(env, v.Name+"="+val)
		}
	}
	return env, nil
}

var exprRE = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// expand replaces each ${{ expr }} in s by its value.
func (r *Runner) expand(j *JobRun, s string) (string, error) {
	var first error
	out := exprRE.ReplaceAllStringFunc(s, func(m string) string {
		v, err := r.value(j, exprRE.FindStringSubmatch(m)[1])
		if err != nil && first == nil {
			first = err
		}
		return v
	})
	return out, first
}

// value evaluates a context reference: runner.temp, github.workspace,
// env.NAME, steps.ID.outputs.NAME, or a quoted literal.
func (r *Runner) value(j *JobRun, e string) (string, error) {
	switch {
	case e == "runner.temp":
		return j.Temp, nil
	case e == "github.workspace":
		return j.Clone, nil
	case strings.HasPrefix(e, "'") && strings.HasSuffix(e, "'") && len(e) >= 2:
		return e[1 : len(e)-1], nil
	case strings.HasPrefix(e, "env."):
		name := strings.TrimPrefix(e, "env.")
		for _, vs := range [][]Var{j.exported, j.Job.Env} {
			for i := len(vs) - 1; i >= 0; i-- {
				if vs[i].Name == name {
					return vs[i].Value, nil
				}
			}
		}
		return "", nil
	case strings.HasPrefix(e, "steps."):
		parts := strings.SplitN(e, ".", 4)
		if len(parts) != 4 || parts[2] != "outputs" {
			return "", fmt.Errorf("%s: only steps.ID.outputs.NAME is known here", e)
		}
		outs, ran := j.outputs[parts[1]]
		v, ok := outs[parts[3]]
		if !ok {
			why := "no step with id " + parts[1] + " has run"
			if ran {
				why = "step " + parts[1] + " did not write it"
			}
			return "", fmt.Errorf("%w: %s (%s)", ErrMissingOutput, e, why)
		}
		return v, nil
	}
	return "", fmt.Errorf("cannot evaluate ${{ %s }} here", e)
}

var cmpRE = regexp.MustCompile(`^(\S+)\s*(==|!=)\s*(\S+)$`)

// cond evaluates an if: always(), success(), failure(), or a comparison
// of two values.
func (r *Runner) cond(j *JobRun, c string) (bool, error) {
	c = strings.TrimSpace(c)
	if m := exprRE.FindStringSubmatch(c); m != nil && m[0] == c {
		c = m[1]
	}
	switch c {
	case "always()":
		return true, nil
	case "success()":
		return !j.failed, nil
	case "failure()":
		return j.failed, nil
	}
	m := cmpRE.FindStringSubmatch(c)
	if m == nil {
		return false, fmt.Errorf("cannot evaluate %q here", c)
	}
	a, err := r.value(j, m[1])
	if err != nil {
		return false, err
	}
	b, err := r.value(j, m[3])
	if err != nil {
		return false, err
	}
	// A condition with no status function has an implied success().
	return !j.failed && (a == b) == (m[2] == "=="), nil
}
