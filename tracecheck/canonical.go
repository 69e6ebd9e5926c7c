package tracecheck

import (
	"encoding/binary"
	"math"
	mathbits "math/bits"

	"github.com/threadclaim/threadclaim/core"
)

// The Reader's fast path. core writes every line in one form: the keys in
// core.TraceEvent's order, no space, integers without sign or leading
// zero (but the timing fields, which may be negative), strings of
// printable ASCII without escapes, and the optional keys (kind; now, ttl
// and expires; replaced) either present or not. decodeCanonical reads
// that form and nothing else, comparing each key with the whole literal
// that must come next: anything unexpected makes it give up, and the line
// goes to decode, which accepts the same lines and more and says what is
// wrong with the rest. FuzzCanonical holds the two paths to the same
// values, and both to what encoding/json reads.

// internMax is the longest string the Reader shares between lines; a
// longer one (no trace core writes has one) is copied each time.
const internMax = 64

// internSlots is the size of the Reader's table of shared strings: more
// than the threads, processes and holders a trace has live at one time.
const (
	internBits  = 10
	internSlots = 1 << internBits
)

// interner hands out one string per distinct value of a line's string
// fields, so that lines do not allocate and the checker compares strings
// that are mostly the same pointer. Each value hashes to one slot; a
// value that collides takes the slot over. Its memory is fixed: at most
// internSlots strings of at most internMax bytes.
type interner struct {
	slots [internSlots]internSlot
}

// internSlot is a shared string with its first and last eight bytes
// (the whole string, zero-padded, when it is shorter than eight): for a
// string of up to 16 bytes, comparing the words and the length compares
// the strings.
type internSlot struct {
	head, tail uint64
	s          string
}

// intern returns b as a string, shared with earlier lines when it can be.
func (in *interner) intern(b []byte) string {
	n := len(b)
	if n == 0 {
		return ""
	}
	if n > internMax {
		return string(b)
	}
	var head, tail uint64
	if n >= 8 {
		head, tail = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	} else {
		for k := n - 1; k >= 0; k-- {
			head = head<<8 | uint64(b[k])
		}
	}
	x := (head ^ (tail<<29 | tail>>35) ^ uint64(n)<<56) * 0x9E3779B97F4A7C15
	slot := &in.slots[x>>(64-internBits)]
	if slot.head == head && slot.tail == tail && len(slot.s) == n && (n <= 16 || slot.s == string(b)) {
		return slot.s
	}
	*slot = internSlot{head, tail, string(b)}
	return slot.s
}

// canonNat reads a non-negative integer that fits an int64, without a
// leading zero, at b[i:]; it returns the value and the index after it, or
// -1 for anything else. (19 digits cannot overflow a uint64.) It is small
// enough to be inlined.
func canonNat(b []byte, i int) (uint64, int) {
	start := i
	var v uint64
	for ; i < len(b); i++ {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		v = v*10 + uint64(c)
	}
	if n := i - start; n == 0 || n > 19 || v > math.MaxInt64 || (n > 1 && b[start] == '0') {
		return 0, -1
	}
	return v, i
}

// canonInt reads an integer of either sign (not -0, not math.MinInt64)
// as canonNat does.
func canonInt(b []byte, i int) (int64, int) {
	if i < len(b) && b[i] == '-' {
		v, j := canonNat(b, i+1)
		if j < 0 || v == 0 {
			return 0, -1
		}
		return -int64(v), j
	}
	v, j := canonNat(b, i)
	return int64(v), j
}

// canonStr reads the body of a string of printable ASCII without escapes
// that starts at b[i:], after its opening quote; it returns the index of
// the closing quote, or -1. It looks at eight bytes at a time (the bytes
// past the end of b read as zero, a control character), and is small
// enough to be inlined.
func canonStr(b []byte, i int) int {
	for {
		var x uint64
		if len(b)-i >= 8 {
			x = binary.LittleEndian.Uint64(b[i:])
		} else {
			for k := len(b) - 1; k >= i; k-- {
				x = x<<8 | uint64(b[k])
			}
		}
		if m := notPlain(x); m != 0 {
			if i += mathbits.TrailingZeros64(m) / 8; i < len(b) && b[i] == '"' {
				return i
			}
			return -1
		}
		i += 8
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// notPlain returns a word with the high bit set in the lowest byte of x
// that a string cannot hold as it is (a control character, a quote, a
// backslash, or a byte of 0x80 or more; see plainASCII). Bits above that
// byte may be set too (a subtraction's borrow carries up), never below
// it: only the lowest set bit means something.
func notPlain(x uint64) uint64 {
	q := x ^ ('"' * ones)
	bs := x ^ ('\\' * ones)
	return ((x-0x20*ones) & ^x | (q-ones) & ^q | (bs-ones) & ^bs | x) & highs
}

// decodeCanonical parses line into r.ev when it is in core's own form,
// and reports whether it was; else r.ev is to be overwritten by decode.
func (r *Reader) decodeCanonical(line []byte) bool {
	end := r.canonical(line)
	switch {
	case end < 0:
		return false
	case end == len(line):
		return true
	}
	return end == len(line)-1 && line[end] == '\r'
}

// canonicalLine parses the line at the start of buf, the Reader's unread
// bytes, into r.ev when it is in core's own form and ends in a newline
// ("\n" or "\r\n") within buf and within MaxLineBytes, without looking
// for the newline first; it returns the line's length with its newline,
// or 0, and then r.ev is to be overwritten by decode.
func (r *Reader) canonicalLine(buf []byte) int {
	end := r.canonical(buf)
	switch {
	case end < 0:
		return 0
	case end < len(buf) && buf[end] == '\n' && end <= MaxLineBytes:
		return end + 1
	case end+1 < len(buf) && buf[end] == '\r' && buf[end+1] == '\n' && end+1 <= MaxLineBytes:
		return end + 2
	}
	return 0
}

// canonical parses a line in core's form at the start of b into r.ev and
// returns the index after its closing brace, or -1 when b does not start
// with one. What follows the brace is the caller's to check. Each key
// check compares a constant, which the compiler does in a few word loads.
func (r *Reader) canonical(b []byte) int {
	// Every field is set below, the optional ones here (cheaper than
	// clearing the struct, pointers and all).
	ev := &r.ev
	ev.Kind, ev.Now, ev.TTL, ev.Expires, ev.Replaced, ev.Call, ev.Return, ev.Output = "", 0, 0, 0, 0, 0, 0, false
	if len(b) < 8 || string(b[:8]) != `{"tick":` {
		return -1
	}
	var i int
	if ev.Tick, i = canonNat(b, 8); i < 0 {
		return -1
	}
	switch {
	case len(b)-i >= 24 && string(b[i:i+24]) == `,"read":false,"action":"`:
		ev.Read = false
		i += 24
	case len(b)-i >= 23 && string(b[i:i+23]) == `,"read":true,"action":"`:
		ev.Read = true
		i += 23
	default:
		return -1
	}
	j := canonStr(b, i)
	if j < 0 {
		return -1
	}
	a, ok := actionOf(b[i:j])
	if !ok {
		return -1
	}
	ev.Action = a
	i = j + 1
	if len(b)-i < 11 || string(b[i:i+11]) != `,"thread":"` {
		return -1
	}
	i += 11
	if j = canonStr(b, i); j <= i { // an empty thread is decode's to refuse
		return -1
	}
	thread := b[i:j]
	i = j + 1
	if len(b)-i < 9 || string(b[i:i+9]) != `,"proc":"` {
		return -1
	}
	i += 9
	if j = canonStr(b, i); j < 0 {
		return -1
	}
	proc := b[i:j]
	i = j + 1
	if len(b)-i < 11 || string(b[i:i+11]) != `,"holder":"` {
		return -1
	}
	i += 11
	if j = canonStr(b, i); j < 0 {
		return -1
	}
	holder := b[i:j]
	i = j + 1
	var v uint64
	if len(b)-i < 7 || string(b[i:i+7]) != `,"msg":` {
		return -1
	}
	if v, i = canonNat(b, i+7); i < 0 {
		return -1
	}
	ev.Msg = core.Seq(v)
	if len(b)-i < 7 || string(b[i:i+7]) != `,"req":` {
		return -1
	}
	if v, i = canonNat(b, i+7); i < 0 {
		return -1
	}
	ev.Req = core.RequestID(v)
	if len(b)-i < 7 || string(b[i:i+7]) != `,"run":` {
		return -1
	}
	if v, i = canonNat(b, i+7); i < 0 {
		return -1
	}
	ev.Run = core.RunID(v)
	if len(b)-i < 9 || string(b[i:i+9]) != `,"taken":` {
		return -1
	}
	if v, i = canonNat(b, i+9); i < 0 {
		return -1
	}
	ev.Taken = core.Seq(v)
	if len(b)-i < 10 || string(b[i:i+10]) != `,"lease":"` {
		return -1
	}
	i += 10
	if j = canonStr(b, i); j < 0 {
		return -1
	}
	lease := b[i:j]
	i = j + 1
	if i = r.canonTail(b, i); i < 0 {
		return -1
	}
	ev.Thread = core.ThreadID(r.shared.intern(thread))
	ev.Proc = r.shared.intern(proc)
	ev.Holder = core.Holder(r.shared.intern(holder))
	ev.Lease = ev.Holder
	if len(lease) != len(holder) || len(lease) > 0 && (lease[len(lease)-1] != holder[len(holder)-1] || string(lease) != string(holder)) {
		ev.Lease = core.Holder(r.shared.intern(lease))
	}
	return i
}

// canonTail reads what follows the lease, from b[i:]: the optional keys
// in core's order, and the closing brace; it returns the index after the
// brace, or -1.
func (r *Reader) canonTail(b []byte, i int) int {
	ev := &r.ev
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	if len(b)-i >= 9 && string(b[i:i+9]) == `,"kind":"` {
		i += 9
		j := canonStr(b, i)
		if j < 0 {
			return -1
		}
		switch string(b[i:j]) {
		case core.PlanKindRun:
			ev.Kind = core.PlanKindRun
		case core.PlanKindReply:
			ev.Kind = core.PlanKindReply
		case "":
		default:
			return -1
		}
		i = j + 1
	}
	if len(b)-i >= 7 && string(b[i:i+7]) == `,"now":` {
		if ev.Now, i = canonInt(b, i+7); i < 0 {
			return -1
		}
		if len(b)-i < 7 || string(b[i:i+7]) != `,"ttl":` {
			return -1
		}
		if ev.TTL, i = canonInt(b, i+7); i < 0 {
			return -1
		}
		if len(b)-i < 11 || string(b[i:i+11]) != `,"expires":` {
			return -1
		}
		if ev.Expires, i = canonInt(b, i+11); i < 0 {
			return -1
		}
	}
	if len(b)-i >= 12 && string(b[i:i+12]) == `,"replaced":` {
		if ev.Replaced, i = canonInt(b, i+12); i < 0 {
			return -1
		}
	}
	if len(b)-i >= 14 && string(b[i:i+14]) == `,"output":true` {
		ev.Output = true
		i += 14
	}
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	return -1
}
