package tracecheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/threadclaim/threadclaim/core"
)

// The trace format's corners, the Writer's and the Reader's (its fast path
// too): tests from the tenth mutation pass (7 Dec 2026), each of which
// fails with the mutant its comment names, where no test failed before.

// everyFieldLine is a line in core's own form with every required field set and
// no two numbers alike, so that a value read into the wrong field shows.
const everyFieldLine = `{"tick":3,"read":false,"action":"Reply","thread":"t1","proc":"p1","holder":"h1","msg":4,"req":5,"run":6,"taken":7,"lease":"h1"}`

// readOrFail reads input and fails the test on an error.
func readOrFail(t *testing.T, input string) []core.TraceEvent {
	t.Helper()
	lines, err := Read(strings.NewReader(input), "in")
	if err != nil {
		t.Fatalf("%q: %v", input, err)
	}
	return lines
}

// refusedAt checks that input is refused as malformed at line n.
func refusedAt(t *testing.T, input string, n int) {
	t.Helper()
	_, err := Read(strings.NewReader(input), "in")
	var le *LineError
	if !errors.As(err, &le) || le.Line != n || !errors.Is(err, ErrMalformed) {
		t.Fatalf("%q: want a malformed line at in:%d, got %v", input, n, err)
	}
}

// onceFailWriter fails its first Write and takes every later one.
type onceFailWriter struct {
	calls int
	got   bytes.Buffer
}

func (w *onceFailWriter) Write(b []byte) (int, error) {
	w.calls++
	if w.calls == 1 {
		return 0, errors.New("disk full")
	}
	return w.got.Write(b)
}

// Once a Writer's write fails, it writes no later line (a trace with a
// hole in it would be read as a trace without one) and Err keeps the
// first error. (the tenth mutation pass: Trace going on writing after an
// error failed no test)
func TestWriterStopsAtFirstError(t *testing.T) {
	var out onceFailWriter
	w := NewWriter(&out)
	w.Trace(core.TraceEvent{Action: core.ActionPost, Thread: "t", Tick: 1})
	w.Trace(core.TraceEvent{Action: core.ActionPost, Thread: "t", Tick: 2})
	if out.calls != 1 || out.got.Len() != 0 {
		t.Fatalf("a line was written after the first error: %d calls, %q", out.calls, out.got.String())
	}
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("want the first write error, got %v", err)
	}
}

// Recorder.WriteTo returns the number of bytes it wrote, as io.WriterTo
// says. (the tenth mutation pass: WriteTo not counting its bytes failed no
// test)
func TestRecorderWriteToCountsBytes(t *testing.T) {
	var r Recorder
	for tick := uint64(1); tick <= 3; tick++ {
		r.Trace(core.TraceEvent{Action: core.ActionPost, Thread: "t", Tick: tick, Msg: core.Seq(tick)})
	}
	var buf bytes.Buffer
	n, err := r.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("WriteTo says %d bytes, %v; it wrote %d", n, err, buf.Len())
	}
}

// everyFieldLineOfLen returns everyFieldLine with its proc lengthened to make it n bytes.
func everyFieldLineOfLen(n int) string {
	return strings.Replace(everyFieldLine, `"proc":"p1"`, `"proc":"`+strings.Repeat("x", n-len(everyFieldLine)+2)+`"`, 1)
}

// A line of exactly MaxLineBytes, arriving a byte at a time, is read once,
// and the line after it next: the Reader waits for its newline rather than
// taking the bytes it has as the whole line. (the tenth mutation pass:
// r.w-r.r >= MaxLineBytes in Next failed no test)
func TestReaderLongestLineInPieces(t *testing.T) {
	long := everyFieldLineOfLen(MaxLineBytes)
	if len(long) != MaxLineBytes {
		t.Fatalf("the line is %d bytes", len(long))
	}
	next := strings.Replace(everyFieldLine, `"tick":3`, `"tick":8`, 1)
	rd := NewReader(iotest.OneByteReader(strings.NewReader(long+"\n"+next+"\n")), "in")
	var ticks []uint64
	for range 4 {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("line %d: %v", rd.Line(), err)
		}
		ticks = append(ticks, ev.Tick)
	}
	if len(ticks) != 2 || ticks[0] != 3 || ticks[1] != 8 {
		t.Fatalf("read ticks %v, want [3 8]", ticks)
	}
}

// A last line of one byte without a newline is a line, and malformed: it
// is not dropped as if the trace ended before it. (the tenth mutation
// pass: r.r+1 < r.w for the last line failed no test)
func TestReaderLastLineOfOneByte(t *testing.T) {
	refusedAt(t, everyFieldLine+"\nx", 2)
	refusedAt(t, everyFieldLine+"\n}", 2)
}

// An escaped quote inside a string is part of the string, not its end.
// (the tenth mutation pass: the decoder stepping one byte, not two, over
// a backslash failed no test)
func TestReadEscapedQuote(t *testing.T) {
	lines := readOrFail(t, strings.Replace(everyFieldLine, `"proc":"p1"`, `"proc":"a\"b"`, 1))
	if len(lines) != 1 || lines[0].Proc != `a"b` {
		t.Fatalf("read %+v", lines)
	}
}

// Every control character, 0x1f the last of them, is refused raw in a
// string. (the tenth mutation pass: c < 0x1f for a control character
// failed no test)
func TestReadRefusesEveryControlCharacter(t *testing.T) {
	for c := 0; c < 0x20; c++ {
		refusedAt(t, strings.Replace(everyFieldLine, `"proc":"p1"`, `"proc":"p`+string(rune(c))+`"`, 1), 1)
	}
}

// A boolean is true or false, whole: a word that only starts with t is
// refused. (the tenth mutation pass: true matched by its first byte
// failed no test)
func TestReadBooleanWhole(t *testing.T) {
	for _, v := range []string{"trux", "tool", "fals0"} {
		refusedAt(t, strings.Replace(everyFieldLine, `"read":false`, `"read":`+v, 1), 1)
		refusedAt(t, strings.Replace(everyFieldLine, `"lease":"h1"`, `"lease":"h1","output":`+v, 1), 1)
	}
	if lines := readOrFail(t, strings.Replace(everyFieldLine, `"read":false`, `"read": true`, 1)); !lines[0].Read {
		t.Fatal("read true read as false")
	}
}

// A key after output, the last field in core's order, is read like any
// other key out of order. (the tenth mutation pass: the decoder trying
// the next key in order past the last field, without next < numFields,
// failed no test)
func TestReadKeyAfterOutput(t *testing.T) {
	lines := readOrFail(t, strings.Replace(everyFieldLine, `,"lease":"h1"}`, `,"output":true,"lease":"h1"}`, 1))
	if len(lines) != 1 || !lines[0].Output || lines[0].Lease != "h1" {
		t.Fatalf("read %+v", lines)
	}
}

// Each required key missing alone makes the line malformed, with or
// without spaces. (the tenth mutation pass: lease left out of
// requiredFields failed no test)
func TestReadEachRequiredKeyMissing(t *testing.T) {
	for f := range fKind {
		var kept []string
		for _, part := range strings.Split(strings.Trim(everyFieldLine, "{}"), ",") {
			if !strings.HasPrefix(part, `"`+fieldNames[f]+`":`) {
				kept = append(kept, part)
			}
		}
		refusedAt(t, "{"+strings.Join(kept, ",")+"}", 1)
		refusedAt(t, "{ "+strings.Join(kept, " , ")+" }", 1)
	}
}

// The general decoder gives each field its own value: a line in core's
// form with spaces, its keys reversed, or both, reads as the fast path
// reads it. (the tenth mutation pass: req decoded into msg failed no
// test)
func TestReadSlowPathFieldForField(t *testing.T) {
	full := strings.Replace(everyFieldLine, `"lease":"h1"}`, `"lease":"l1","kind":"reply","now":-11,"ttl":12,"expires":13,"replaced":14,"output":true}`, 1)
	want := readOrFail(t, full)[0]
	if want.Kind != core.PlanKindReply || want.Now != -11 || want.Replaced != 14 || !want.Output || want.Lease != "l1" || want.Req != 5 {
		t.Fatalf("the fast path reads %+v", want)
	}
	parts := strings.Split(strings.Trim(full, "{}"), ",")
	rev := make([]string, len(parts))
	for k, p := range parts {
		rev[len(parts)-1-k] = p
	}
	for _, in := range []string{
		"{ " + strings.Join(parts, " , ") + " }",
		"{" + strings.Join(rev, ",") + "}",
		"{ " + strings.Join(rev, " , ") + " }",
	} {
		if got := readOrFail(t, in); len(got) != 1 || got[0] != want {
			t.Fatalf("%s: read %+v, want %+v", in, got, want)
		}
	}
}

// Two 17-byte threads alike but for their ninth byte (which neither the
// first nor the last eight bytes hold) stay two threads. (the tenth
// mutation pass: the interner trusting its two words up to 17 bytes
// failed no test)
func TestReadSeventeenByteStrings(t *testing.T) {
	a, b := "aaaaaaaaXaaaaaaaa", "aaaaaaaaYaaaaaaaa"
	lines := readOrFail(t, strings.Replace(everyFieldLine, `"thread":"t1"`, `"thread":"`+a+`"`, 1)+"\n"+
		strings.Replace(everyFieldLine, `"thread":"t1"`, `"thread":"`+b+`"`, 1)+"\n")
	if string(lines[0].Thread) != a || string(lines[1].Thread) != b {
		t.Fatalf("read threads %q and %q", lines[0].Thread, lines[1].Thread)
	}
}

// A lease of the holder's length and last byte but another string is
// read as itself. (the tenth mutation pass: the fast path taking the
// lease for the holder by length and last byte failed no test; only
// FuzzCanonical's fuzzing found it)
func TestReadLeaseLikeHolder(t *testing.T) {
	lines := readOrFail(t, strings.Replace(everyFieldLine, `"lease":"h1"`, `"lease":"g1"`, 1))
	if lines[0].Holder != "h1" || lines[0].Lease != "g1" {
		t.Fatalf("holder %q, lease %q", lines[0].Holder, lines[0].Lease)
	}
}

// After the closing brace only a CR may come before the newline: one
// other byte is trailing data, on the fast path too. (the tenth mutation
// pass: decodeCanonical taking any one byte for the CR failed no test;
// only FuzzCanonical's fuzzing found it)
func TestReadOneTrailingByte(t *testing.T) {
	for _, c := range []string{"x", "}", "0", ","} {
		refusedAt(t, everyFieldLine+c+"\n"+everyFieldLine, 1)
		refusedAt(t, everyFieldLine+"\n"+everyFieldLine+c, 2)
	}
	if lines := readOrFail(t, everyFieldLine+"\r"); len(lines) != 1 {
		t.Fatalf("read %d lines", len(lines))
	}
}

// output is true in full on the fast path too: "output":trux is refused.
// (the tenth mutation pass: the fast path matching ,"output":t and
// skipping 14 bytes failed no test)
func TestReadOutputTrueWhole(t *testing.T) {
	for _, v := range []string{"trux", "tXXX", "t   "} {
		refusedAt(t, strings.Replace(everyFieldLine, `"lease":"h1"}`, `"lease":"h1","output":`+v+`}`, 1), 1)
	}
}

// piecewise returns at most n bytes a Read, as a pipe may.
type piecewise struct {
	r io.Reader
	n int
}

func (p piecewise) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), p.n)]) }

// A trace read in pieces of any size gives the lines and the error it
// gives read whole: the Reader's search for a newline, which goes on from
// where a piece ended, loses no byte and skips no line (CRLF split
// between pieces, a last line with no newline, a line too long, a
// malformed one, lines in core's form and not).
func TestReadInPiecesSameAsWhole(t *testing.T) {
	long := everyFieldLineOfLen(MaxLineBytes)
	inputs := map[string]string{
		"core's form":       everyFieldLine + "\n" + strings.Replace(everyFieldLine, `"tick":3`, `"tick":4`, 1) + "\n",
		"crlf":              everyFieldLine + "\r\n" + everyFieldLine + "\r\n",
		"no last newline":   everyFieldLine + "\n" + everyFieldLine,
		"keys reordered":    `{"action":"Reply","tick":3,"read":false,"thread":"t1","proc":"p1","holder":"h1","msg":4,"req":5,"run":6,"taken":7,"lease":"h1"}` + "\n" + everyFieldLine + "\n",
		"malformed second":  everyFieldLine + "\n{\"tick\":x}\n" + everyFieldLine + "\n",
		"longest line":      long + "\n" + everyFieldLine + "\n",
		"a line too long":   everyFieldLine + "\n" + long + " \n",
		"blank line":        everyFieldLine + "\n\n" + everyFieldLine + "\n",
		"one byte at last":  everyFieldLine + "\nx",
		"a lone newline":    "\n",
		"nothing":           "",
		"spaces in a value": strings.Replace(everyFieldLine, `"tick":3,`, `"tick": 3 ,`, 1) + "\n",
	}
	for _, f := range []string{"ok-run-output.ndjson", "ok-steer-exception.ndjson", "bad-malformed.ndjson"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		inputs[f] = string(b)
	}
	for name, in := range inputs {
		want, wantErr := Read(strings.NewReader(in), "in")
		for _, n := range []int{1, 2, 3, 7, 16, 61, 4096} {
			got, err := Read(piecewise{strings.NewReader(in), n}, "in")
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !slices.Equal(got, want) {
				t.Errorf("%s in pieces of %d: %d lines, error %v; read whole: %d lines, error %v", name, n, len(got), err, len(want), wantErr)
			}
		}
	}
}
