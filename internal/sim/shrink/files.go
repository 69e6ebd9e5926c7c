package shrink

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Slug makes the failure a part of a file name: I1_ConsumedAtMostOnce,
// RunStart-Fenced-HasLease-p.
func (f Failure) Slug() string {
	s := f.Invariant
	if f.Check == CheckTrace {
		s = string(f.Action) + " " + f.Rule
	}
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// LinSlug names a shrunk non-linearizable history's files.
const LinSlug = "not-linearizable"

// LinResult is the history of trace lines stamped with their call and
// return times (a concurrent execution's, a fleet's merged history) that
// porcupine finds not linearizable under tracecheck.LeaseModel, shrunk.
type LinResult struct {
	HistoryResult
	// From is how many operations the history had.
	From int
	// Lines are the trace lines of the shrunk history's operations, with
	// their times: what a history file of it holds.
	Lines []core.TraceEvent
}

// ShrinkLinearizability shrinks the history in lines (the lease and
// fenced-consume operations tracecheck.OperationsFromTrace finds in them)
// with ShrinkHistory under tracecheck.LeaseModel (and LeaseShrinking).
func ShrinkLinearizability(ctx context.Context, lines []core.TraceEvent, timeout time.Duration) (LinResult, error) {
	kept, ops := LinearizabilityLines(lines)
	res, err := ShrinkHistory(ctx, tracecheck.LeaseModel(), ops, timeout, LeaseShrinking()...)
	if err != nil {
		return LinResult{}, err
	}
	out := LinResult{HistoryResult: res, From: len(ops)}
	for k, i := range res.Kept {
		l := kept[i]
		if l.Action == core.ActionRunStart {
			l.Run = res.Ops[k].Output.(tracecheck.LinOutput).Run // renumbered
		}
		out.Lines = append(out.Lines, l)
	}
	return out, nil
}

// WriteFiles writes the shrunk history as base.history (a history file:
// its trace lines with their call and return times) and porcupine's
// visualisation of it as base.porcupine.html, and returns their paths.
func (r LinResult) WriteFiles(base string) ([]string, error) {
	paths := []string{base + ".history", base + ".porcupine.html"}
	if err := WriteHistoryFile(paths[0], r.Lines); err != nil {
		return nil, err
	}
	model := tracecheck.LeaseModel()
	_, info := porcupine.CheckOperationsVerbose(model, r.Ops, 0)
	if err := porcupine.VisualizePath(model, info, paths[1]); err != nil {
		return nil, fmt.Errorf("%s: %w", paths[1], err)
	}
	return paths, nil
}

// WriteHistoryFile writes lines, with their call and return times, as a
// history file (tracecheck.ReadHistory reads it), creating its directory.
func WriteHistoryFile(path string, lines []core.TraceEvent) error {
	return create(path, func(f *os.File) error {
		w := tracecheck.NewHistoryWriter(f)
		for _, l := range lines {
			w.Trace(l)
		}
		return w.Err()
	})
}

// WriteTraceFile writes lines as a trace file (ndjson), creating its
// directory.
func WriteTraceFile(path string, lines []core.TraceEvent) error {
	return create(path, func(f *os.File) error { return tracecheck.WriteLines(f, lines) })
}

func create(path string, write func(*os.File) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
