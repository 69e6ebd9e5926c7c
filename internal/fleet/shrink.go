package fleet

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim/shrink"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// ShrinkConfig says what a run does with its failures: a rejected trace
// is shrunk to its shortest story by its lines (shrink.ShrinkTrace), a
// history porcupine finds not linearizable to a minimal sub-history that
// fails at the same operation (shrink.ShrinkLinearizability).
type ShrinkConfig struct {
	Off bool // do not shrink
	// Dir is where the stories go: beside the trace in the run's
	// directory when empty (removed at the end unless Keep); another
	// directory gets a copy of the trace and the history too, so that
	// each story is beside its original.
	Dir string
}

// Story is one failure of the run shrunk to its shortest story.
type Story struct {
	Failure string `json:"failure"`
	// From is the rejected thread's lines up to its rejected line, or
	// the history's operations; Shrunk the story's lines, or operations.
	From   int `json:"from"`
	Shrunk int `json:"shrunk"`
	// States is a trace story's length as TLC counts a counterexample:
	// Init, the lines, the inferred Lapses.
	States int      `json:"states,omitempty"`
	Tries  int      `json:"tries"`
	Files  []string `json:"files,omitempty"`
	// Lines is a trace story's lines, or a history story's, with their
	// times (not in the JSON: their call and return).
	Lines []core.TraceEvent `json:"lines"`
	// Error is why the failure could not be shrunk (porcupine timed out
	// on a candidate history, a file could not be written).
	Error string `json:"error,omitempty"`

	Trace   *shrink.TraceResult `json:"-"`
	History *shrink.LinResult   `json:"-"`
}

// shrinkFailures shrinks the run's rejected trace (the lines in check
// order) and its non-linearizable history, and adds their stories to the
// report.
func (r *run) shrinkFailures(ctx context.Context, rep *Report, ordered []core.TraceEvent, checkErr, linErr error) {
	if r.cfg.Shrink.Off {
		return
	}
	dir := r.dir
	copies := r.cfg.Shrink.Dir != "" && r.cfg.Shrink.Dir != r.dir
	if copies {
		dir = r.cfg.Shrink.Dir
	}
	var v *tracecheck.Violation
	if errors.As(checkErr, &v) {
		rep.Stories = append(rep.Stories, r.shrinkTrace(ctx, ordered, dir, copies))
	}
	if errors.Is(linErr, tracecheck.ErrNotLinearizable) {
		rep.Stories = append(rep.Stories, r.shrinkHistory(ctx, ordered, dir, copies))
	}
	for i := range rep.Stories {
		rep.Stories[i].Failure = rep.blame(rep.Stories[i].Failure)
	}
}

func (r *run) shrinkTrace(ctx context.Context, ordered []core.TraceEvent, dir string, copies bool) Story {
	orig := filepath.Join(dir, "trace.ndjson")
	res, err := shrink.ShrinkTrace(ctx, ordered, tracecheck.WithFile(orig))
	if err != nil {
		return Story{Failure: "a rejected trace", Error: err.Error()}
	}
	st := Story{Failure: res.Failure.String(), From: res.From, Shrunk: len(res.Lines), States: res.States(),
		Tries: res.Tries, Lines: res.Lines, Trace: &res}
	path := filepath.Join(dir, "trace.shrunk-"+res.Failure.Slug()+".ndjson")
	if copies {
		err = shrink.WriteTraceFile(orig, ordered)
	}
	if err == nil {
		err = shrink.WriteTraceFile(path, res.Lines)
	}
	if err != nil {
		st.Error = err.Error()
		return st
	}
	st.Files = []string{orig, path}
	return st
}

func (r *run) shrinkHistory(ctx context.Context, ordered []core.TraceEvent, dir string, copies bool) Story {
	res, err := shrink.ShrinkLinearizability(ctx, ordered, r.cfg.PorcupineTimeout)
	if err != nil {
		return Story{Failure: "not linearizable", Error: err.Error()}
	}
	st := Story{Failure: "not linearizable", From: res.From, Shrunk: len(res.Ops), Tries: res.Tries, Lines: res.Lines, History: &res}
	orig := filepath.Join(dir, "merged.history")
	if copies {
		err = shrink.WriteHistoryFile(orig, ordered)
	}
	var files []string
	if err == nil {
		files, err = res.WriteFiles(filepath.Join(dir, "merged.shrunk-"+shrink.LinSlug))
	}
	if err != nil {
		st.Error = err.Error()
		return st
	}
	st.Files = append([]string{orig}, files...)
	return st
}
