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
// -1 for anything else. (19 digits cannot overflow a uint64.)
func canonNat(b []byte, i int) (uint64, int) {
	// Most of a line's integers are one digit (msg, req and run are 0
	// on most lines).
	if i+1 < len(b) && b[i]-'0' <= 9 && b[i+1]-'0' > 9 {
		return uint64(b[i] - '0'), i + 1
	}
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
// the closing quote, or -1. It looks at eight bytes at a time.
func canonStr(b []byte, i int) int {
	for len(b)-i >= 8 {
		if m := notPlain(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			i += mathbits.TrailingZeros64(m) / 8
			if b[i] == '"' {
				return i
			}
			return -1
		}
		i += 8
	}
	for ; i < len(b); i++ {
		if !plainASCII[b[i]] {
			if b[i] == '"' {
				return i
			}
			return -1
		}
	}
	return -1
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
// Each key check compares a constant, which the compiler does in a few
// word loads.
func (r *Reader) decodeCanonical(line []byte) bool {
	ev := &r.ev
	*ev = core.TraceEvent{}
	b := line
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	if len(b) < 8 || string(b[:8]) != `{"tick":` {
		return false
	}
	var i int
	if ev.Tick, i = canonNat(b, 8); i < 0 {
		return false
	}
	switch {
	case len(b)-i >= 24 && string(b[i:i+24]) == `,"read":false,"action":"`:
		i += 24
	case len(b)-i >= 23 && string(b[i:i+23]) == `,"read":true,"action":"`:
		ev.Read = true
		i += 23
	default:
		return false
	}
	j := canonStr(b, i)
	if j < 0 {
		return false
	}
	a, ok := actionOf(b[i:j])
	if !ok {
		return false
	}
	ev.Action = a
	i = j + 1
	if len(b)-i < 11 || string(b[i:i+11]) != `,"thread":"` {
		return false
	}
	i += 11
	if j = canonStr(b, i); j <= i { // an empty thread is decode's to refuse
		return false
	}
	thread := b[i:j]
	i = j + 1
	if len(b)-i < 9 || string(b[i:i+9]) != `,"proc":"` {
		return false
	}
	i += 9
	if j = canonStr(b, i); j < 0 {
		return false
	}
	proc := b[i:j]
	i = j + 1
	if len(b)-i < 11 || string(b[i:i+11]) != `,"holder":"` {
		return false
	}
	i += 11
	if j = canonStr(b, i); j < 0 {
		return false
	}
	holder := b[i:j]
	i = j + 1
	var v uint64
	if len(b)-i < 7 || string(b[i:i+7]) != `,"msg":` {
		return false
	}
	if v, i = canonNat(b, i+7); i < 0 {
		return false
	}
	ev.Msg = core.Seq(v)
	if len(b)-i < 7 || string(b[i:i+7]) != `,"req":` {
		return false
	}
	if v, i = canonNat(b, i+7); i < 0 {
		return false
	}
	ev.Req = core.RequestID(v)
	if len(b)-i < 7 || string(b[i:i+7]) != `,"run":` {
		return false
	}
	if v, i = canonNat(b, i+7); i < 0 {
		return false
	}
	ev.Run = core.RunID(v)
	if len(b)-i < 9 || string(b[i:i+9]) != `,"taken":` {
		return false
	}
	if v, i = canonNat(b, i+9); i < 0 {
		return false
	}
	ev.Taken = core.Seq(v)
	if len(b)-i < 10 || string(b[i:i+10]) != `,"lease":"` {
		return false
	}
	i += 10
	if j = canonStr(b, i); j < 0 {
		return false
	}
	lease := b[i:j]
	i = j + 1
	if !r.canonTail(b, i) {
		return false
	}
	ev.Thread = core.ThreadID(r.shared.intern(thread))
	ev.Proc = r.shared.intern(proc)
	ev.Holder = core.Holder(r.shared.intern(holder))
	ev.Lease = ev.Holder
	if string(lease) != string(holder) {
		ev.Lease = core.Holder(r.shared.intern(lease))
	}
	return true
}

// canonTail reads what follows the lease, from b[i:]: the optional keys
// in core's order, and the closing brace that ends the line.
func (r *Reader) canonTail(b []byte, i int) bool {
	ev := &r.ev
	if len(b)-i == 1 {
		return b[i] == '}'
	}
	if len(b)-i >= 9 && string(b[i:i+9]) == `,"kind":"` {
		i += 9
		j := canonStr(b, i)
		if j < 0 {
			return false
		}
		switch string(b[i:j]) {
		case core.PlanKindRun:
			ev.Kind = core.PlanKindRun
		case core.PlanKindReply:
			ev.Kind = core.PlanKindReply
		case "":
		default:
			return false
		}
		i = j + 1
	}
	if len(b)-i >= 7 && string(b[i:i+7]) == `,"now":` {
		if ev.Now, i = canonInt(b, i+7); i < 0 {
			return false
		}
		if len(b)-i < 7 || string(b[i:i+7]) != `,"ttl":` {
			return false
		}
		if ev.TTL, i = canonInt(b, i+7); i < 0 {
			return false
		}
		if len(b)-i < 11 || string(b[i:i+11]) != `,"expires":` {
			return false
		}
		if ev.Expires, i = canonInt(b, i+11); i < 0 {
			return false
		}
	}
	if len(b)-i >= 12 && string(b[i:i+12]) == `,"replaced":` {
		if ev.Replaced, i = canonInt(b, i+12); i < 0 {
			return false
		}
	}
	return len(b)-i == 1 && b[i] == '}'
}
