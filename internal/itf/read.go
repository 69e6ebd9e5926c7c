package itf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Read reads an ITF trace, as MarshalJSON writes it, back into Values:
// what a reader of the file gets, to be checked against what was meant
// (explore's Trace.CheckITF). Records keep their fields in the file's
// order; "#meta" is read as plain JSON. It returns an error wrapping
// ErrFormat for a document it cannot read.
func Read(data []byte) (Trace, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var t Trace
	err := object(dec, func(key string) error {
		switch key {
		case "#meta":
			return dec.Decode(&t.Meta)
		case "vars":
			return dec.Decode(&t.Vars)
		case "states":
			return list(dec, func() error {
				s := State{Values: map[string]Value{}}
				err := object(dec, func(name string) error {
					if name == "#meta" {
						return dec.Decode(&s.Meta)
					}
					v, err := readValue(dec)
					s.Values[name] = v
					return err
				})
				t.States = append(t.States, s)
				return err
			})
		}
		var skip json.RawMessage
		return dec.Decode(&skip)
	})
	if err != nil {
		return Trace{}, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return t, nil
}

// object reads a JSON object, calling field for each key with the decoder
// at its value, which field must read.
func object(dec *json.Decoder, field func(string) error) error {
	if err := delim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if err := field(tok.(string)); err != nil {
			return err
		}
	}
	return delim(dec, '}')
}

// list reads a JSON array, calling elem with the decoder at each element.
func list(dec *json.Decoder, elem func() error) error {
	if err := delim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		if err := elem(); err != nil {
			return err
		}
	}
	return delim(dec, ']')
}

func delim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("want %v, got %v", d, tok)
	}
	return nil
}

// readValue reads one value: a string, a boolean, an integer, a sequence
// (an array), {"#bigint": s}, {"#tup": [...]}, {"#set": [...]},
// {"#map": [[k, v], ...]}, or a record.
func readValue(dec *json.Decoder) (Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return Value{}, err
	}
	elems := func() ([]Value, error) {
		var out []Value
		err := list(dec, func() error {
			v, err := readValue(dec)
			out = append(out, v)
			return err
		})
		return out, err
	}
	switch t := tok.(type) {
	case string:
		return Str(t), nil
	case bool:
		return Bool(t), nil
	case json.Number:
		n, err := strconv.ParseInt(string(t), 10, 64)
		return Int(n), err
	case json.Delim:
		if t == '[' {
			var out []Value
			for dec.More() {
				v, err := readValue(dec)
				if err != nil {
					return Value{}, err
				}
				out = append(out, v)
			}
			return Seq(out...), delim(dec, ']')
		}
		if t != '{' {
			return Value{}, fmt.Errorf("unexpected %v", t)
		}
	default:
		return Value{}, fmt.Errorf("unexpected %v", tok)
	}
	var v Value
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Value{}, err
		}
		key := tok.(string)
		switch {
		case first && key == "#bigint":
			var s string
			if err := dec.Decode(&s); err != nil {
				return Value{}, err
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return Value{}, err
			}
			v = Int(n)
		case first && (key == "#tup" || key == "#set"):
			es, err := elems()
			if err != nil {
				return Value{}, err
			}
			v = Tup(es...)
			if key == "#set" {
				v = Set(es...)
			}
		case first && key == "#map":
			pairs, err := elems()
			if err != nil {
				return Value{}, err
			}
			v = Value{Kind: KindMap}
			for _, p := range pairs {
				if p.Kind != KindSeq || len(p.Elems) != 2 {
					return Value{}, fmt.Errorf("a #map entry is not a [key, value] pair")
				}
				v.Keys, v.Elems = append(v.Keys, p.Elems[0]), append(v.Elems, p.Elems[1])
			}
		default:
			if !first && v.Kind != KindRec {
				return Value{}, fmt.Errorf("%q after a #-key", key)
			}
			f, err := readValue(dec)
			if err != nil {
				return Value{}, err
			}
			v.Kind = KindRec
			v.Names, v.Elems = append(v.Names, key), append(v.Elems, f)
		}
		first = false
	}
	if first {
		v = Rec(nil, nil) // {}: the empty record
	}
	return v, delim(dec, '}')
}

// Equal reports whether a and b are the same value: records field by
// field whatever their order, sets element by element whatever theirs,
// functions key by key.
func Equal(a, b Value) bool {
	if a.Kind != b.Kind || len(a.Elems) != len(b.Elems) {
		return false
	}
	switch a.Kind {
	case KindInt:
		return a.Int == b.Int
	case KindStr:
		return a.Str == b.Str
	case KindBool:
		return a.Bool == b.Bool
	case KindRec:
		for i, n := range a.Names {
			f, ok := b.Field(n)
			if !ok || !Equal(a.Elems[i], f) {
				return false
			}
		}
		return true
	case KindSet, KindMap:
		for i := range a.Elems {
			found := false
			for j := range b.Elems {
				if (a.Kind == KindSet || Equal(a.Keys[i], b.Keys[j])) && Equal(a.Elems[i], b.Elems[j]) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	for i := range a.Elems {
		if !Equal(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}
