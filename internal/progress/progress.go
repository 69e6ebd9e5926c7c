// Package progress shows how far a long job has got — done of total, the
// rate and the time left — on a terminal, and nothing elsewhere: a job's
// output piped to a file or a CI log stays free of it.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Meter draws one status line, redrawn in place (a carriage return) at
// most every Every. It counts units (executions) and the steps within
// them (trace lines, operations), so that a single long unit shows its
// progress too. A nil *Meter is valid and draws nothing, so callers need
// not check whether progress is on. It is safe for concurrent use: the
// steps of one unit may come from many goroutines.
type Meter struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	unit  string
	total int
	now   func() time.Time
	every time.Duration

	start, drawn time.Time
	done         int
	steps        int
	wide         int // the widest line drawn, to clear it
}

// Every is how often a Meter redraws at most.
const Every = 200 * time.Millisecond

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// New returns a Meter of total units (unit names them: "executions")
// drawing on w with the clock now; nil when w is not a terminal.
func New(w io.Writer, label string, total int, unit string, now func() time.Time) *Meter {
	if !IsTerminal(w) {
		return nil
	}
	return NewOn(w, label, total, unit, now)
}

// NewOn returns a Meter that draws on w whatever w is.
func NewOn(w io.Writer, label string, total int, unit string, now func() time.Time) *Meter {
	t := now()
	return &Meter{w: w, label: label, unit: unit, total: total, now: now, every: Every, start: t}
}

// Add counts n more units done and redraws if Every has passed.
func (m *Meter) Add(n int) { m.count(n, 0) }

// Step counts n more steps (trace lines, operations) of the units under
// way and redraws if Every has passed.
func (m *Meter) Step(n int) { m.count(0, n) }

// count counts units and steps done, and redraws if Every has passed.
func (m *Meter) count(units, steps int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done += units
	m.steps += steps
	if t := m.now(); t.Sub(m.drawn) >= m.every {
		m.drawn = t
		m.draw(t)
	}
}

// Line returns the status line for the units done so far at time t:
// "run: 1200/100000 executions (1.2%), 850/s, ETA 1m56s", and once steps
// are counted "; 530000 steps, 4200/s".
func (m *Meter) Line(t time.Time) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.line(t)
}

func (m *Meter) line(t time.Time) string {
	s := m.units(t)
	if m.steps > 0 {
		s += fmt.Sprintf("; %d steps", m.steps)
		if elapsed := t.Sub(m.start); elapsed > 0 {
			s += fmt.Sprintf(", %.0f/s", float64(m.steps)/elapsed.Seconds())
		}
	}
	return s
}

// units is the line's units: done, total, rate and ETA.
func (m *Meter) units(t time.Time) string {
	elapsed := t.Sub(m.start)
	s := fmt.Sprintf("%s: %d", m.label, m.done)
	if m.total > 0 {
		s += fmt.Sprintf("/%d %s (%.1f%%)", m.total, m.unit, 100*float64(m.done)/float64(m.total))
	} else {
		s += " " + m.unit
	}
	if elapsed <= 0 || m.done == 0 {
		return s
	}
	rate := float64(m.done) / elapsed.Seconds()
	s += fmt.Sprintf(", %.0f/s", rate)
	if m.total > m.done {
		eta := time.Duration(float64(m.total-m.done) / rate * float64(time.Second))
		s += ", ETA " + eta.Round(time.Second).String()
	}
	return s
}

func (m *Meter) draw(t time.Time) {
	line := m.line(t)
	pad := max(0, m.wide-len(line))
	m.wide = max(m.wide, len(line))
	fmt.Fprintf(m.w, "\r%s%*s", line, pad, "")
}

// Done clears the status line, leaving the terminal as it was.
func (m *Meter) Done() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.wide == 0 {
		return
	}
	fmt.Fprintf(m.w, "\r%*s\r", m.wide, "")
}
