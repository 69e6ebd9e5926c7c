package tlc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/threadclaim/threadclaim/core"
)

// The trace spec's batch mode: its module and cfg (in tla/), and the
// environment variables it reads.
const (
	TraceModule    = "ThreadClaimLapseTrace.tla"
	TraceBatchCfg  = "ThreadClaimLapseTraceBatch.cfg"
	EnvTraceBatch  = "TRACE_BATCH"  // a JSON file: an array of traces, each an array of line objects
	EnvTraceResult = "TRACE_RESULT" // where TLC writes the lines matched per trace, a JSON array
	EnvTraceFences = "TRACE_FENCES" // the fences that stay on, e.g. "start abandon"; unset: all
)

// TraceFences is TRACE_FENCES for the fences f: their names separated by
// spaces ("start abandon"), or "none".
func TraceFences(f core.Fences) string { return strings.ReplaceAll(f.String(), ",", " ") }

// ErrBatch is a batch run that did not give a verdict for every trace:
// TLC reported an error, or its result file is missing or malformed.
var ErrBatch = errors.New("tlc: trace batch gave no verdicts")

// Batch is a trace-validation run over many traces in one JVM.
type Batch struct {
	// Dir holds the trace spec (TraceModule, TraceBatchCfg): a scratch
	// copy of tla/. Required.
	Dir string
	// SpecDir holds spec/ThreadClaimLapse.tla (a scratch copy). Required.
	SpecDir string
	// Unfenced are the fences the traces are not held to; zero holds
	// them to every fence.
	Unfenced core.Fences
	// Workers is TLC's -workers; 0 means Env.Workers. The result does not
	// depend on it: every trace is a chain of its own.
	Workers int
	// Job carries the rest (Timeout, Output, MetaDir, extra Args); its
	// Spec, Config, Dir, Library and Env are set by ValidateBatch. Its
	// JavaOpts default to ShortJavaOpts when neither it nor the Env sets
	// any.
	Job Job
}

// Verdict is TLC's answer for one trace of a batch.
type Verdict struct {
	Lines   int // the trace's length
	Matched int // how many of its lines, from the first, the spec explained
}

// Accepted reports whether every line was explained.
func (v Verdict) Accepted() bool { return v.Matched == v.Lines }

// RejectedAt is the 1-based index in the trace of the first line nothing
// explains, 0 if the trace was accepted.
func (v Verdict) RejectedAt() int {
	if v.Accepted() {
		return 0
	}
	return v.Matched + 1
}

// ValidateBatch has TLC check every trace in one run: each must be one
// thread's lines in the order they are to be checked (file order), and not
// empty. It returns one Verdict per trace, in order, and TLC's Result (its
// state counts). A TLC that reports anything but success, or no result
// for some trace, is an error wrapping ErrBatch.
func (e Env) ValidateBatch(ctx context.Context, b Batch, traces [][]core.TraceEvent) ([]Verdict, *Result, error) {
	if b.Dir == "" || b.SpecDir == "" {
		return nil, nil, errors.New("tlc: Batch.Dir and Batch.SpecDir are required")
	}
	for i, t := range traces {
		if len(t) == 0 {
			return nil, nil, fmt.Errorf("tlc: trace %d of the batch is empty", i+1)
		}
		for j := range t {
			if t[j].Thread != t[0].Thread {
				// The spec would reject it at that line; a caller that
				// mixes threads has a bug, not a bad trace.
				return nil, nil, fmt.Errorf("tlc: trace %d of the batch mixes threads %q and %q (split it by thread first)", i+1, t[0].Thread, t[j].Thread)
			}
		}
	}
	tmp, err := os.MkdirTemp("", "tlc-batch-")
	if err != nil {
		return nil, nil, fmt.Errorf("tlc: %w", err)
	}
	defer os.RemoveAll(tmp)
	in, out := filepath.Join(tmp, "batch.json"), filepath.Join(tmp, "result.json")
	data, err := json.Marshal(toBatch(traces))
	if err != nil {
		return nil, nil, fmt.Errorf("tlc: encoding the batch: %w", err)
	}
	if err := os.WriteFile(in, data, 0o644); err != nil {
		return nil, nil, fmt.Errorf("tlc: %w", err)
	}
	job := b.Job
	job.Spec, job.Config, job.Dir = TraceModule, TraceBatchCfg, b.Dir
	job.Library = []string{b.SpecDir}
	job.Env = append(append([]string(nil), job.Env...), EnvTraceBatch+"="+in, EnvTraceResult+"="+out)
	if b.Unfenced != (core.Fences{}) {
		job.Env = append(job.Env, EnvTraceFences+"="+TraceFences(core.AllFences().Without(b.Unfenced)))
	}
	if b.Workers > 0 {
		job.Workers = b.Workers
	}
	if job.JavaOpts == nil && e.JavaOpts == nil {
		job.JavaOpts = ShortJavaOpts
	}
	res, err := e.Run(ctx, job)
	if err != nil {
		return nil, res, err
	}
	if res.Outcome != NoError {
		return nil, res, fmt.Errorf("%w: TLC reported %s: %s", ErrBatch, res.Outcome, firstLine(res.Text))
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		return nil, res, fmt.Errorf("%w: %v", ErrBatch, err)
	}
	var matched []int
	if err := json.Unmarshal(bytes.TrimSpace(raw), &matched); err != nil && !(len(traces) == 0 && isEmptyJSON(raw)) {
		return nil, res, fmt.Errorf("%w: result %q: %v", ErrBatch, truncate(raw), err)
	}
	if len(matched) != len(traces) {
		return nil, res, fmt.Errorf("%w: %d results for %d traces", ErrBatch, len(matched), len(traces))
	}
	vs := make([]Verdict, len(traces))
	for i, m := range matched {
		if m < 0 || m > len(traces[i]) {
			return nil, res, fmt.Errorf("%w: trace %d: %d lines matched of %d", ErrBatch, i+1, m, len(traces[i]))
		}
		vs[i] = Verdict{Lines: len(traces[i]), Matched: m}
	}
	return vs, res, nil
}

// isEmptyJSON: JsonSerialize writes an empty sequence as {} or [].
func isEmptyJSON(b []byte) bool {
	s := string(bytes.TrimSpace(b))
	return s == "[]" || s == "{}" || s == ""
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// Thread is one thread's lines of a trace file, in file order, with each
// line's 1-based number in the file.
type Thread struct {
	ID    core.ThreadID
	Lines []core.TraceEvent
	N     []int
}

// SplitThreads groups a file's lines by thread, in the order each thread
// first appears, keeping file order within a thread and each line's file
// line number: the trace spec checks one thread at a time, in file order.
func SplitThreads(lines []core.TraceEvent) []Thread {
	var out []Thread
	at := map[core.ThreadID]int{}
	for i, ev := range lines {
		k, ok := at[ev.Thread]
		if !ok {
			k = len(out)
			at[ev.Thread] = k
			out = append(out, Thread{ID: ev.Thread})
		}
		out[k].Lines = append(out[k].Lines, ev)
		out[k].N = append(out[k].N, i+1)
	}
	return out
}
