// Package ci runs a GitHub Actions workflow's jobs on this machine, as the
// runner would: each job's run: steps in order, in a fresh clone, with the
// job's and the steps' env, GITHUB_ENV, GITHUB_OUTPUT and
// GITHUB_STEP_SUMMARY as files exported between steps, and the ${{ }}
// expressions the workflow uses evaluated. The uses: steps are stood in
// for (Runner.Uses): checkout is the clone, the setup actions are what the
// machine has, the cache is empty. Its test exercises
// .github/workflows/ci.yml: its pins, the outputs its steps need, and a
// dry run of its steps (the project's scripts stubbed); the whole run is
// opt-in (THREADCLAIM_CI_FULL=1).
package ci

import (
	"errors"
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// Workflow is the part of a workflow file the runner reads: its jobs, in
// the file's order.
type Workflow struct {
	Jobs []Job
}

// Job is one job: its env, its services (by name) and its steps.
type Job struct {
	ID       string
	Name     string
	Env      []Var
	Services []string
	Steps    []Step
}

// Step is one step: a run: script or a uses: action.
type Step struct {
	Name, ID, If, Uses, Run string
	Env                     []Var
	With                    map[string]string
}

// Var is one env entry, in the file's order.
type Var struct{ Name, Value string }

// Label is how the step is named in messages.
func (s Step) Label() string {
	switch {
	case s.Name != "":
		return s.Name
	case s.Uses != "":
		return s.Uses
	}
	return s.Run
}

// Parse reads a workflow file.
func Parse(b []byte) (Workflow, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return Workflow{}, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return Workflow{}, errors.New("a workflow is a mapping")
	}
	jobs := get(doc.Content[0], "jobs")
	if jobs == nil || jobs.Kind != yaml.MappingNode {
		return Workflow{}, errors.New("no jobs")
	}
	var wf Workflow
	for i := 0; i+1 < len(jobs.Content); i += 2 {
		j, err := parseJob(jobs.Content[i].Value, jobs.Content[i+1])
		if err != nil {
			return Workflow{}, err
		}
		wf.Jobs = append(wf.Jobs, j)
	}
	return wf, nil
}

func parseJob(id string, n *yaml.Node) (Job, error) {
	j := Job{ID: id, Name: scalar(get(n, "name")), Env: vars(get(n, "env"))}
	if s := get(n, "services"); s != nil {
		for i := 0; i < len(s.Content); i += 2 {
			j.Services = append(j.Services, s.Content[i].Value)
		}
	}
	steps := get(n, "steps")
	if steps == nil || steps.Kind != yaml.SequenceNode {
		return j, fmt.Errorf("job %s: no steps", id)
	}
	for k, sn := range steps.Content {
		st := Step{Name: scalar(get(sn, "name")), ID: scalar(get(sn, "id")), If: scalar(get(sn, "if")),
			Uses: scalar(get(sn, "uses")), Run: scalar(get(sn, "run")), Env: vars(get(sn, "env")), With: map[string]string{}}
		for _, v := range vars(get(sn, "with")) {
			st.With[v.Name] = v.Value
		}
		if (st.Uses == "") == (st.Run == "") {
			return j, fmt.Errorf("job %s: step %d: want exactly one of run: and uses:", id, k+1)
		}
		j.Steps = append(j.Steps, st)
	}
	return j, nil
}

func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func scalar(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	return n.Value
}

func vars(n *yaml.Node) []Var {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var out []Var
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, Var{n.Content[i].Value, n.Content[i+1].Value})
	}
	return out
}
