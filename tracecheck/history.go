package tracecheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/threadclaim/threadclaim/core"
)

// A history file is what one OS process of a many-process run writes: one
// JSON object a line, {"call":NS,"return":NS,"line":TRACE-LINE}, where the
// times are the machine's wall clock in nanoseconds (one machine, so the
// processes' readings compare; the processes' skewed lease clocks are
// separate) and TRACE-LINE is a trace line. Each line is written whole,
// unbuffered, before the process goes on, so a process killed at any point
// loses at most the line of the write it was committing, whose commit the
// storage's own record of writes (postgres.Options.KeepTrace) keeps.

// HistoryWriter is a core.Tracer and core.TraceClock that writes a
// history file. It is safe for concurrent use.
type HistoryWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
}

var (
	_ core.Tracer     = (*HistoryWriter)(nil)
	_ core.TraceClock = (*HistoryWriter)(nil)
)

// NewHistoryWriter returns a HistoryWriter writing to w.
func NewHistoryWriter(w io.Writer) *HistoryWriter { return &HistoryWriter{w: w} }

// TraceNow reads the machine's wall clock, in nanoseconds.
func (h *HistoryWriter) TraceNow() int64 { return time.Now().UnixNano() }

type historyLine struct {
	Call   int64           `json:"call"`
	Return int64           `json:"return"`
	Line   json.RawMessage `json:"line"`
}

// Trace writes ev with its call and return times as one line.
func (h *HistoryWriter) Trace(ev core.TraceEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return
	}
	line := appendLine(nil, &ev)
	b, err := json.Marshal(historyLine{Call: ev.Call, Return: ev.Return, Line: line[:len(line)-1]})
	if err != nil {
		h.err = err
		return
	}
	h.buf = append(append(h.buf[:0], b...), '\n')
	if _, err := h.w.Write(h.buf); err != nil {
		h.err = fmt.Errorf("write history line: %w", err)
	}
}

// Err returns the first error writing a line, or nil.
func (h *HistoryWriter) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// ReadHistory reads a history file: trace lines with Call and Return set.
// A last line cut short (the process was killed while writing it) is
// dropped; any other malformed line is an error naming name and the line.
func ReadHistory(r io.Reader, name string) ([]core.TraceEvent, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var out []core.TraceEvent
	var pending error
	n := 0
	for sc.Scan() {
		n++
		if pending != nil {
			return nil, pending
		}
		var h historyLine
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			pending = &LineError{File: name, Line: n, Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
			continue
		}
		ev, err := parseLine(h.Line)
		if err != nil {
			return nil, &LineError{File: name, Line: n, Err: err}
		}
		ev.Call, ev.Return = h.Call, h.Return
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// MergeHistories makes one trace of a many-process run: the writes as
// storage committed them (stored), and the reads and refusals from the
// processes' histories. A write takes its call and return times from the
// history line of the same thread and tick; a write no history has (its
// process was killed after the commit, or its commit's outcome was
// unknown to it) is pending: called at no known time (0), returned at no
// known time. Its call is not bounded by the process's other lines: a
// process works several threads and renews beside its turns, so a write
// in flight may have begun before every line the process recorded.
func MergeHistories(stored []core.TraceEvent, histories [][]core.TraceEvent) []core.TraceEvent {
	type key struct {
		thread core.ThreadID
		tick   uint64
	}
	times := map[key][2]int64{}
	var out []core.TraceEvent
	for _, h := range histories {
		for _, ev := range h {
			if ev.Read {
				out = append(out, ev)
				continue
			}
			times[key{ev.Thread, ev.Tick}] = [2]int64{ev.Call, ev.Return}
		}
	}
	for _, ev := range stored {
		if t, ok := times[key{ev.Thread, ev.Tick}]; ok {
			ev.Call, ev.Return = t[0], t[1]
		} else {
			ev.Call, ev.Return = 0, math.MaxInt64
		}
		out = append(out, ev)
	}
	return out
}
