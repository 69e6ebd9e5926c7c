package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/internal/explore"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// defaultShowRows is how many lines show prints, and its page holds, at
// most: a page of a long trace; -lines and -thread pick the others.
const defaultShowRows = 2000

// sniffTLC tells a TLC counterexample (one JSON object, over one line or
// many) from a Go trace (a JSON object a line) by the file's first bytes,
// and reads the whole file only for a counterexample (TLC writes short
// ones): a Go trace is read as a stream.
func sniffTLC(path string) ([]byte, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, usageError{err.Error()}
	}
	defer f.Close()
	head := make([]byte, tracecheck.MaxLineBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, false, usageError{fmt.Sprintf("%s: %v", path, err)}
	}
	head = head[:n]
	first, _, _ := bytes.Cut(head, []byte("\n"))
	var probe map[string]json.RawMessage
	tlc := bytes.Contains(head, []byte(`"counterexample"`))
	if json.Unmarshal(first, &probe) == nil {
		_, tlc = probe["counterexample"]
	}
	if !tlc {
		return nil, false, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false, usageError{err.Error()}
	}
	return data, explore.IsTLC(data), nil
}

// goScan is show's first pass over a Go trace, read as a stream: the Go
// trace checker's verdict, as validate gives it, and what a second pass
// needs to draw and follow each thread without holding its lines.
type goScan struct {
	v        *tracecheck.Violation
	threads  map[core.ThreadID]*explore.ThreadInfo
	selected int // the lines -thread and -lines select
}

// scanGo reads the trace at path once, checking each line as it is read.
// Input that is not a well-formed trace is bad usage, found before
// anything is printed.
func scanGo(path string, o showOptions) (goScan, error) {
	s := goScan{threads: map[core.ThreadID]*explore.ThreadInfo{}}
	f, err := os.Open(path)
	if err != nil {
		return s, usageError{err.Error()}
	}
	defer f.Close()
	rd := tracecheck.NewReader(f, path)
	c := tracecheck.NewChecker(tracecheck.WithFile(path))
	checking := true
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return s, usageError{err.Error()}
		}
		n := rd.Line()
		if checking && c.Step(n, ev) != nil {
			checking = false // the check stops at the first violation
		}
		info, ok := s.threads[ev.Thread]
		if !ok {
			info = &explore.ThreadInfo{}
			info.Add(n, ev)
			s.threads[core.ThreadID(info.Name)] = info
		} else {
			info.Add(n, ev)
		}
		if (o.only == "" || string(ev.Thread) == o.only) && o.lines.has(n) {
			s.selected++
		}
	}
	if err := c.Err(); err != nil && !errors.As(err, &s.v) {
		return s, err
	}
	return s, nil
}

// shownThread is a thread's part of the page: its follower and the rows
// kept.
type shownThread struct {
	info   *explore.ThreadInfo
	fl     *explore.Follower
	cells  []explore.Cell
	steps  []explore.Step // for -html
	nsteps int            // the explorer's steps of the rows (Init and inferred Lapses too)
}

// goPage is the rows show prints: the selected lines, at most rows of
// them, by thread in the order the threads first show.
type goPage struct {
	threads []*shownThread
	rows    int
	next    int // the first selected line not shown; 0 when all are
}

// pageGo reads the trace at path again, following every thread that
// -thread selects from its first line (the spec's state at a line needs
// its thread's lines before it), keeping the rows of the selected lines
// up to rows, and stopping once it has them: a thread's follower is
// dropped after its last line unless it has rows.
func pageGo(path string, o showOptions, s goScan, rows int) (goPage, error) {
	var p goPage
	f, err := os.Open(path)
	if err != nil {
		return p, usageError{err.Error()}
	}
	defer f.Close()
	rd := tracecheck.NewReader(f, path)
	live := map[core.ThreadID]*shownThread{}
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return p, nil
		}
		if err != nil {
			return p, usageError{err.Error()}
		}
		n := rd.Line()
		if o.lines.hi != 0 && n > o.lines.hi {
			return p, nil
		}
		if o.only != "" && string(ev.Thread) != o.only {
			continue
		}
		keep := o.lines.has(n)
		if keep && rows > 0 && p.rows == rows {
			p.next = n
			return p, nil
		}
		st := live[ev.Thread]
		if st == nil {
			info := s.threads[ev.Thread]
			if info == nil {
				return p, usageError{fmt.Sprintf("%s changed while it was read (line %d)", path, n)}
			}
			st = &shownThread{info: info, fl: explore.NewFollower(info, s.v)}
			st.fl.Stateless = o.htmlOut == "" // the text has no state to show
			live[core.ThreadID(info.Name)] = st
		}
		cell, steps := st.fl.Line(n, ev, keep)
		if keep {
			if len(st.cells) == 0 {
				p.threads = append(p.threads, st)
			}
			st.cells, st.nsteps = append(st.cells, cell), st.nsteps+len(steps)
			if o.htmlOut != "" {
				st.steps = append(st.steps, steps...)
			}
			p.rows++
		}
		if n == st.info.Last {
			delete(live, ev.Thread)
		}
	}
}

// showGo shows a Go trace read as a stream, twice: once to check it (the
// verdict needs the whole trace) and once for the page of lines shown.
func showGo(path string, o showOptions, stdout io.Writer, fig *showFigures) error {
	s, err := scanGo(path, o)
	if err != nil {
		return err
	}
	fig.Source, fig.Verdict = explore.SourceGo, explore.GoVerdict(s.v)
	if o.only != "" && s.threads[core.ThreadID(o.only)] == nil {
		return usageError{fmt.Sprintf("no thread %q in %s", o.only, path)}
	}
	if s.selected == 0 {
		return usageError{fmt.Sprintf("-lines %s: no line of %s in that range", o.lines.String(), path)}
	}
	if err := checkHTMLOut(o.htmlOut); err != nil {
		return err
	}
	p, err := pageGo(path, o, s, o.rows)
	if err != nil {
		return err
	}
	t := explore.Trace{Title: path, Source: explore.SourceGo, File: path, Verdict: fig.Verdict, Paged: pagedNote(path, o, p, s.selected)}
	for _, st := range p.threads {
		textView(stdout, explore.View{Thread: core.ThreadID(st.info.Name), Lanes: st.info.Lanes, Holders: st.fl.Holders, Cells: st.cells}, o.width)
		t.Threads = append(t.Threads, explore.Thread{Name: st.info.Name, Lanes: st.fl.Lanes(), Holders: st.fl.Holders, Steps: st.steps})
		fig.Steps += st.nsteps
	}
	fig.Threads = len(t.Threads)
	if t.Paged != "" {
		fmt.Fprintf(stdout, "%s\n", t.Paged)
	}
	if s.v != nil {
		fmt.Fprintf(stdout, "\nREJECTED: %v\n", s.v)
	}
	if err := writeShowPage(path, o, t, stdout, fig); err != nil {
		return err
	}
	if v := s.v; v != nil {
		fig.Rejected = fmt.Sprintf("%s:%d: %s %s", v.File, v.Line, v.Action, v.Rule)
		return failure{exitFailed, fmt.Sprintf("%s: rejected at line %d", path, v.Line)}
	}
	return nil
}

// pagedNote says which of the selected lines the page shows and how to
// get the rest; "" when it shows them all.
func pagedNote(path string, o showOptions, p goPage, selected int) string {
	if p.next == 0 {
		return ""
	}
	thread, or := "", " (or -thread ID: one thread's lines)"
	if o.only != "" {
		thread, or = " -thread "+o.only, ""
	}
	hi := p.next + o.rows - 1
	if o.lines.hi != 0 {
		hi = min(hi, o.lines.hi)
	}
	return fmt.Sprintf("showing %d of the %d lines selected, up to line %d (at most -rows %d); the next page: tracecheck show%s -lines %d:%d %s%s",
		p.rows, selected, p.next-1, o.rows, thread, p.next, hi, path, or)
}
