package tracecheck_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/threadclaim/threadclaim/core"
	"github.com/threadclaim/threadclaim/tracecheck"
)

// TestWriterConcurrent guards that lines traced from many goroutines come
// out whole, one per line, and read back as written.
func TestWriterConcurrent(t *testing.T) {
	var buf bytes.Buffer
	w := tracecheck.NewWriter(&buf)
	var rec tracecheck.Recorder
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				ev := core.TraceEvent{Tick: uint64(i), Action: core.ActionPost, Thread: core.ThreadID(fmt.Sprintf("t%d", g)),
					Proc: "poster", Msg: core.Seq(i + 1)}
				w.Trace(ev)
				rec.Trace(ev)
			}
		})
	}
	wg.Wait()
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	got, err := tracecheck.Read(&buf, "concurrent")
	if err != nil {
		t.Fatal(err)
	}
	want := rec.Lines()
	key := func(e core.TraceEvent) string { return fmt.Sprintf("%s/%d", e.Thread, e.Msg) }
	gk, wk := make([]string, len(got)), make([]string, len(want))
	for i := range got {
		gk[i] = key(got[i])
	}
	for i := range want {
		wk[i] = key(want[i])
	}
	slices.Sort(gk)
	slices.Sort(wk)
	if !slices.Equal(gk, wk) || len(got) != 1600 {
		t.Fatalf("read back %d lines, not the 1600 written", len(got))
	}
}

func TestWriterKeepsFirstError(t *testing.T) {
	w := tracecheck.NewWriter(failWriter{})
	w.Trace(core.TraceEvent{Action: core.ActionPost, Thread: "t"})
	w.Trace(core.TraceEvent{Action: core.ActionPost, Thread: "t"})
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("want the write error, got %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestRoundTrip guards that Read reads what Writer writes, field for field,
// for every fixture that is well formed.
func TestRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/ok-*.ndjson")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := tracecheck.Read(iotest.OneByteReader(bytes.NewReader(raw)), f)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		w := tracecheck.NewWriter(&out)
		for _, ev := range lines {
			w.Trace(ev)
		}
		if !bytes.Equal(out.Bytes(), raw) {
			t.Errorf("%s: written back differently:\n%s", f, out.String())
		}
	}
}

const goodLine = `{"tick":1,"read":false,"action":"Post","thread":"t1","proc":"poster","holder":"","msg":1,"req":0,"run":0,"taken":0,"lease":""}`

// lineOfLen returns goodLine with its proc lengthened to make it n bytes.
func lineOfLen(n int) string {
	return strings.Replace(goodLine, `"proc":"poster"`, `"proc":"`+strings.Repeat("x", n-len(goodLine)+len("poster"))+`"`, 1)
}

// TestReadRejects guards Read's strictness: each malformed input is a
// *LineError naming the file and the 1-based line.
func TestReadRejects(t *testing.T) {
	long := strings.Replace(goodLine, `"proc":"poster"`, `"proc":"`+strings.Repeat("x", tracecheck.MaxLineBytes)+`"`, 1)
	for _, tc := range []struct {
		name, input string
		line        int
		says        string
	}{
		{"bad json", goodLine + "\n{\"tick\":\n", 2, "want a non-negative integer"},
		{"unknown field", goodLine + "\n" + strings.Replace(goodLine, `"lease":""`, `"lease":"","extra":1`, 1), 2, "unknown field"},
		{"missing field", strings.Replace(goodLine, `"taken":0,`, ``, 1), 1, "missing field(s) [taken]"},
		{"missing fields", `{"tick":1}`, 1, "missing field(s) [read action thread proc holder msg req run taken lease]"},
		{"unknown action", strings.Replace(goodLine, `"Post"`, `"Steal"`, 1), 1, `unknown action "Steal"`},
		{"lapse logged", strings.Replace(goodLine, `"Post"`, `"Lapse"`, 1), 1, "Lapse is never logged"},
		{"bad kind", strings.Replace(goodLine, `"lease":""`, `"lease":"","kind":"both"`, 1), 1, `unknown plan kind "both"`},
		{"trailing garbage", goodLine + ` x`, 1, "trailing data"},
		{"two objects", goodLine + goodLine, 1, "trailing data"},
		{"empty line", goodLine + "\n\n" + goodLine, 2, "empty line"},
		{"array", `[1,2]`, 1, "not a JSON object"},
		{"null", `null`, 1, "not a JSON object"},
		{"negative tick", strings.Replace(goodLine, `"tick":1`, `"tick":-1`, 1), 1, "want a non-negative integer"},
		{"negative msg", strings.Replace(goodLine, `"msg":1`, `"msg":-1`, 1), 1, "negative integer"},
		{"string tick", strings.Replace(goodLine, `"tick":1`, `"tick":"1"`, 1), 1, "want a non-negative integer"},
		{"float tick", strings.Replace(goodLine, `"tick":1`, `"tick":1.0`, 1), 1, "want an integer"},
		{"leading zero", strings.Replace(goodLine, `"tick":1`, `"tick":01`, 1), 1, "leading zero"},
		{"huge tick", strings.Replace(goodLine, `"tick":1`, `"tick":18446744073709551616`, 1), 1, "out of range"},
		{"huge msg", strings.Replace(goodLine, `"msg":1`, `"msg":9223372036854775808`, 1), 1, "out of range"},
		{"key case", strings.Replace(goodLine, `"tick"`, `"Tick"`, 1), 1, `unknown field "Tick"`},
		{"duplicate key", strings.Replace(goodLine, `"msg":1`, `"msg":1,"msg":2`, 1), 1, `duplicate field "msg"`},
		// The reader's fast path tries the key the canonical order puts
		// next: a key read out of order earlier and repeated there is
		// still a duplicate.
		{"duplicate key in order", strings.Replace(goodLine, `"tick":1,"read":false`, `"read":false,"tick":1,"read":true`, 1), 1, `duplicate field "read"`},
		{"duplicate key in order, later", strings.Replace(goodLine, `"msg":1,"req":0`, `"req":0,"msg":1,"req":0`, 1), 1, `duplicate field "req"`},
		{"duplicate first key", strings.Replace(goodLine, `"tick":1,`, `"tick":1,"tick":1,`, 1), 1, `duplicate field "tick"`},
		{"null value", strings.Replace(goodLine, `"proc":"poster"`, `"proc":null`, 1), 1, "want a string"},
		{"bad utf8", strings.Replace(goodLine, `"proc":"poster"`, "\"proc\":\"p\xff\"", 1), 1, "invalid UTF-8"},
		{"control char", strings.Replace(goodLine, `"proc":"poster"`, "\"proc\":\"p\x01\"", 1), 1, "control character"},
		{"bad escape", strings.Replace(goodLine, `"proc":"poster"`, `"proc":"p\q"`, 1), 1, "bad string"},
		// encoding/json reads both as U+FFFD: two threads would be one.
		{"lone high surrogate", strings.Replace(goodLine, `"thread":"t1"`, `"thread":"t\ud800"`, 1), 1, "half a surrogate pair"},
		{"lone low surrogate", strings.Replace(goodLine, `"thread":"t1"`, `"thread":"t\udfff"`, 1), 1, "half a surrogate pair"},
		{"escaped NUL", strings.Replace(goodLine, `"proc":"poster"`, `"proc":"p\u0000"`, 1), 1, "NUL"},
		{"missing colon", strings.Replace(goodLine, `"msg":1`, `"msg" 1`, 1), 1, "want ':'"},
		{"missing comma", strings.Replace(goodLine, `"msg":1,`, `"msg":1 `, 1), 1, "want ',' or '}'"},
		{"empty object", `{}`, 1, "missing field(s)"},
		{"empty thread", strings.Replace(goodLine, `"thread":"t1"`, `"thread":""`, 1), 1, "empty thread"},
		{"too long", goodLine + "\n" + goodLine + "\n" + long, 3, "longer than"},
		{"too long, then a line", goodLine + "\n" + long + "\n" + goodLine, 2, "longer than"},
		{"one byte too long", goodLine + "\n" + lineOfLen(tracecheck.MaxLineBytes+1) + "\n" + goodLine, 2, "longer than"},
		{"one byte too long with its CR", lineOfLen(tracecheck.MaxLineBytes) + "\r\n" + goodLine, 1, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, err := tracecheck.Read(strings.NewReader(tc.input), "in.ndjson")
			var le *tracecheck.LineError
			if !errors.As(err, &le) || le.Line != tc.line || le.File != "in.ndjson" || !errors.Is(err, tracecheck.ErrMalformed) {
				t.Fatalf("want a malformed-line error at in.ndjson:%d, got %v", tc.line, err)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("in.ndjson:%d: ", tc.line)) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if len(lines) != tc.line-1 {
				t.Errorf("want the %d lines before it, got %d", tc.line-1, len(lines))
			}
		})
	}
}

func TestReadAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		n           int
	}{
		{"no final newline", goodLine, 1},
		{"final newline", goodLine + "\n", 1},
		{"crlf", goodLine + "\r\n" + goodLine + "\r\n", 2},
		{"longest line", lineOfLen(tracecheck.MaxLineBytes) + "\n" + goodLine, 2},
		{"longest line with its CR", lineOfLen(tracecheck.MaxLineBytes-1) + "\r\n" + goodLine, 2},
		{"spaces", " " + strings.ReplaceAll(goodLine, ",", " , ") + " ", 1},
		{"escapes", strings.Replace(goodLine, `"proc":"poster"`, `"proc":"p\u0031\n"`, 1), 1},
		{"any key order", `{"lease":"","taken":0,"run":0,"req":0,"msg":1,"holder":"","proc":"x","thread":"t","action":"Post","read":false,"tick":1}`, 1},
	} {
		lines, err := tracecheck.Read(strings.NewReader(tc.input), "in")
		if err != nil || len(lines) != tc.n {
			t.Errorf("%s: want %d lines, got %d, %v", tc.name, tc.n, len(lines), err)
		}
	}
}

func TestReadIOError(t *testing.T) {
	_, err := tracecheck.Read(iotest.TimeoutReader(strings.NewReader(goodLine+"\n"+goodLine)), "in")
	var le *tracecheck.LineError
	if !errors.As(err, &le) || errors.Is(err, tracecheck.ErrMalformed) {
		t.Fatalf("want the reader's error in a LineError, got %v", err)
	}
}

// TestOrder guards the ordering rule on a small example: tick, writes
// before reads, otherwise as written; threads by first appearance.
func TestOrder(t *testing.T) {
	ev := func(th string, tick uint64, read bool, proc string) core.TraceEvent {
		return core.TraceEvent{Thread: core.ThreadID(th), Tick: tick, Read: read, Proc: proc}
	}
	lines := []core.TraceEvent{
		ev("b", 1, false, "x"), // 1
		ev("a", 2, true, "p"),  // 2
		ev("a", 2, true, "q"),  // 3
		ev("a", 2, false, "r"), // 4
		ev("a", 1, false, "s"), // 5
		ev("b", 0, true, "y"),  // 6
		ev("a", 2, true, "o"),  // 7
	}
	got := tracecheck.Order(lines)
	var s []string
	for _, th := range got {
		var ns []string
		for _, l := range th.Lines {
			ns = append(ns, fmt.Sprint(l.N))
		}
		s = append(s, string(th.Thread)+":"+strings.Join(ns, ","))
	}
	if want := "b:6,1 a:5,4,2,3,7"; strings.Join(s, " ") != want {
		t.Fatalf("got %s, want %s", strings.Join(s, " "), want)
	}
	// Sparse ticks take the comparison sort; the same order comes out.
	for i := range lines {
		lines[i].Tick *= 1 << 40
	}
	got = tracecheck.Order(lines)
	if got[1].Lines[0].N != 5 || got[1].Lines[4].N != 7 {
		t.Fatalf("sparse ticks: %+v", got[1].Lines)
	}
}

// FuzzRead guards that no input makes Read panic, and that what it
// accepts it writes back to something it reads the same.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.ndjson")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(goodLine + "\n"))
	f.Add([]byte(`{"tick":1e400}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := tracecheck.Read(bytes.NewReader(data), "fuzz")
		if err != nil {
			var le *tracecheck.LineError
			if !errors.As(err, &le) || le.Line < 1 || le.Line != len(lines)+1 {
				t.Fatalf("error without its line: %v (%d lines)", err, len(lines))
			}
			return
		}
		// What Read accepts, encoding/json reads the same.
		for i, raw := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))[:len(lines)] {
			var ev core.TraceEvent
			if err := json.Unmarshal(raw, &ev); err != nil || ev != lines[i] {
				t.Fatalf("line %d: Read gives %+v, encoding/json %+v (%v)", i+1, lines[i], ev, err)
			}
		}
		var buf bytes.Buffer
		w := tracecheck.NewWriter(&buf)
		for _, ev := range lines {
			w.Trace(ev)
		}
		again, err := tracecheck.Read(&buf, "again")
		if err != nil || !slices.Equal(again, lines) {
			t.Fatalf("written back and read again: %v", err)
		}
	})
}

// FuzzCheck drives the checker with mutants of accepted traces (Mutate:
// one to four changes of values, actions, holders, ticks, lines dropped,
// duplicated or swapped), so that what it checks parses and reaches the
// guards, the value checks and the invariants. It guards that the checker
// never panics; that a violation names a line of the mutant, a rule and a
// state; that checking the lines in memory and streaming them from ndjson
// give the same verdict at the same line; and that an accepted trace is
// already in trace order (Sort leaves it as it is).
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob("testdata/ok-*.ndjson")
	var bases [][]core.TraceEvent
	for _, p := range files {
		lines, err := tracecheck.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		bases = append(bases, lines)
	}
	if len(bases) == 0 {
		f.Fatal("no ok-* fixtures")
	}
	for i := range 8 {
		f.Add(uint64(i), uint8(i), uint8(i%4), i%3 == 0)
	}
	f.Fuzz(func(t *testing.T, seed uint64, which, n uint8, unfenced bool) {
		rng := rand.New(rand.NewPCG(seed, uint64(which)))
		lines := bases[int(which)%len(bases)]
		var what []string
		for range 1 + int(n)%4 {
			var m tracecheck.Mutation
			lines, m = tracecheck.Mutate(rng, lines)
			what = append(what, m.Desc)
		}
		if len(lines) == 0 {
			return
		}
		fences := core.AllFences()
		if unfenced {
			fences = core.Fences{}
		}
		spec := tracecheck.WithFences(fences)
		st, err := tracecheck.Check(lines, spec)
		if st.Lines > len(lines) {
			t.Fatalf("%v: checked %d lines of %d", what, st.Lines, len(lines))
		}
		var v *tracecheck.Violation
		if err != nil && (!errors.As(err, &v) || v.Line < 1 || v.Line > len(lines) || v.Rule == "" || v.State == "") {
			t.Fatalf("%v: violation without its line or rule: %v", what, err)
		}
		var buf bytes.Buffer
		w := tracecheck.NewWriter(&buf)
		for _, ev := range lines {
			w.Trace(ev)
		}
		_, err2 := tracecheck.CheckReader(&buf, "trace", spec)
		var v2 *tracecheck.Violation
		switch {
		case (err == nil) != (err2 == nil):
			t.Fatalf("%v: in memory %v, streamed %v", what, err, err2)
		case err != nil && (!errors.As(err2, &v2) || v2.Line != v.Line || v2.Rule != v.Rule):
			t.Fatalf("%v: in memory %v, streamed %v", what, err, err2)
		case err == nil:
			sorted := slices.Clone(lines)
			tracecheck.Sort(sorted)
			if !slices.Equal(sorted, lines) {
				t.Fatalf("%v: accepted, yet not in trace order", what)
			}
		}
	})
}

// BenchmarkRead measures the Reader alone on the trace BenchmarkReadCheck
// checks, so that parsing and checking can be told apart: lines/s.
func BenchmarkRead(b *testing.B) {
	benchRead(b, func(r io.Reader) io.Reader { return r })
}

// piecesReader returns at most n bytes a Read, as a pipe or a socket may.
type piecesReader struct {
	r io.Reader
	n int
}

func (p piecesReader) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), p.n)]) }

// BenchmarkReadInPieces measures the Reader on BenchmarkRead's trace
// arriving 16 bytes a Read: each line is parsed once, when its newline
// has come, not again from its start at each piece (lines/cpu-s).
func BenchmarkReadInPieces(b *testing.B) {
	benchRead(b, func(r io.Reader) io.Reader { return piecesReader{r, 16} })
}

// benchRead reads BenchmarkReadCheck's trace, through wrap, to its end
// each iteration, and reports lines/s and lines/cpu-s.
func benchRead(b *testing.B, wrap func(io.Reader) io.Reader) {
	data, n := benchTrace(b, 200_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		rd := tracecheck.NewReader(wrap(bytes.NewReader(data)), "bench.ndjson")
		for {
			if _, err := rd.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	b.ReportMetric(float64(n)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "lines/cpu-s")
}
