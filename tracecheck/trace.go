package tracecheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/threadclaim/threadclaim/core"
)

var (
	_ core.Tracer = (*Writer)(nil)
	_ core.Tracer = (*Recorder)(nil)
)

// Writer writes trace lines as ndjson, one core.TraceEvent per line, to an
// io.Writer. It is safe for concurrent use: each line is written whole by
// one Write call, in the order Trace is called. Lines are not buffered; wrap
// a file in a bufio.Writer (and flush it) when the trace is long.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Trace writes ev as one line. A write error is kept and returned by Err;
// once there is one, later lines are dropped.
func (t *Writer) Trace(ev core.TraceEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	t.buf = appendLine(t.buf[:0], &ev)
	if _, err := t.w.Write(t.buf); err != nil {
		t.err = fmt.Errorf("write trace line: %w", err)
	}
}

// Err returns the first error writing a line, or nil.
func (t *Writer) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// appendLine appends ev's JSON and a newline. json.Marshal of a struct of
// plain fields cannot fail; a failure would be a broken invariant.
func appendLine(b []byte, ev *core.TraceEvent) []byte {
	j, err := json.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("tracecheck: marshal trace event: %v", err))
	}
	b = append(b, j...)
	return append(b, '\n')
}

// Recorder keeps trace lines in memory, in the order Trace is called. It is
// safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	lines []core.TraceEvent
}

// Trace keeps ev.
func (r *Recorder) Trace(ev core.TraceEvent) {
	r.mu.Lock()
	r.lines = append(r.lines, ev)
	r.mu.Unlock()
}

// Lines returns a copy of the lines kept so far.
func (r *Recorder) Lines() []core.TraceEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// Len returns how many lines were kept.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}

// WriteTo writes the lines kept so far as ndjson.
func (r *Recorder) WriteTo(w io.Writer) (int64, error) {
	lines := r.Lines()
	bw := bufio.NewWriter(w)
	var n int64
	var buf []byte
	for i := range lines {
		buf = appendLine(buf[:0], &lines[i])
		m, err := bw.Write(buf)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}

// LineError is a trace line that could not be read: the file, the line's
// 1-based number, and why.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the reason.
func (e *LineError) Unwrap() error { return e.Err }

// ErrMalformed is the reason of every LineError that Read returns for a
// line that is not a well-formed trace line (errors.Is finds it).
var ErrMalformed = errors.New("malformed trace line")

// MaxLineBytes is the longest trace line Read accepts.
const MaxLineBytes = 64 << 10

// loggedActions are the actions a trace line may name: every action but
// Lapse, which is never logged.
var loggedActions = func() map[core.Action]bool {
	m := map[core.Action]bool{}
	for _, a := range core.Actions() {
		if a != core.ActionLapse {
			m[a] = true
		}
	}
	return m
}()

// Read reads an ndjson trace. name is the file's name, used in errors. The
// i-th event returned is the file's line i+1, so a line's number is its
// index plus one. Read is strict: an empty line (other than none after the
// last newline), a line that is not one JSON object, an unknown or missing
// field (only kind may be missing), a field of the wrong type, an unknown
// action or Lapse, a kind other than "", "run" or "reply", anything after
// the object, or a line longer than MaxLineBytes, is a *LineError naming
// name and the line, wrapping ErrMalformed. A read error of r is returned
// wrapped in a *LineError too.
func Read(r io.Reader, name string) ([]core.TraceEvent, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []core.TraceEvent
	var long []byte
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(long) <= MaxLineBytes {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			if len(long) > MaxLineBytes {
				return out, &LineError{name, n, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLineBytes)}
			}
			line = long
		}
		if err != nil && err != io.EOF {
			return out, &LineError{name, n, err}
		}
		if err == io.EOF && len(line) == 0 {
			return out, nil
		}
		ev, perr := parseLine(line)
		if perr != nil {
			return out, &LineError{name, n, fmt.Errorf("%w: %v", ErrMalformed, perr)}
		}
		out = append(out, ev)
		if err == io.EOF {
			return out, nil
		}
	}
}

// ReadFile reads the trace in the file at path (see Read).
func ReadFile(path string) ([]core.TraceEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path)
}

// The fields of a trace line, in core.TraceEvent's order; kind is the
// only optional one.
const (
	fTick = iota
	fRead
	fAction
	fThread
	fProc
	fHolder
	fMsg
	fReq
	fRun
	fTaken
	fLease
	fKind
	numFields
)

var fieldNames = [numFields]string{"tick", "read", "action", "thread", "proc", "holder", "msg", "req", "run", "taken", "lease", "kind"}

func fieldIndex(name []byte) int {
	for i, n := range fieldNames {
		if string(name) == n {
			return i
		}
	}
	return -1
}

// lineParser parses one trace line: a flat JSON object whose keys are
// exactly the field names (no other, none twice) and whose values are
// unsigned or signed integers, booleans and strings, as the field needs.
// It is stricter than encoding/json (which matches keys case-insensitively
// and takes the last of duplicate keys) and faster.
type lineParser struct {
	b []byte
	i int
}

func (p *lineParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *lineParser) errf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", p.i+1, fmt.Sprintf(format, args...))
}

// str parses a JSON string; it rejects control characters and invalid
// UTF-8, and decodes escapes through encoding/json.
func (p *lineParser) str() (string, error) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", p.errf("want a string")
	}
	start := p.i
	p.i++
	escaped := false
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			raw := p.b[start:p.i]
			if !utf8.Valid(raw) {
				return "", p.errf("invalid UTF-8 in a string")
			}
			if !escaped {
				return string(raw[1 : len(raw)-1]), nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", p.errf("bad string: %v", err)
			}
			return s, nil
		case c == '\\':
			escaped = true
			p.i += 2
		case c < 0x20:
			return "", p.errf("control character in a string")
		default:
			p.i++
		}
	}
	return "", p.errf("unterminated string")
}

// uint parses a JSON number that is a non-negative integer.
func (p *lineParser) uint() (uint64, error) {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	digits := p.b[start:p.i]
	switch {
	case len(digits) == 0:
		return 0, p.errf("want a non-negative integer")
	case len(digits) > 1 && digits[0] == '0':
		return 0, p.errf("leading zero")
	case p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E'):
		return 0, p.errf("want an integer")
	}
	v, err := strconv.ParseUint(string(digits), 10, 64)
	if err != nil {
		return 0, p.errf("integer out of range")
	}
	return v, nil
}

// int parses a JSON integer that fits an int64 and is not negative.
func (p *lineParser) int() (int64, error) {
	if p.i < len(p.b) && p.b[p.i] == '-' {
		return 0, p.errf("negative integer")
	}
	v, err := p.uint()
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt64 {
		return 0, p.errf("integer out of range")
	}
	return int64(v), nil
}

func (p *lineParser) bool() (bool, error) {
	switch {
	case bytes.HasPrefix(p.b[p.i:], []byte("true")):
		p.i += 4
		return true, nil
	case bytes.HasPrefix(p.b[p.i:], []byte("false")):
		p.i += 5
		return false, nil
	}
	return false, p.errf("want true or false")
}

func parseLine(line []byte) (core.TraceEvent, error) {
	var ev core.TraceEvent
	p := &lineParser{b: line}
	p.ws()
	if p.i == len(p.b) {
		return ev, errors.New("empty line")
	}
	if p.b[p.i] != '{' {
		return ev, errors.New("not a JSON object")
	}
	p.i++
	var seen [numFields]bool
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
	} else {
		for {
			p.ws()
			keyAt := p.i
			key, err := p.str()
			if err != nil {
				return ev, err
			}
			f := fieldIndex([]byte(key))
			if f < 0 {
				p.i = keyAt
				return ev, p.errf("unknown field %q", key)
			}
			if seen[f] {
				p.i = keyAt
				return ev, p.errf("duplicate field %q", key)
			}
			seen[f] = true
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return ev, p.errf("want ':'")
			}
			p.i++
			p.ws()
			var s string
			var n int64
			switch f {
			case fTick:
				ev.Tick, err = p.uint()
			case fRead:
				ev.Read, err = p.bool()
			case fMsg, fReq, fRun, fTaken:
				n, err = p.int()
				switch f {
				case fMsg:
					ev.Msg = core.Seq(n)
				case fReq:
					ev.Req = core.RequestID(n)
				case fRun:
					ev.Run = core.RunID(n)
				case fTaken:
					ev.Taken = core.Seq(n)
				}
			default:
				s, err = p.str()
				switch f {
				case fAction:
					ev.Action = core.Action(s)
				case fThread:
					ev.Thread = core.ThreadID(s)
				case fProc:
					ev.Proc = s
				case fHolder:
					ev.Holder = core.Holder(s)
				case fLease:
					ev.Lease = core.Holder(s)
				case fKind:
					ev.Kind = s
				}
			}
			if err != nil {
				return ev, fmt.Errorf("field %q: %w", fieldNames[f], err)
			}
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == '}' {
				p.i++
				break
			}
			return ev, p.errf("want ',' or '}'")
		}
	}
	p.ws()
	if p.i != len(p.b) {
		return ev, p.errf("trailing data after the JSON object")
	}
	var missing []string
	for f, ok := range seen {
		if !ok && f != fKind {
			missing = append(missing, fieldNames[f])
		}
	}
	if len(missing) > 0 {
		return core.TraceEvent{}, fmt.Errorf("missing field(s) %v", missing)
	}
	switch {
	case ev.Action == core.ActionLapse:
		return core.TraceEvent{}, errors.New("action Lapse is never logged")
	case !loggedActions[ev.Action]:
		return core.TraceEvent{}, fmt.Errorf("unknown action %q", ev.Action)
	case ev.Kind != "" && ev.Kind != core.PlanKindRun && ev.Kind != core.PlanKindReply:
		return core.TraceEvent{}, fmt.Errorf("unknown plan kind %q", ev.Kind)
	case ev.Thread == "":
		return core.TraceEvent{}, errors.New("empty thread")
	}
	return ev, nil
}

// Line is a trace line with its 1-based number in the trace it came from.
type Line struct {
	N  int
	Ev *core.TraceEvent
}

// ThreadLines is one thread's lines in trace order.
type ThreadLines struct {
	Thread core.ThreadID
	Lines  []Line
}

// Order groups lines by thread, in the order each thread first appears, and
// puts each thread's lines in trace order: by tick, writes before reads at
// equal tick, and otherwise as written (a stable sort). Line numbers are
// positions in lines plus one; the Ev pointers point into lines. It takes
// time linear in len(lines) when ticks are dense, as a thread's versions
// are, and O(n log n) otherwise.
func Order(lines []core.TraceEvent) []ThreadLines {
	var threads []ThreadLines
	index := map[core.ThreadID]int{}
	last := -1
	for i := range lines {
		id := lines[i].Thread
		if last < 0 || threads[last].Thread != id {
			j, ok := index[id]
			if !ok {
				j = len(threads)
				index[id] = j
				threads = append(threads, ThreadLines{Thread: id})
			}
			last = j
		}
		threads[last].Lines = append(threads[last].Lines, Line{N: i + 1, Ev: &lines[i]})
	}
	for i := range threads {
		threads[i].Lines = sortLines(threads[i].Lines)
	}
	return threads
}

// orderKey is a line's place in trace order for ticks below 1<<62: tick,
// then writes before reads.
func orderKey(ev *core.TraceEvent) uint64 {
	k := ev.Tick << 1
	if ev.Read {
		k |= 1
	}
	return k
}

// compareLines orders two lines by tick, then writes before reads.
func compareLines(a, b Line) int {
	switch {
	case a.Ev.Tick < b.Ev.Tick:
		return -1
	case a.Ev.Tick > b.Ev.Tick:
		return 1
	case a.Ev.Read == b.Ev.Read:
		return 0
	case b.Ev.Read:
		return -1
	}
	return 1
}

// sortLines sorts stably in trace order: a counting sort when the ticks are
// dense, a merge sort otherwise.
func sortLines(ls []Line) []Line {
	if len(ls) < 2 || slices.IsSortedFunc(ls, compareLines) {
		return ls
	}
	lo, hi := ls[0].Ev.Tick, ls[0].Ev.Tick
	for _, l := range ls[1:] {
		lo, hi = min(lo, l.Ev.Tick), max(hi, l.Ev.Tick)
	}
	if hi >= 1<<62 || hi-lo > uint64(2*len(ls)+32) {
		slices.SortStableFunc(ls, compareLines)
		return ls
	}
	base := lo << 1
	count := make([]int, (hi-lo+1)*2+1)
	for _, l := range ls {
		count[orderKey(l.Ev)-base+1]++
	}
	for i := 1; i < len(count); i++ {
		count[i] += count[i-1]
	}
	out := make([]Line, len(ls))
	for _, l := range ls {
		k := orderKey(l.Ev) - base
		out[count[k]] = l
		count[k]++
	}
	return out
}
