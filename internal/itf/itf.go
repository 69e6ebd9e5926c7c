// Package itf holds TLA+ values and writes traces of them in the Informal
// Trace Format (ITF), the JSON that Apalache and Quint read and write
// (Apalache's ADR-015): a trace object with "#meta", "vars" and "states";
// each state an object with a value for every variable; integers as
// {"#bigint": "n"}, functions as {"#map": [[k, v], ...]}, tuples as
// {"#tup": [...]}, sets as {"#set": [...]}, sequences as JSON arrays,
// records as JSON objects, strings and booleans as themselves.
//
// The trace explorer (package explore) builds its spec states as Values,
// from a Go trace or from a TLC counterexample, so both export the same
// way; Validate checks a document against the format's rules.
package itf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Kind is the kind of a Value.
type Kind uint8

// The kinds of value the spec's states hold.
const (
	KindInt Kind = iota
	KindStr
	KindBool
	KindSeq // a sequence (a function of 1..n), a JSON array in ITF
	KindRec // a record, a JSON object in ITF
	KindMap // a function, {"#map": ...} in ITF
	KindSet
	KindTup
)

// Value is a TLA+ value.
type Value struct {
	Kind  Kind
	Int   int64
	Str   string
	Bool  bool
	Elems []Value  // Seq, Set, Tup; Map's and Rec's values
	Keys  []Value  // Map's keys, in order
	Names []string // Rec's field names, in order
}

// Int returns the integer n.
func Int(n int64) Value { return Value{Kind: KindInt, Int: n} }

// Str returns the string s.
func Str(s string) Value { return Value{Kind: KindStr, Str: s} }

// Bool returns the boolean b.
func Bool(b bool) Value { return Value{Kind: KindBool, Bool: b} }

// Seq returns the sequence of elems.
func Seq(elems ...Value) Value { return Value{Kind: KindSeq, Elems: append([]Value{}, elems...)} }

// Set returns the set of elems.
func Set(elems ...Value) Value { return Value{Kind: KindSet, Elems: append([]Value{}, elems...)} }

// Tup returns the tuple of elems.
func Tup(elems ...Value) Value { return Value{Kind: KindTup, Elems: append([]Value{}, elems...)} }

// Rec returns the record with the fields names and values vals.
func Rec(names []string, vals []Value) Value {
	return Value{Kind: KindRec, Names: append([]string{}, names...), Elems: append([]Value{}, vals...)}
}

// Map returns the function mapping keys[i] to vals[i].
func Map(keys, vals []Value) Value {
	return Value{Kind: KindMap, Keys: append([]Value{}, keys...), Elems: append([]Value{}, vals...)}
}

// Field returns a record's field, or a map's value at the string key name.
func (v Value) Field(name string) (Value, bool) {
	for i := range v.Elems {
		switch {
		case v.Kind == KindRec && v.Names[i] == name,
			v.Kind == KindMap && v.Keys[i].Kind == KindStr && v.Keys[i].Str == name:
			return v.Elems[i], true
		}
	}
	return Value{}, false
}

// TLA renders the value as TLA+ (as TLC prints it): 3, "idle", TRUE,
// <<1, 2>>, [holder |-> 1, expired |-> FALSE], ("p1" :> 0 @@ "p2" :> 1),
// {1, 2}.
func (v Value) TLA() string {
	var b strings.Builder
	v.tla(&b)
	return b.String()
}

func (v Value) tla(b *strings.Builder) {
	list := func(open, sep, close string, f func(i int)) {
		b.WriteString(open)
		for i := range v.Elems {
			if i > 0 {
				b.WriteString(sep)
			}
			f(i)
		}
		b.WriteString(close)
	}
	switch v.Kind {
	case KindInt:
		b.WriteString(strconv.FormatInt(v.Int, 10))
	case KindStr:
		b.WriteString(strconv.Quote(v.Str))
	case KindBool:
		b.WriteString(strings.ToUpper(strconv.FormatBool(v.Bool)))
	case KindSeq, KindTup:
		list("<<", ", ", ">>", func(i int) { v.Elems[i].tla(b) })
	case KindSet:
		list("{", ", ", "}", func(i int) { v.Elems[i].tla(b) })
	case KindRec:
		list("[", ", ", "]", func(i int) { b.WriteString(v.Names[i] + " |-> "); v.Elems[i].tla(b) })
	case KindMap:
		if len(v.Elems) == 0 {
			b.WriteString("<<>>")
			return
		}
		list("(", " @@ ", ")", func(i int) { v.Keys[i].tla(b); b.WriteString(" :> "); v.Elems[i].tla(b) })
	}
}

// MarshalJSON writes the value in ITF's encoding.
func (v Value) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := v.itf(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (v Value) itf(b *bytes.Buffer) error {
	elems := func(open, close string, vals []Value) error {
		b.WriteString(open)
		for i, e := range vals {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := e.itf(b); err != nil {
				return err
			}
		}
		b.WriteString(close)
		return nil
	}
	switch v.Kind {
	case KindInt:
		fmt.Fprintf(b, `{"#bigint":"%d"}`, v.Int)
	case KindStr:
		s, _ := json.Marshal(v.Str)
		b.Write(s)
	case KindBool:
		b.WriteString(strconv.FormatBool(v.Bool))
	case KindSeq:
		return elems("[", "]", v.Elems)
	case KindTup:
		return elems(`{"#tup":[`, "]}", v.Elems)
	case KindSet:
		return elems(`{"#set":[`, "]}", v.Elems)
	case KindRec:
		b.WriteByte('{')
		for i, e := range v.Elems {
			if strings.HasPrefix(v.Names[i], "#") {
				return fmt.Errorf("itf: record field %q starts with #", v.Names[i])
			}
			if i > 0 {
				b.WriteByte(',')
			}
			name, _ := json.Marshal(v.Names[i])
			b.Write(name)
			b.WriteByte(':')
			if err := e.itf(b); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case KindMap:
		pairs := make([]Value, len(v.Elems))
		for i := range v.Elems {
			pairs[i] = Seq(v.Keys[i], v.Elems[i])
		}
		return elems(`{"#map":[`, "]}", pairs)
	default:
		return fmt.Errorf("itf: value of unknown kind %d", v.Kind)
	}
	return nil
}

// State is one state of a trace: a value for each of the trace's
// variables, and metadata ("index", and what the explorer knows: the
// action, the trace line).
type State struct {
	Meta   map[string]any
	Values map[string]Value
}

// Trace is a trace in ITF.
type Trace struct {
	Meta   map[string]any
	Vars   []string
	States []State
}

// MarshalJSON writes the trace in ITF: "#meta", "vars", "states", each
// state's "#meta" first and its variables in Vars' order.
func (t Trace) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	meta, err := json.Marshal(t.Meta)
	if err != nil {
		return nil, err
	}
	vars, _ := json.Marshal(t.Vars)
	fmt.Fprintf(&b, "{\n\"#meta\": %s,\n\"vars\": %s,\n\"states\": [", meta, vars)
	for i, s := range t.States {
		if i > 0 {
			b.WriteByte(',')
		}
		m := map[string]any{"index": i}
		for k, v := range s.Meta {
			m[k] = v
		}
		meta, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\n{\"#meta\":%s", meta)
		for _, name := range t.Vars {
			v, ok := s.Values[name]
			if !ok {
				return nil, fmt.Errorf("itf: state %d has no value for %s", i, name)
			}
			enc, err := v.MarshalJSON()
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, ",%q:%s", name, enc)
		}
		b.WriteByte('}')
	}
	b.WriteString("\n]\n}\n")
	return b.Bytes(), nil
}

// ErrFormat: a document breaks a rule of the Informal Trace Format.
var ErrFormat = errors.New("not ITF")

var bigint = regexp.MustCompile(`^-?[0-9]+$`)

// Validate checks data against the format's rules: a trace object whose
// keys are "#meta" (an object), "params" and "vars" (arrays of distinct
// strings), "states" (an array of objects) and "loop" (an index into
// states); every state defines every variable of vars and params (in the
// first state), and nothing else but "#meta"; every value is a string, a
// boolean, an integer (a JSON integer within ±(2^53-1), or
// {"#bigint": "[-][0-9]+"}), a list, {"#tup": list}, {"#set": list},
// {"#map": list of [key, value] pairs}, or a record whose field names do
// not start with '#'. JSON null and fractions are not values.
func Validate(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: more than one JSON value", ErrFormat)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: the trace is not a JSON object", ErrFormat)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrFormat, fmt.Sprintf(format, args...))
	}
	for k := range top {
		switch k {
		case "#meta", "params", "vars", "states", "loop":
		default:
			return bad("unknown top-level field %q", k)
		}
	}
	if m, ok := top["#meta"]; ok {
		if _, ok := m.(map[string]any); !ok {
			return bad("#meta is not an object")
		}
	}
	names := func(field string) ([]string, error) {
		raw, ok := top[field]
		if !ok {
			return nil, nil
		}
		list, ok := raw.([]any)
		if !ok {
			return nil, bad("%s is not an array", field)
		}
		seen := map[string]bool{}
		var out []string
		for _, x := range list {
			s, ok := x.(string)
			if !ok || seen[s] {
				return nil, bad("%s holds %v: not a distinct string", field, x)
			}
			seen[s] = true
			out = append(out, s)
		}
		return out, nil
	}
	if _, ok := top["vars"]; !ok {
		return bad("no vars")
	}
	vars, err := names("vars")
	if err != nil {
		return err
	}
	params, err := names("params")
	if err != nil {
		return err
	}
	states, ok := top["states"].([]any)
	if !ok {
		return bad("states is missing or not an array")
	}
	if l, ok := top["loop"]; ok {
		n, err := integer(l)
		if err != nil || n < 0 || n >= int64(len(states)) {
			return bad("loop %v is not an index into states", l)
		}
	}
	for i, raw := range states {
		st, ok := raw.(map[string]any)
		if !ok {
			return bad("state %d is not an object", i)
		}
		want := map[string]bool{}
		for _, v := range vars {
			want[v] = true
		}
		if i == 0 {
			for _, p := range params {
				want[p] = true
			}
		}
		for k, v := range st {
			if k == "#meta" {
				if _, ok := v.(map[string]any); !ok {
					return bad("state %d: #meta is not an object", i)
				}
				continue
			}
			if !want[k] {
				return bad("state %d: %q is not a variable", i, k)
			}
			delete(want, k)
			if err := value(v); err != nil {
				return bad("state %d: %s: %v", i, k, err)
			}
		}
		for k := range want {
			return bad("state %d: no value for %q", i, k)
		}
	}
	return nil
}

const maxJSONInt = 1<<53 - 1

func integer(x any) (int64, error) {
	n, ok := x.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v is not a number", x)
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || i > maxJSONInt || i < -maxJSONInt {
		return 0, fmt.Errorf("%s is not an integer within ±(2^53-1)", n)
	}
	return i, nil
}

// value checks one ITF expression.
func value(x any) error {
	switch v := x.(type) {
	case string, bool:
		return nil
	case json.Number:
		_, err := integer(v)
		return err
	case []any:
		for i, e := range v {
			if err := value(e); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return nil
	case map[string]any:
		for _, tag := range []string{"#bigint", "#tup", "#set", "#map"} {
			inner, ok := v[tag]
			if !ok {
				continue
			}
			if len(v) != 1 {
				return fmt.Errorf("%s with other fields", tag)
			}
			switch tag {
			case "#bigint":
				s, ok := inner.(string)
				if !ok || !bigint.MatchString(s) {
					return fmt.Errorf("#bigint %v is not a string of digits", inner)
				}
				return nil
			case "#map":
				pairs, ok := inner.([]any)
				if !ok {
					return fmt.Errorf("#map is not an array")
				}
				for i, p := range pairs {
					kv, ok := p.([]any)
					if !ok || len(kv) != 2 {
						return fmt.Errorf("#map[%d] is not a [key, value] pair", i)
					}
					if err := value(p); err != nil {
						return fmt.Errorf("#map[%d]: %w", i, err)
					}
				}
				return nil
			default:
				if _, ok := inner.([]any); !ok {
					return fmt.Errorf("%s is not an array", tag)
				}
				return value(inner)
			}
		}
		for k, e := range v {
			if strings.HasPrefix(k, "#") {
				return fmt.Errorf("record field %q starts with #", k)
			}
			if err := value(e); err != nil {
				return fmt.Errorf(".%s: %w", k, err)
			}
		}
		return nil
	case nil:
		return errors.New("null is not a value")
	}
	return fmt.Errorf("%v is not a value", x)
}
