package tracecheck

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"testing"

	"github.com/threadclaim/threadclaim/core"
)

// FuzzCanonical guards the reader's fast path: every line it takes, the
// general decoder takes too, with the same values, so the fast path can
// never accept what the strict reader would refuse.
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
	f.Add([]byte(`{"tick":1,"read":false,"action":"Claim","thread":"t","proc":"p","holder":"h","msg":0,"req":0,"run":0,"taken":0,"lease":"h","now":-5,"ttl":10,"expires":5,"replaced":3}` + "\r"))
	f.Fuzz(func(t *testing.T, line []byte) {
		fast := Reader{}
		if !fast.decodeCanonical(line) {
			return
		}
		slow := Reader{}
		if err := slow.decode(line); err != nil {
			t.Fatalf("the fast path took %q, the decoder refuses it: %v", line, err)
		}
		if fast.ev != slow.ev {
			t.Fatalf("%q: fast path %+v, decoder %+v", line, fast.ev, slow.ev)
		}
	})
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
	if actionIndex("Lapsed") != -1 {
		t.Error("an unknown action has an index")
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
