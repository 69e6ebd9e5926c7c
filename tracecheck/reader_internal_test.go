package tracecheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/threadclaim/threadclaim/core"
)

// FuzzCanonical guards the reader's parsing of a line against encoding/json
// on arbitrary input. jsonReference reads a line with encoding/json and
// the format's rules; the Reader (its fast path, else its decoder) must
// accept exactly the lines it accepts, with the same fields, and the
// fast path must take nothing it refuses, whether it parses a line on
// its own or where it starts in the Reader's buffer.
func FuzzCanonical(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.ndjson")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			f.Add(l)
		}
	}
	const claim = `{"tick":1,"read":false,"action":"Claim","thread":"t","proc":"p","holder":"h","msg":0,"req":0,"run":0,"taken":0,"lease":"h","now":-5,"ttl":10,"expires":5,"replaced":3}`
	f.Add([]byte(claim + "\r"))
	f.Add([]byte(claim + "\r "))
	for _, edit := range [][2]string{
		{`"now":-5`, `"now":-0`}, {`"msg":0`, `"msg":-0`}, {`"msg":0`, `"msg":null`}, {`"tick":1`, `"tick":1e0`},
		{`"tick"`, `"Tick"`}, {`"msg":0`, `"msg":0,"msg":0`}, {`"thread":"t"`, `"thread":""`}, {`"thread":"t"`, `"thread":"t\u00e9"`},
		{`"proc":"p"`, `"proc":"p\u0000"`}, {`"action":"Claim"`, `"action":"Lapse"`}, {`"lease":"h"`, `"lease":"h","kind":""`},
		{`"lease":"h"`, `"lease":"h","kind":"plan"`}, {`"tick":1`, `"tick":18446744073709551615`}, {`"ttl":10`, `"ttl":-9223372036854775808`},
		{`,"replaced":3`, ``}, {`"read":false`, `"read":0`}, {`{`, ` { `}, {`"holder":"h"`, "\"holder\":\"h\xff\""},
		{`"thread":"t"`, `"thread":"t\ud800"`}, {`"thread":"t"`, `"thread":"\udc00t"`}, {`"thread":"t"`, `"thread":"\ud83d\ude00"`},
		{`"thread":"t"`, `"thread":"\ud83d\n\ude00"`}, {`"thread":"t"`, `"thread":"\\ud800"`}, {`"thread":"t"`, `"thread":"\ud800\ud800"`},
		{`"thread":"t"`, `"thread":"\uFFFD"`}, {`"thread":"t"`, `"thread":"\ud83d\u0041"`}, {`"thread":"t"`, `"thread":"\ud83d\u0041\ude00"`}, {`"thread":"t"`, "\"thread\":\"\uFFFD\""},
	} {
		f.Add([]byte(strings.Replace(claim, edit[0], edit[1], 1)))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		want, refErr := jsonReference(line)
		got, err := parseLine(line)
		switch {
		case (err == nil) != (refErr == nil):
			t.Fatalf("%q: the Reader says %v, encoding/json %v", line, err, refErr)
		case err == nil && got != want:
			t.Fatalf("%q: the Reader reads %+v, encoding/json %+v", line, got, want)
		}
		var fast Reader
		if fast.decodeCanonical(line) && (refErr != nil || fast.ev != want) {
			t.Fatalf("%q: the fast path reads %+v, encoding/json %+v, %v", line, fast.ev, want, refErr)
		}
		// The same line after a line with every field set, and before
		// another, as Next sees it in its buffer: nothing of the line
		// before may show through.
		if bytes.IndexByte(line, '\n') >= 0 || len(line) > MaxLineBytes {
			return
		}
		const full = `{"tick":9,"read":true,"action":"Plan","thread":"u","proc":"q","holder":"g","msg":1,"req":2,"run":3,"taken":4,"lease":"k","kind":"run","now":5,"ttl":6,"expires":7,"replaced":8}` + "\n"
		data := append(append([]byte(full), line...), "\n{\"tick\""...)
		rd := NewReader(bytes.NewReader(data), "fuzz")
		if _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
		ev, err := rd.Next()
		switch {
		case (err == nil) != (refErr == nil):
			t.Fatalf("%q: Next says %v, encoding/json %v", line, err, refErr)
		case err == nil && *ev != want:
			t.Fatalf("%q: Next reads %+v, encoding/json %+v", line, *ev, want)
		case err == nil && rd.r != len(full)+len(line)+1:
			t.Fatalf("%q: Next took %d bytes for a line of %d", line, rd.r-len(full), len(line)+1)
		}
	})
}

// jsonReference reads a trace line with encoding/json, and then applies
// the rules of the format that encoding/json does not: exactly the
// format's keys, spelled as they are, each once; no null; integers
// without a fraction or exponent, msg, req, run and taken not negative,
// and no -0; valid UTF-8; a thread; a known action that is not Lapse;
// kind empty, run or reply; nothing after the object.
func jsonReference(line []byte) (core.TraceEvent, error) {
	if !utf8.Valid(line) {
		return core.TraceEvent{}, errors.New("invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return core.TraceEvent{}, fmt.Errorf("not an object: %v %v", tok, err)
	}
	var seen uint32
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return core.TraceEvent{}, err
		}
		key, _ := tok.(string)
		f := slices.Index(fieldNames[:], key)
		if f < 0 || seen&(1<<f) != 0 {
			return core.TraceEvent{}, fmt.Errorf("unknown or repeated key %q", key)
		}
		seen |= 1 << f
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return core.TraceEvent{}, err
		}
		var err2 error
		switch f {
		case fTick:
			var u uint64
			err2 = json.Unmarshal(raw, &u)
		case fRead, fOutput:
			var b bool
			err2 = json.Unmarshal(raw, &b)
		case fMsg, fReq, fRun, fTaken, fNow, fTTL, fExpires, fReplaced:
			var n int64
			err2 = json.Unmarshal(raw, &n)
			if raw[0] == '-' && (f < fNow || string(raw) == "-0") {
				err2 = fmt.Errorf("%s: %s", key, raw)
			}
		default:
			var s string
			err2 = json.Unmarshal(raw, &s)
			if err2 == nil && (strings.ContainsRune(s, 0) || unpairedSurrogate(raw)) {
				err2 = fmt.Errorf("%s: NUL or a lone surrogate: %s", key, raw)
			}
		}
		if string(raw) == "null" {
			err2 = errors.New("null")
		}
		if err2 != nil {
			return core.TraceEvent{}, err2
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return core.TraceEvent{}, fmt.Errorf("object not closed: %v %v", tok, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return core.TraceEvent{}, fmt.Errorf("after the object: %v", err)
	}
	if seen&requiredFields != requiredFields {
		return core.TraceEvent{}, errors.New("missing a field")
	}
	var ev core.TraceEvent
	if err := json.Unmarshal(line, &ev); err != nil {
		return core.TraceEvent{}, err
	}
	_, known := actionOf([]byte(ev.Action))
	switch {
	case ev.Thread == "":
		return core.TraceEvent{}, errors.New("empty thread")
	case !known:
		return core.TraceEvent{}, fmt.Errorf("action %q", ev.Action)
	case ev.Kind != "" && ev.Kind != core.PlanKindRun && ev.Kind != core.PlanKindReply:
		return core.TraceEvent{}, fmt.Errorf("kind %q", ev.Kind)
	}
	return ev, nil
}

// unpairedSurrogate reads the \u escapes of raw, a JSON string, as
// UTF-16 code units, each run of them on its own, and says whether
// unicode/utf16 finds a surrogate outside a pair in one: its decoding
// then holds more U+FFFD than the units did.
func unpairedSurrogate(raw []byte) bool {
	var units []uint16
	lone := func() bool {
		n := 0
		for _, r := range utf16.Decode(units) {
			if r == utf8.RuneError {
				n++
			}
		}
		m := 0
		for _, u := range units {
			if u == utf8.RuneError {
				m++
			}
		}
		units = units[:0]
		return n > m
	}
	for i := 1; i < len(raw)-1; i++ {
		if raw[i] == '\\' && raw[i+1] == 'u' {
			u, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
			if err != nil {
				panic(err)
			}
			units = append(units, uint16(u))
			i += 5
			continue
		}
		if lone() {
			return true
		}
		if raw[i] == '\\' {
			i++
		}
	}
	return lone()
}

// Every fixture line is in core's own form, so the fast path reads it.
func TestCanonicalTakesCoreLines(t *testing.T) {
	files, _ := filepath.Glob("testdata/ok-*.ndjson")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			r := Reader{}
			if !r.decodeCanonical(l) {
				t.Errorf("%s:%d: not taken by the fast path", p, i+1)
			}
		}
	}
}

// The checker's action indexes are the places in core.Actions(): the
// per-action counts and the action table's rules are kept by them.
func TestActionIndexIsCoreOrder(t *testing.T) {
	for i, a := range core.Actions() {
		if got := actionIndex(a); got != i {
			t.Errorf("%s: index %d, core.Actions() has it at %d", a, got, i)
		}
	}
	if n := len(core.Actions()); n != numActions {
		t.Errorf("core has %d actions, the checker %d", n, numActions)
	}
	// Names that share an action's slot (first and last byte, length)
	// are no action.
	for _, name := range []string{"Lapsed", "", "Pxst", "Clam", "RunEnds", "Ask "} {
		if actionIndex(core.Action(name)) != -1 {
			t.Errorf("%q has an index", name)
		}
		if _, ok := actionOf([]byte(name)); ok {
			t.Errorf("%q read as an action", name)
		}
	}
	for _, a := range core.Actions() {
		if got, ok := actionOf([]byte(a)); ok != (a != core.ActionLapse) || (ok && got != a) {
			t.Errorf("%s read as %q, %v", a, got, ok)
		}
	}
}

// holderSet answers for every holder added and no other, through
// growth, and when hashes collide (here all of them: the names decide).
func TestHolderSet(t *testing.T) {
	for _, collide := range []bool{false, true} {
		s := holderSet{seed: maphash.MakeSeed()}
		names := []core.Holder{""}
		hash := func(h core.Holder) uint64 {
			if collide {
				return 7
			}
			return s.hash(h)
		}
		for i := 1; i <= 300; i++ {
			h := core.Holder(fmt.Sprintf("p%d-%x", i%4, i*7919))
			if s.has(hash(h), h, names) {
				t.Fatalf("collide %v: %s found before it was added", collide, h)
			}
			names = append(names, h)
			s.add(hash(h), i)
			if !s.has(hash(h), h, names) {
				t.Fatalf("collide %v: %s not found once added", collide, h)
			}
		}
		for i, h := range names[1:] {
			if !s.has(hash(h), h, names) {
				t.Errorf("collide %v: holder %d %s lost", collide, i+1, h)
			}
		}
		if s.n != 300 || 2*s.n > len(s.slots) {
			t.Errorf("collide %v: %d holders in %d slots", collide, s.n, len(s.slots))
		}
	}
}
