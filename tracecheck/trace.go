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
	"strings"
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

// errNoSource and errNoWriter are the errors of a nil io.Reader and a nil
// io.Writer given where a trace is read or written.
var (
	errNoSource = errors.New("tracecheck: no source to read (a nil io.Reader)")
	errNoWriter = errors.New("tracecheck: nowhere to write (a nil io.Writer)")
)

// NewWriter returns a Writer writing to w. A nil w (or the zero Writer)
// keeps an error for Err at the first line, and writes nothing.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Trace writes ev as one line. A write error is kept and returned by Err;
// once there is one, later lines are dropped.
func (t *Writer) Trace(ev core.TraceEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil && t.w == nil {
		t.err = errNoWriter
	}
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

// WriteTo writes the lines kept so far as ndjson, in trace order (Sort):
// a file that follows the order rule. A nil w is an error.
func (r *Recorder) WriteTo(w io.Writer) (int64, error) {
	if w == nil {
		return 0, errNoWriter
	}
	lines := r.Lines()
	Sort(lines)
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

// WriteLines writes lines as ndjson, in the order given (Sort them first
// for a file that follows the order rule), through a buffer it flushes.
// A nil w is an error.
func WriteLines(w io.Writer, lines []core.TraceEvent) error {
	if w == nil {
		return errNoWriter
	}
	bw := bufio.NewWriter(w)
	var buf []byte
	for i := range lines {
		buf = appendLine(buf[:0], &lines[i])
		if _, err := bw.Write(buf); err != nil {
			return fmt.Errorf("write trace line: %w", err)
		}
	}
	return bw.Flush()
}

// LineError is a trace that could not be read: the file, the 1-based
// number of the line at fault (0 when no line is: a file that cannot be
// opened), and why.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

// Unwrap returns the reason.
func (e *LineError) Unwrap() error { return e.Err }

// ErrMalformed is the reason of every LineError for a line that is not a
// well-formed trace line (errors.Is finds it).
var ErrMalformed = errors.New("malformed trace line")

// ErrEmpty is the reason of the LineError for a trace with no line at all,
// reported at line 1, the line that is missing. errors.Is finds
// ErrMalformed in it too: an empty trace is bad input, never a pass.
var ErrEmpty error = emptyError{}

type emptyError struct{}

func (emptyError) Error() string        { return "empty trace (no line)" }
func (emptyError) Is(target error) bool { return target == ErrMalformed }

// MaxLineBytes is the longest trace line Reader accepts, its newline
// excluded.
const MaxLineBytes = 64 << 10

// readBufSize is Reader's buffer: it holds the longest line with room to
// spare, so that a line is parsed where it was read.
const readBufSize = 4 * MaxLineBytes

// Reader reads an ndjson trace a line at a time, strictly (see the package
// doc's input contract), without reflection and without allocating per
// line: strings that repeat (threads, processes, holders) are shared
// through a fixed table. Its memory is its buffer and that table, whatever
// the trace's length. Lines in core's own form take a fast path (see
// canonical.go); any other line goes to the general decoder, which
// accepts the same lines and more and gives the reason for the rest.
type Reader struct {
	src  io.Reader
	name string
	buf  []byte
	r, w int // unread bytes are buf[r:w]
	// scanned counts the unread bytes known to hold no newline: a line
	// that arrives in pieces is searched on from there, and parsed once
	// when its newline comes, not again from its start at each piece.
	scanned int
	srcErr  error // src's error, acted on once the buffer is drained
	n       int   // the number of the line last returned
	err     error // sticky: io.EOF or a *LineError
	ev      core.TraceEvent
	shared  interner
}

// NewReader returns a Reader of src; name names it in errors. A nil src
// (or the zero Reader) is an error of the source at line 1.
func NewReader(src io.Reader, name string) *Reader {
	return &Reader{src: src, name: name, buf: make([]byte, readBufSize)}
}

// Line returns the number of the line Next returned last (1-based).
func (r *Reader) Line() int { return r.n }

// Next returns the next line. The event is the Reader's own, overwritten
// by the next call: copy it to keep it. At the end of the trace it
// returns io.EOF; for a trace with no line, a *LineError at line 1
// wrapping ErrEmpty; for a line that is not well-formed, a *LineError naming the
// file and line, wrapping ErrMalformed; for an error of the source, a
// *LineError at the line it stopped (not ErrMalformed). After an error
// Next keeps returning it.
func (r *Reader) Next() (*core.TraceEvent, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		// A line in core's form is parsed where it starts, and its
		// newline found as it ends; any other goes by the newline.
		if r.scanned == 0 {
			if n := r.canonicalLine(r.buf[r.r:r.w]); n > 0 {
				r.r += n
				r.n++
				return &r.ev, nil
			}
		}
		if i := bytes.IndexByte(r.buf[r.r+r.scanned:r.w], '\n'); i >= 0 {
			line := r.buf[r.r : r.r+r.scanned+i]
			r.r += r.scanned + i + 1
			r.scanned = 0
			return r.line(line)
		}
		if r.w-r.r > MaxLineBytes {
			return r.line(r.buf[r.r:r.w])
		}
		if r.srcErr != nil {
			if r.srcErr != io.EOF {
				r.err = &LineError{r.name, r.n + 1, r.srcErr}
				return nil, r.err
			}
			if r.r < r.w { // the last line, without a newline
				line := r.buf[r.r:r.w]
				r.r, r.scanned = r.w, 0
				return r.line(line)
			}
			if r.n == 0 {
				r.err = &LineError{r.name, 1, ErrEmpty}
				return nil, r.err
			}
			r.err = io.EOF
			return nil, r.err
		}
		if r.src == nil {
			r.srcErr = errNoSource
			continue
		}
		r.scanned = r.w - r.r
		if r.r > 0 {
			r.w = copy(r.buf, r.buf[r.r:r.w])
			r.r = 0
		}
		m, err := r.src.Read(r.buf[r.w:])
		r.w += m
		if err != nil {
			r.srcErr = err
		}
	}
}

func (r *Reader) line(b []byte) (*core.TraceEvent, error) {
	r.n++
	if len(b) > MaxLineBytes {
		r.err = &LineError{r.name, r.n, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLineBytes)}
		return nil, r.err
	}
	if r.decodeCanonical(b) {
		return &r.ev, nil
	}
	if err := r.decode(b); err != nil {
		r.err = &LineError{r.name, r.n, fmt.Errorf("%w: %v", ErrMalformed, err)}
		return nil, r.err
	}
	return &r.ev, nil
}

// Read reads a whole ndjson trace (see Reader). name is the file's name,
// used in errors. The i-th event returned is the file's line i+1. On an
// error it returns the lines before the one at fault, and the error.
func Read(src io.Reader, name string) ([]core.TraceEvent, error) {
	rd := NewReader(src, name)
	var out []core.TraceEvent
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, *ev)
	}
}

// ReadFile reads the trace in the file at path (see Read). A path that
// cannot be read (missing, a directory, no permission) is a *LineError at
// line 0, as an empty file is.
func ReadFile(path string) ([]core.TraceEvent, error) {
	f, err := openTrace(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path)
}

// openTrace opens a trace file for reading; a directory is refused here,
// since reading one fails only on some systems.
func openTrace(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &LineError{path, 0, err}
	}
	if st, err := f.Stat(); err != nil || st.IsDir() {
		f.Close()
		if err == nil {
			err = errors.New("is a directory, not a trace file")
		}
		return nil, &LineError{path, 0, err}
	}
	return f, nil
}

// The fields of a trace line, in core.TraceEvent's order. kind, the
// timing fields and output are optional.
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
	fNow
	fTTL
	fExpires
	fReplaced
	fOutput
	numFields
)

var fieldNames = [numFields]string{"tick", "read", "action", "thread", "proc", "holder", "msg", "req", "run",
	"taken", "lease", "kind", "now", "ttl", "expires", "replaced", "output"}

// quotedKeys are the keys as core writes them, with their colon.
var quotedKeys = func() (q [numFields][]byte) {
	for f, name := range fieldNames {
		q[f] = []byte(`"` + name + `":`)
	}
	return q
}()

// requiredFields has a bit set for each field a line must have.
const requiredFields = 1<<fKind - 1

func fieldIndex(key []byte) int {
	switch string(key) {
	case "tick":
		return fTick
	case "read":
		return fRead
	case "action":
		return fAction
	case "thread":
		return fThread
	case "proc":
		return fProc
	case "holder":
		return fHolder
	case "msg":
		return fMsg
	case "req":
		return fReq
	case "run":
		return fRun
	case "taken":
		return fTaken
	case "lease":
		return fLease
	case "kind":
		return fKind
	case "now":
		return fNow
	case "ttl":
		return fTTL
	case "expires":
		return fExpires
	case "replaced":
		return fReplaced
	case "output":
		return fOutput
	}
	return -1
}

// actionOf returns the action named b, if it is one a trace logs (not
// Lapse).
func actionOf(b []byte) (core.Action, bool) {
	if len(b) < 2 {
		return "", false
	}
	i := actionSlots[actionKey(b[0], b[len(b)-2], len(b))]
	if i < 0 || i == aLapse || string(actionNames[i]) != string(b) {
		return "", false
	}
	return actionNames[i], true
}

// decoder parses one line: a flat JSON object whose keys are exactly the
// field names (no other, none twice) and whose values are integers,
// booleans and strings, as the field needs. It is stricter than
// encoding/json (which matches keys case-insensitively, takes the last of
// duplicate keys, and replaces invalid UTF-8) and, on what both accept,
// gives the same values.
type decoder struct {
	b []byte
	i int
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) errf(format string, args ...any) error {
	return fmt.Errorf("at byte %d: %s", d.i+1, fmt.Sprintf(format, args...))
}

// plainASCII marks the bytes a string holds as they are: printable ASCII
// but the quote and the backslash.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str parses a JSON string and returns its bytes: a slice of the line when
// it has no escape, else a decoded copy. It rejects control characters and
// invalid UTF-8.
func (d *decoder) str() ([]byte, error) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, d.errf("want a string")
	}
	start := d.i
	d.i++
	ascii, escaped := true, false
	for d.i < len(d.b) {
		for d.i < len(d.b) && plainASCII[d.b[d.i]] {
			d.i++
		}
		if d.i == len(d.b) {
			break
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			raw := d.b[start:d.i]
			if !ascii && !utf8.Valid(raw) {
				return nil, d.errf("invalid UTF-8 in a string")
			}
			if !escaped {
				return raw[1 : len(raw)-1], nil
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, d.errf("bad string: %v", err)
			}
			// encoding/json reads a lone surrogate as U+FFFD, so two
			// different strings would name one thread; and core
			// writes no NUL (core.CheckText).
			if loneSurrogate(raw) {
				return nil, d.errf("a \\u escape that is half a surrogate pair in a string")
			}
			if strings.IndexByte(s, 0) >= 0 {
				return nil, d.errf("NUL (\\u0000) in a string")
			}
			return []byte(s), nil
		case c == '\\':
			escaped = true
			d.i += 2
		case c < 0x20:
			return nil, d.errf("control character in a string")
		default:
			if c >= 0x80 {
				ascii = false
			}
			d.i++
		}
	}
	return nil, d.errf("unterminated string")
}

// loneSurrogate reports whether the escapes of raw, a JSON string that
// encoding/json reads, hold a UTF-16 surrogate that is not one half of a
// pair: a high one not followed at once by a low one, or a low one not
// after a high one.
func loneSurrogate(raw []byte) bool {
	// high: the last escape was a high surrogate, awaiting its low half.
	// raw's first and last bytes are its quotes.
	high := false
	for i := 1; i < len(raw)-1; i++ {
		if raw[i] != '\\' || raw[i+1] != 'u' {
			if high {
				return true
			}
			if raw[i] == '\\' {
				i++ // a one-character escape, \\ among them
			}
			continue
		}
		u, _ := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		i += 5
		switch {
		case u >= 0xd800 && u < 0xdc00:
			if high {
				return true
			}
			high = true
		case u >= 0xdc00 && u < 0xe000:
			if !high {
				return true
			}
			high = false
		case high:
			return true
		}
	}
	return high
}

// uint parses a JSON number that is a non-negative integer.
func (d *decoder) uint() (uint64, error) {
	start := d.i
	var v uint64
	over := false
	for d.i < len(d.b) {
		c := d.b[d.i] - '0'
		if c > 9 {
			break
		}
		if v > (math.MaxUint64-uint64(c))/10 {
			over = true
		}
		v = v*10 + uint64(c)
		d.i++
	}
	switch n := d.i - start; {
	case n == 0:
		return 0, d.errf("want a non-negative integer")
	case n > 1 && d.b[start] == '0':
		return 0, d.errf("leading zero")
	case d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E'):
		return 0, d.errf("want an integer")
	case over:
		return 0, d.errf("integer out of range")
	}
	return v, nil
}

// nat parses a JSON integer that fits an int64 and is not negative.
func (d *decoder) nat() (int64, error) {
	if d.i < len(d.b) && d.b[d.i] == '-' {
		return 0, d.errf("negative integer")
	}
	v, err := d.uint()
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt64 {
		return 0, d.errf("integer out of range")
	}
	return int64(v), nil
}

// int parses a JSON integer that fits an int64, of either sign.
func (d *decoder) int() (int64, error) {
	neg := d.i < len(d.b) && d.b[d.i] == '-'
	if neg {
		d.i++
	}
	v, err := d.uint()
	switch {
	case err != nil:
		return 0, err
	case neg && v == 0:
		return 0, d.errf("negative zero")
	case neg && v <= 1<<63:
		return -int64(v-1) - 1, nil
	case v > math.MaxInt64:
		return 0, d.errf("integer out of range")
	}
	return int64(v), nil
}

func (d *decoder) bool() (bool, error) {
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		d.i += 4
		return true, nil
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		d.i += 5
		return false, nil
	}
	return false, d.errf("want true or false")
}

// parseLine parses one trace line on its own.
func parseLine(line []byte) (core.TraceEvent, error) {
	var r Reader
	if r.decodeCanonical(line) {
		return r.ev, nil
	}
	if err := r.decode(line); err != nil {
		return core.TraceEvent{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return r.ev, nil
}

// decode parses line into r.ev.
func (r *Reader) decode(line []byte) error {
	ev := &r.ev
	*ev = core.TraceEvent{}
	d := decoder{b: line}
	d.ws()
	if d.i == len(d.b) {
		return errors.New("empty line")
	}
	if d.b[d.i] != '{' {
		return errors.New("not a JSON object")
	}
	d.i++
	var seen uint32
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
	} else {
		next := fTick // the field core writes next: tried first, as it is
		for {
			d.ws()
			f := -1
			if next < numFields && bytes.HasPrefix(d.b[d.i:], quotedKeys[next]) && seen&(1<<next) == 0 {
				f = next
				d.i += len(quotedKeys[f])
				seen |= 1 << f
			} else {
				keyAt := d.i
				key, err := d.str()
				if err != nil {
					return err
				}
				if f = fieldIndex(key); f < 0 {
					d.i = keyAt
					return d.errf("unknown field %q", key)
				}
				if seen&(1<<f) != 0 {
					d.i = keyAt
					return d.errf("duplicate field %q", key)
				}
				seen |= 1 << f
				d.ws()
				if d.i >= len(d.b) || d.b[d.i] != ':' {
					return d.errf("want ':'")
				}
				d.i++
			}
			next = f + 1
			d.ws()
			if err := r.value(&d, f, ev); err != nil {
				return fmt.Errorf("field %q: %w", fieldNames[f], err)
			}
			d.ws()
			if d.i < len(d.b) && d.b[d.i] == ',' {
				d.i++
				continue
			}
			if d.i < len(d.b) && d.b[d.i] == '}' {
				d.i++
				break
			}
			return d.errf("want ',' or '}'")
		}
	}
	d.ws()
	if d.i != len(d.b) {
		return d.errf("trailing data after the JSON object")
	}
	if seen&requiredFields != requiredFields {
		var missing []string
		for f := range fKind {
			if seen&(1<<f) == 0 {
				missing = append(missing, fieldNames[f])
			}
		}
		return fmt.Errorf("missing field(s) %v", missing)
	}
	if ev.Thread == "" {
		return errors.New("empty thread")
	}
	return nil
}

// value parses field f's value into ev.
func (r *Reader) value(d *decoder, f int, ev *core.TraceEvent) error {
	var err error
	var n int64
	switch f {
	case fTick:
		ev.Tick, err = d.uint()
		return err
	case fRead:
		ev.Read, err = d.bool()
		return err
	case fOutput:
		ev.Output, err = d.bool()
		return err
	case fMsg, fReq, fRun, fTaken:
		if n, err = d.nat(); err != nil {
			return err
		}
		switch f {
		case fMsg:
			ev.Msg = core.Seq(n)
		case fReq:
			ev.Req = core.RequestID(n)
		case fRun:
			ev.Run = core.RunID(n)
		default:
			ev.Taken = core.Seq(n)
		}
		return nil
	case fNow, fTTL, fExpires, fReplaced:
		if n, err = d.int(); err != nil {
			return err
		}
		switch f {
		case fNow:
			ev.Now = n
		case fTTL:
			ev.TTL = n
		case fExpires:
			ev.Expires = n
		default:
			ev.Replaced = n
		}
		return nil
	}
	b, err := d.str()
	if err != nil {
		return err
	}
	switch f {
	case fAction:
		a, ok := actionOf(b)
		switch {
		case string(b) == string(core.ActionLapse):
			return errors.New("action Lapse is never logged")
		case !ok:
			return fmt.Errorf("unknown action %q", b)
		}
		ev.Action = a
	case fKind:
		switch string(b) {
		case "":
		case core.PlanKindRun:
			ev.Kind = core.PlanKindRun
		case core.PlanKindReply:
			ev.Kind = core.PlanKindReply
		default:
			return fmt.Errorf("unknown plan kind %q", b)
		}
	case fThread:
		ev.Thread = core.ThreadID(r.shared.intern(b))
	case fProc:
		ev.Proc = r.shared.intern(b)
	case fHolder:
		ev.Holder = core.Holder(r.shared.intern(b))
	case fLease:
		ev.Lease = core.Holder(r.shared.intern(b))
	}
	return nil
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
// are, and O(n log n) otherwise. It does not change lines.
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

// Sort puts each thread's lines in trace order (as Order does), in place:
// each thread's lines take the positions its lines held, so a file that
// interleaves threads keeps its pattern, and a trace already in order is
// left as it is. It is the normalising step for lines written in the order
// concurrent processes called their Tracer (the order rule in the package
// doc); the checkers never sort.
func Sort(lines []core.TraceEvent) {
	threads := Order(lines)
	sorted := true
	for _, th := range threads {
		for k := 1; k < len(th.Lines) && sorted; k++ {
			sorted = th.Lines[k-1].N < th.Lines[k].N
		}
	}
	if sorted {
		return
	}
	out := make([]core.TraceEvent, len(lines))
	var at []int
	for _, th := range threads {
		at = at[:0]
		for _, l := range th.Lines {
			at = append(at, l.N-1)
		}
		slices.Sort(at)
		for k, l := range th.Lines {
			out[at[k]] = *l.Ev
		}
	}
	copy(lines, out)
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
