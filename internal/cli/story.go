package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/explore"
	"github.com/threadclaim/threadclaim/internal/report"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/internal/sim/shrink"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// story is one failure shrunk to its shortest story.
type story struct {
	Failure string `json:"failure"`
	// Source is where a failure with no operation log came from (a
	// concurrent execution, a trace file): shrunk by its lines, Ops and
	// ShrunkOp count the rejected thread's lines, or the history's
	// operations, before and after.
	Source   string   `json:"source,omitempty"`
	Seed     uint64   `json:"seed"`
	Ops      int      `json:"ops"`        // the failing seed's operations
	ShrunkOp int      `json:"ops_shrunk"` // the shrunk log's
	Lines    int      `json:"lines"`      // the shrunk story's trace lines
	States   int      `json:"states"`     // as TLC counts a counterexample: Init, the lines, the inferred Lapses
	Runs     int      `json:"runs"`       // executions delta debugging tried
	Files    []string `json:"files"`      // the original and shrunk logs and traces
}

// shrinkAll shrinks, for each failure in the order first seen, the first
// seed that showed it, prints the story and writes the logs and traces.
func (t *tally) shrinkAll(ctx context.Context, f runFlags, outAll io.Writer) error {
	if len(t.failed) == 0 {
		return nil
	}
	if err := os.MkdirAll(f.shrinkDir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(outAll, "\nshortest stories (each failure's first seed, shrunk by delta debugging on the in-memory storage)\n")
	// Two failures of one seed often shrink to the same operations: the
	// story is told once, and the second names the first.
	type firstStory struct {
		heading string
		text    *bytes.Buffer
		states  int
	}
	seen := map[string]firstStory{}
	for _, fs := range t.failed {
		out, told := t.storyWriter(outAll)
		var opts []shrink.Option
		if f.openStorage != nil {
			opts = append(opts, shrink.OnStorage(f.openStorage))
		}
		res, err := shrink.Shrink(ctx, fs.exec.Log, fs.failure, opts...)
		if errors.Is(err, shrink.ErrNotReproduced) {
			// On PostgreSQL an execution may fail where the in-memory
			// replay does not; say so rather than shrink something else.
			fmt.Fprintf(out, "\n%s (seed %d): not reproduced in memory, not shrunk\n", fs.failure, fs.seed)
			continue
		}
		if err != nil {
			return err
		}
		lines := res.Exec.Story(fs.failure)
		base := filepath.Join(f.shrinkDir, fmt.Sprintf("seed-%d", fs.seed))
		shrunk := fmt.Sprintf("%s.shrunk-%s", base, fs.failure.Slug())
		st := story{Failure: fs.failure.String(), Seed: fs.seed, Ops: len(fs.exec.Log.Ops), ShrunkOp: len(res.Log.Ops),
			Lines: len(lines), Runs: res.Runs,
			Files: []string{base + ".ops.ndjson", base + ".ndjson", shrunk + ".ops.ndjson", shrunk + ".ndjson"}}
		for i, err := range []error{
			writeLogFile(st.Files[0], fs.exec.Log), writeTraceFile(st.Files[1], fs.exec.Lines),
			writeLogFile(st.Files[2], res.Log), writeTraceFile(st.Files[3], lines),
		} {
			if err != nil {
				return fmt.Errorf("%s: %w", st.Files[i], err)
			}
		}
		heading := fmt.Sprintf("%s — seed %d", fs.failure, fs.seed)
		key := fmt.Sprintf("%d %v", fs.seed, res.Log.Ops)
		if prev, ok := seen[key]; ok {
			st.States = prev.states
			t.stories = append(t.stories, st)
			fmt.Fprintf(out, "\n%s: %d operations shrunk to the same %d as %s, the story above (%d executions tried)\nwrote %s\n",
				heading, st.Ops, st.ShrunkOp, prev.heading, st.Runs, strings.Join(st.Files, ", "))
			t.attachStory(fmt.Sprintf("seed-%d", fs.seed), prev.text)
			continue
		}
		fmt.Fprintf(out, "\n%s: %d operations shrunk to %d (%d executions tried)\n", heading, st.Ops, st.ShrunkOp, st.Runs)
		for _, o := range res.Log.Ops {
			fmt.Fprintf(out, "  op  %v\n", o)
		}
		lapses := printStory(out, lines, st.Files[3])
		st.States = 1 + st.Lines + lapses
		t.stories = append(t.stories, st)
		fmt.Fprintf(out, "shrunk to %d lines (%d states as TLC counts them: Init, the lines and %d inferred Lapse(s))\n", st.Lines, st.States, lapses)
		fmt.Fprintf(out, "wrote %s\n", strings.Join(st.Files, ", "))
		seen[key] = firstStory{heading: heading, text: told, states: st.States}
		t.attachStory(fmt.Sprintf("seed-%d", fs.seed), told)
	}
	return nil
}

// storyWriter is where one story is printed: out, and with -junit or
// -summary also the buffer it returns, which attachStory hands to the
// report.
func (t *tally) storyWriter(out io.Writer) (io.Writer, *bytes.Buffer) {
	if t.rep == nil {
		return out, nil
	}
	var b bytes.Buffer
	return io.MultiWriter(out, &b), &b
}

// attachStory gives the story told to every failed check of the
// execution name.
func (t *tally) attachStory(name string, told *bytes.Buffer) {
	if t.rep == nil || told == nil {
		return
	}
	for i := range t.rep.Verdicts {
		if v := &t.rep.Verdicts[i]; v.Name == name && v.Status == report.Failed {
			v.Story += strings.TrimLeft(told.String(), "\n")
		}
	}
}

// printStory prints lines as show's timeline, the rejected line marked,
// and returns the Lapses the checker inferred in them.
func printStory(out io.Writer, lines []core.TraceEvent, name string) int {
	stats, err := tracecheck.Check(lines, tracecheck.WithFile(name))
	var v *tracecheck.Violation
	errors.As(err, &v)
	for _, th := range tracecheck.Order(lines) {
		textView(out, explore.BuildView(th, v), 24)
	}
	if v != nil {
		fmt.Fprintf(out, "the Go trace checker: %s:%d: %s %s\n", v.File, v.Line, v.Action, v.Rule)
	}
	return stats.LapsesInferred
}

func writeLogFile(path string, l sim.Log) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := sim.WriteLog(f, l); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
