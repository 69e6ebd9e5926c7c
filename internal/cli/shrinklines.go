package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/sim"
	"github.com/threadclaim/threadclaim/internal/sim/shrink"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// Failures with no operation log — a concurrent execution's, a trace
// file's, a fleet's — are shrunk by their lines: a rejected trace by the
// rejected thread's lines (shrink.ShrinkTrace), a history porcupine finds
// not linearizable by its operations (shrink.ShrinkLinearizability).

// concurrentFailure is a concurrent execution kept for shrinking: its
// lines in trace order, with their call and return times.
type concurrentFailure struct {
	seed    uint64
	failure shrink.Failure // a rejected trace's; zero for a history
	lines   []core.TraceEvent
	defect  *sim.ConcurrentDefect // a call failed with an error only a defect explains
}

// noteConcurrent keeps the first concurrent execution of each rejected
// trace's failure, and the first whose history is not linearizable.
func (t *tally) noteConcurrent(seed uint64, lines []core.TraceEvent, checkErr error, notLinearizable bool) {
	var v *tracecheck.Violation
	if errors.As(checkErr, &v) {
		f := shrink.Failure{Check: shrink.CheckTrace, Action: v.Action, Rule: v.Rule}
		if !slices.ContainsFunc(t.concFailed, func(c concurrentFailure) bool { return c.failure == f }) {
			t.concFailed = append(t.concFailed, concurrentFailure{seed: seed, failure: f, lines: lines})
		}
	}
	if notLinearizable && t.concLin == nil {
		t.concLin = &concurrentFailure{seed: seed, lines: lines}
	}
}

// shrinkConcurrent shrinks the concurrent executions' failures that no
// seeded execution showed (a seeded one shrinks better: by its operation
// log), and the first history that is not linearizable, and prints and
// writes their stories.
func (t *tally) shrinkConcurrent(ctx context.Context, f runFlags, out io.Writer) error {
	header := false
	head := func() {
		if !header {
			fmt.Fprintf(out, "\nshortest stories of the concurrent executions (no operation log: shrunk by their lines)\n")
			header = true
		}
	}
	for _, c := range t.concFailed {
		if slices.ContainsFunc(t.failed, func(s failedSeed) bool { return s.failure == c.failure }) {
			continue
		}
		head()
		orig := filepath.Join(f.shrinkDir, fmt.Sprintf("concurrent-%d.ndjson", c.seed))
		w, told := t.storyWriter(out)
		st, err := shrinkTraceStory(ctx, w, fmt.Sprintf("concurrent %d", c.seed), c.lines, orig, false, "")
		t.attachStory(fmt.Sprintf("concurrent-%d", c.seed), told)
		if notShrunk(out, c.failure.String(), err) {
			continue
		}
		if err != nil {
			return err
		}
		st.Seed = c.seed
		t.stories = append(t.stories, st)
	}
	if c := t.concDefect; c != nil && !slices.ContainsFunc(t.failed, func(s failedSeed) bool {
		return s.failure == shrink.Failure{Check: shrink.CheckInvariant, Invariant: sim.InvNoDefectError}
	}) {
		head()
		st, err := defectStory(out, f.shrinkDir, c)
		if err != nil {
			return err
		}
		t.stories = append(t.stories, st)
	}
	if c := t.concLin; c != nil {
		head()
		base := filepath.Join(f.shrinkDir, fmt.Sprintf("concurrent-%d", c.seed))
		w, told := t.storyWriter(out)
		st, err := shrinkLinStory(ctx, w, fmt.Sprintf("concurrent %d", c.seed), c.lines, f.porcupineTimeout, base)
		t.attachStory(fmt.Sprintf("concurrent-%d", c.seed), told)
		if err != nil && !notShrunk(out, "not linearizable", err) {
			return err
		}
		if err == nil {
			st.Seed = c.seed
			t.stories = append(t.stories, st)
		}
	}
	return nil
}

// shrinkTraceStory shrinks a rejected trace (its lines in check order),
// writes the original to orig unless it is there already (written false),
// and the story as BASE.shrunk-FAILURE.ndjson (BASE: orig less .ndjson)
// in dir, or beside orig when dir is "", and prints the story.
func shrinkTraceStory(ctx context.Context, out io.Writer, name string, lines []core.TraceEvent, orig string, written bool, dir string, opts ...tracecheck.Option) (story, error) {
	res, err := shrink.ShrinkTrace(ctx, lines, opts...)
	if err != nil {
		return story{}, err
	}
	if !written {
		if err := shrink.WriteTraceFile(orig, lines); err != nil {
			return story{}, err
		}
	}
	shrunk := strings.TrimSuffix(orig, ".ndjson") + ".shrunk-" + res.Failure.Slug() + ".ndjson"
	if dir != "" {
		shrunk = filepath.Join(dir, filepath.Base(shrunk))
	}
	if err := shrink.WriteTraceFile(shrunk, res.Lines); err != nil {
		return story{}, err
	}
	st := story{Failure: res.Failure.String(), Source: name, Ops: res.From, ShrunkOp: len(res.Lines), Lines: len(res.Lines),
		States: res.States(), Runs: res.Tries, Files: []string{orig, shrunk}}
	printTraceStory(out, name, res, st.Files)
	return st, nil
}

// printTraceStory prints a shrunk rejected trace as show's timeline.
func printTraceStory(out io.Writer, name string, res shrink.TraceResult, files []string) {
	fmt.Fprintf(out, "\n%s — %s: the rejected thread's %d lines shrunk to %d (%d candidates checked)\n",
		res.Failure, name, res.From, len(res.Lines), res.Tries)
	name = "story"
	if len(files) > 0 {
		name = files[len(files)-1]
	}
	printStory(out, res.Lines, name)
	fmt.Fprintf(out, "shrunk to %d lines (%d states as TLC counts them: Init, the lines and %d inferred Lapse(s))\n",
		len(res.Lines), res.States(), res.Lapses)
	printFiles(out, files)
}

// shrinkLinStory shrinks a history porcupine finds not linearizable (the
// lines with their call and return times), writes the original as
// base.history and the shrunk one as base.shrunk-not-linearizable.history
// with its porcupine visualisation, and prints the story.
func shrinkLinStory(ctx context.Context, out io.Writer, name string, lines []core.TraceEvent, timeout time.Duration, base string) (story, error) {
	res, err := shrink.ShrinkLinearizability(ctx, lines, timeout)
	if err != nil {
		return story{}, err
	}
	files := []string{base + ".history"}
	if err := shrink.WriteHistoryFile(files[0], lines); err != nil {
		return story{}, err
	}
	more, err := res.WriteFiles(base + ".shrunk-" + shrink.LinSlug)
	if err != nil {
		return story{}, err
	}
	files = append(files, more...)
	printLinStory(out, name, res, files)
	return story{Failure: "not linearizable", Source: name, Ops: res.From, ShrunkOp: len(res.Ops), Runs: res.Tries, Files: files}, nil
}

// printLinStory prints a shrunk history: its operations in real-time
// order, with their times.
func printLinStory(out io.Writer, name string, res shrink.LinResult, files []string) {
	fmt.Fprintf(out, "\nnot linearizable — %s: %d operations shrunk to %d (%d candidates checked by porcupine, %d timed out)\n",
		name, res.From, len(res.Ops), res.Tries, res.Unknown)
	shrink.WriteHistoryStory(out, tracecheck.LeaseModel(), res.Ops)
	fmt.Fprintf(out, "shrunk to %d operations\n", len(res.Ops))
	printFiles(out, files)
}

// printFiles names the files of a story: the original, then the story's.
func printFiles(out io.Writer, files []string) {
	if len(files) > 1 {
		fmt.Fprintf(out, "the original: %s; the story: %s\n", files[0], strings.Join(files[1:], ", "))
	}
}

// notShrunk prints why a failure was not shrunk when it is a verdict
// (the failure did not show again alone, porcupine timed out), and says
// whether it was one.
func notShrunk(out io.Writer, failure string, err error) bool {
	if errors.Is(err, shrink.ErrNotReproduced) || errors.Is(err, shrink.ErrInconclusive) {
		fmt.Fprintf(out, "\n%s: not shrunk: %v\n", failure, err)
		return true
	}
	return false
}

// defectStory tells the story of a concurrent execution in which a call
// failed with an error only a defect explains (sim.InvNoDefectError): the
// failing thread's lines in trace order up to the last that returned
// before the failure was seen (every thread's when the call's thread is
// not known), then the failure. With no operation log and no line the
// checker rejects, it is not shrunk; a seeded execution that shows the
// same defect is, and is told instead.
func defectStory(out io.Writer, dir string, c *concurrentFailure) (story, error) {
	d := c.defect
	var lines []core.TraceEvent
	for _, th := range tracecheck.Order(c.lines) {
		if d.Thread != "" && th.Thread != d.Thread {
			continue
		}
		n := 0
		for i, l := range th.Lines {
			if l.Ev.Return != 0 && l.Ev.Return <= d.At {
				n = i + 1
			}
		}
		for _, l := range th.Lines[:n] {
			lines = append(lines, *l.Ev)
		}
	}
	name := fmt.Sprintf("concurrent %d", c.seed)
	file := filepath.Join(dir, fmt.Sprintf("concurrent-%d.%s.ndjson", c.seed, sim.InvNoDefectError))
	if err := shrink.WriteTraceFile(file, lines); err != nil {
		return story{}, err
	}
	fmt.Fprintf(out, "\ninvariant %s — %s: the lines of thread %s before the failure (not shrunk: no operation log)\n", sim.InvNoDefectError, name, d.Thread)
	lapses := printStory(out, lines, file)
	fmt.Fprintf(out, "then %s's call on thread %s failed: %v\n", d.Proc, d.Thread, d.Err)
	fmt.Fprintf(out, "wrote %s\n", file)
	return story{Failure: "invariant " + sim.InvNoDefectError, Source: name, Seed: c.seed, Lines: len(lines),
		States: 1 + len(lines) + lapses, Files: []string{file}}, nil
}
